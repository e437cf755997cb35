export default {
  name: 'update-pk', group: 'update', title: '1,000 updates by key, one transaction',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const keys = ctx.data.ints(ctx.scale(1000), ctx.rows, 8);
    const vals = ctx.data.ints(keys.length, 100000, 9);
    await db.transaction(async (tx) => { for (let i = 0; i < keys.length; i++) await tx.run('UPDATE t1 SET b = ? WHERE id = ?', [vals[i], keys[i] + 1]); });
  },
  check: (db, ctx) => ctx.tableCheck(db),
};
