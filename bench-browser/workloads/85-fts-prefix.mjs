export default {
  name: 'fts-prefix', group: 'fts', tables: ['docs_fts', 'docs'], title: '50 prefix queries (first 3 letters), top 20 by rank',
  async setup(db, ctx) { ctx.d = await ctx.fts.loadDocs(db, ctx); },
  run: (db, ctx) => ctx.fts.top20(db, ctx, ctx.fts.pickWords(ctx.d, 50).map((w) => ({ fts: `${w.slice(0, 3)}*`, pg: `${w.slice(0, 3)}:*` }))),
  check: (db, ctx, out) => out,
};
