export default {
  name: 'fts-two-words', group: 'fts', tables: ['docs_fts', 'docs'], title: '50 two-word full-text queries (both words), top 20 by rank',
  async setup(db, ctx) { ctx.d = await ctx.fts.loadDocs(db, ctx); },
  run: (db, ctx) => {
    const w = ctx.fts.pickWords(ctx.d, 51);
    return ctx.fts.top20(db, ctx, w.slice(0, 50).map((a, i) => ({ fts: `${a} ${w[i + 1]}`, pg: `${a} & ${w[i + 1]}` })));
  },
  check: (db, ctx, out) => out,
};
