export default {
  name: 'insert-autocommit', group: 'create', title: '1,000 inserts, each committed alone',
  async setup(db, ctx) { await db.exec(ctx.T1_SCHEMA); },
  async run(db, ctx) {
    const st = await db.prepare('INSERT INTO t1 VALUES (?,?,?,?,?)');
    for (const row of ctx.data.t1Rows(ctx.scale(1000), 2)) await st.run(row);
    await st.finalize();
  },
  check: (db, ctx) => ctx.tableCheck(db),
};
