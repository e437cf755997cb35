export default {
  name: 'fts-one-word', group: 'fts', tables: ['docs_fts', 'docs'], title: '50 one-word full-text queries, top 20 by rank',
  async setup(db, ctx) { ctx.d = await ctx.fts.loadDocs(db, ctx); },
  run: (db, ctx) => ctx.fts.top20(db, ctx, ctx.fts.pickWords(ctx.d, 50).map((w) => ({ fts: w, pg: w }))),
  check: (db, ctx, out) => out,
};
