export default {
  name: 'anti-join', group: 'app', title: 'rows of t1 with no row in t2: NOT EXISTS and LEFT JOIN ... IS NULL',
  tables: ['t1', 't2'],
  async setup(db, ctx) {
    await ctx.loadT1(db);
    // Every third id of t1 has a row in t2.
    await db.exec('CREATE TABLE t2(id INTEGER PRIMARY KEY, v INTEGER)');
    const rows = [];
    for (let id = 3; id <= ctx.rows; id += 3) rows.push([id, id % 11]);
    await db.transaction((tx) => ctx.insertRows(tx, 't2', 2, rows));
  },
  async run(db, ctx) {
    const [a] = await db.query('SELECT count(*) AS n, sum(b) AS s FROM t1 WHERE NOT EXISTS (SELECT 1 FROM t2 WHERE t2.id = t1.id)', []);
    const [b] = await db.query('SELECT count(*) AS n, sum(t1.b) AS s FROM t1 LEFT JOIN t2 ON t2.id = t1.id WHERE t2.id IS NULL', []);
    return { notExists: [ctx.num(a.n), ctx.num(a.s)], leftJoin: [ctx.num(b.n), ctx.num(b.s)] };
  },
  check: (db, ctx, out) => out,
};
