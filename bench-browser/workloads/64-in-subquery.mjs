export default {
  name: 'in-subquery', group: 'app', title: '17 x orders WHERE customer_id IN (SELECT ... by city)',
  setup: (db, ctx) => ctx.loadJoin(db),
  async run(db, ctx) {
    let n = 0, s = 0;
    for (let city = 0; city < 17; city++) {
      const [r] = await db.query('SELECT count(*) AS n, sum(amount) AS s FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE city = ?)', [`city ${city}`]);
      n += ctx.num(r.n); s += ctx.num(r.s) ?? 0;
    }
    return { n, s };
  },
  check: (db, ctx, out) => out,
};
