export default {
  name: 'join-group', group: 'app', title: 'every order joined to its customer, GROUP BY city',
  setup: (db, ctx) => ctx.loadJoin(db),
  async run(db, ctx) {
    const rows = await db.query('SELECT c.city, count(*) AS n, sum(o.amount) AS s, max(o.amount) AS hi FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.city ORDER BY c.city', []);
    return rows.map((r) => [r.city, ctx.num(r.n), ctx.num(r.s), ctx.num(r.hi)]);
  },
  check: (db, ctx, out) => out,
};
