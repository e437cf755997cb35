export default {
  name: 'join-three', group: 'app', title: 'three tables: orders, their customers and their t1 rows, GROUP BY city',
  tables: ['t1', 'customers', 'orders'],
  async setup(db, ctx) {
    await ctx.loadT1(db);
    await ctx.loadJoin(db);
  },
  async run(db, ctx) {
    const rows = await db.query('SELECT c.city, count(*) AS n, sum(t1.b) AS s FROM orders o JOIN customers c ON c.id = o.customer_id JOIN t1 ON t1.id = o.id WHERE o.amount < ? GROUP BY c.city ORDER BY c.city', [5000]);
    return rows.map((r) => [r.city, ctx.num(r.n), ctx.num(r.s)]);
  },
  check: (db, ctx, out) => out,
};
