export default {
  name: 'update-range', group: 'update', title: '100 range updates by key range, one transaction',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const w = ctx.scale(100);
    const los = ctx.data.ints(100, ctx.rows, 10);
    await db.transaction(async (tx) => { for (let i = 0; i < los.length; i++) await tx.run('UPDATE t1 SET g = ? WHERE id BETWEEN ? AND ?', [i, los[i], los[i] + w]); });
  },
  check: (db, ctx) => ctx.tableCheck(db),
};
