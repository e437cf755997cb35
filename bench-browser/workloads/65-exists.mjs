export default {
  name: 'exists', group: 'app', title: '20 x customers WHERE EXISTS (an order above a threshold)',
  setup: (db, ctx) => ctx.loadJoin(db),
  async run(db, ctx) {
    let n = 0;
    for (let i = 0; i < 20; i++) {
      const [r] = await db.query('SELECT count(*) AS n FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.amount > ?)', [9000 + i * 50]);
      n += ctx.num(r.n);
    }
    return { n };
  },
  check: (db, ctx, out) => out,
};
