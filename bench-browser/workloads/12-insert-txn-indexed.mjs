export default {
  name: 'insert-txn-indexed', group: 'create', title: '10,000 inserts in one transaction, index on b',
  async setup(db, ctx) { await db.exec(ctx.T1_SCHEMA); await db.exec('CREATE INDEX t1_b ON t1(b)'); },
  async run(db, ctx) {
    const rows = ctx.data.t1Rows(ctx.rows, 2);
    await db.transaction(async (tx) => { for (const row of rows) await tx.run('INSERT INTO t1 VALUES (?,?,?,?,?)', row); });
  },
  check: (db, ctx) => ctx.tableCheck(db),
};
