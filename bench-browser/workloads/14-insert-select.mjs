export default {
  name: 'insert-select', group: 'create', title: 'INSERT INTO t2 SELECT * FROM t1 (10,000 rows)',
  async setup(db, ctx) { await ctx.loadT1(db); await db.exec(ctx.T1_SCHEMA.replace('t1', 't2')); },
  async run(db) { await db.run('INSERT INTO t2 SELECT * FROM t1', []); },
  check: (db, ctx) => ctx.tableCheck(db, 't2'),
};
