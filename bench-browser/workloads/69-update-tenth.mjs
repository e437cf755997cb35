export default {
  name: 'update-tenth', group: 'app', title: 'UPDATE ... SET b = b + 1 over a tenth of the table (g < 10)',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db) {
    await db.run('UPDATE t1 SET b = b + 1 WHERE g < 10', []);
  },
  check: (db, ctx) => ctx.tableCheck(db),
};
