export default {
  name: 'create-index', group: 'schema', title: 'CREATE INDEX on 10,000 rows',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db) { await db.exec('CREATE INDEX t1_b ON t1(b)'); },
  async check(db, ctx) {
    const [r] = await db.query('SELECT count(*) AS n FROM t1 WHERE b BETWEEN ? AND ?', [20000, 30000]);
    return { range: Number(r.n), ...(await ctx.tableCheck(db)) };
  },
};
