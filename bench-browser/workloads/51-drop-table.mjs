export default {
  name: 'drop-table', group: 'schema', title: 'DROP TABLE of 10,000 rows',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db) { await db.exec('DROP TABLE t1'); },
  async check(db) {
    try { await db.query('SELECT count(*) AS n FROM t1', []); return 'still there'; } catch { return 'dropped'; }
  },
};
