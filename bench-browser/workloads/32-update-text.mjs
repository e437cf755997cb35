export default {
  name: 'update-text', group: 'update', title: '1,000 text updates by key, one transaction',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const keys = ctx.data.ints(ctx.scale(1000), ctx.rows, 12);
    const vals = ctx.data.ints(keys.length, 100000, 13);
    await db.transaction(async (tx) => { for (let i = 0; i < keys.length; i++) await tx.run('UPDATE t1 SET c = ? WHERE id = ?', [ctx.data.words(vals[i]), keys[i] + 1]); });
  },
  check: (db, ctx) => ctx.tableCheck(db),
};
