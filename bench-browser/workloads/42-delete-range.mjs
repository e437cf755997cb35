export default {
  name: 'delete-range', group: 'delete', title: '10 range deletes (a BETWEEN, unindexed)',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const w = ctx.scale(300);
    for (const lo of ctx.data.ints(10, ctx.rows, 18)) await db.run('DELETE FROM t1 WHERE a BETWEEN ? AND ?', [lo, lo + w]);
  },
  check: (db, ctx) => ctx.tableCheck(db),
};
