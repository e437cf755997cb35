export default {
  name: 'insert-multirow', group: 'create', title: '10,000 rows as multi-row inserts of 200, one transaction',
  async setup(db, ctx) { await db.exec(ctx.T1_SCHEMA); },
  async run(db, ctx) {
    const rows = ctx.data.t1Rows(ctx.rows, 2);
    await db.transaction((tx) => ctx.insertRows(tx, 't1', 5, rows, 200));
  },
  check: (db, ctx) => ctx.tableCheck(db),
};
