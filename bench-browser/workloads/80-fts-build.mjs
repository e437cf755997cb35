export default {
  name: 'fts-build', group: 'fts', tables: ['docs_fts', 'docs'], title: 'build a full-text index: 10,000 documents of 40 words in one transaction',
  async setup(db, ctx) { await ctx.fts.createFts(db, ctx); },
  async run(db, ctx) {
    const d = ctx.fts.docs(ctx, ctx.scale(10000));
    await db.transaction((tx) => ctx.fts.insertDocs(tx, ctx, d.rows));
  },
  async check(db, ctx) {
    const [r] = await db.query('SELECT count(*) AS n FROM docs', []);
    return ctx.num(r.n);
  },
};
