export default {
  name: 'delete-pk', group: 'delete', title: '1,000 deletes by key, one transaction',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const keys = ctx.data.ints(ctx.scale(1000), ctx.rows, 17);
    await db.transaction(async (tx) => { for (const k of keys) await tx.run('DELETE FROM t1 WHERE id = ?', [k + 1]); });
  },
  check: (db, ctx) => ctx.tableCheck(db),
};
