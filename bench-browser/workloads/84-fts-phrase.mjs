export default {
  name: 'fts-phrase', group: 'fts', tables: ['docs_fts', 'docs'], title: '50 two-word phrase queries, top 20 by rank',
  async setup(db, ctx) { ctx.d = await ctx.fts.loadDocs(db, ctx); },
  run: (db, ctx) => {
    // Phrases that occur: word pairs taken from the documents.
    const qs = [];
    for (let i = 0; i < 50; i++) {
      const words = ctx.d.rows[(i * 97) % ctx.d.rows.length][2].split(' ');
      qs.push({ fts: `"${words[i % 39]} ${words[i % 39 + 1]}"`, pg: `${words[i % 39]} <-> ${words[i % 39 + 1]}` });
    }
    return ctx.fts.top20(db, ctx, qs);
  },
  check: (db, ctx, out) => out,
};
