export default {
  name: 'fts-insert-commits', group: 'fts', tables: ['docs_fts', 'docs'], title: '1,000 documents inserted into a full-text index, one commit each',
  async setup(db, ctx) { await ctx.fts.loadDocs(db, ctx); },
  async run(db, ctx) {
    const extra = ctx.fts.docs(ctx, ctx.scale(1000), 9).rows.map(([id, cat, body]) => [id + 1000000, cat, body]);
    for (const r of extra) await db.transaction((tx) => ctx.fts.insertDocs(tx, ctx, [r]));
  },
  async check(db, ctx) {
    const [r] = await db.query('SELECT count(*) AS n FROM docs', []);
    return ctx.num(r.n);
  },
};
