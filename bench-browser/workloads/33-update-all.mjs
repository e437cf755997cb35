export default {
  name: 'update-all', group: 'update', title: 'UPDATE t1 SET b = b + 1 (every row)',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db) { await db.run('UPDATE t1 SET b = b + 1', []); },
  check: (db, ctx) => ctx.tableCheck(db),
};
