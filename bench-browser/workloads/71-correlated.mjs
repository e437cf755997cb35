export default {
  name: 'correlated', group: 'app', title: 'orders above their customer\'s average: a correlated subquery',
  setup: (db, ctx) => ctx.loadJoin(db),
  async run(db, ctx) {
    const [r] = await db.query('SELECT count(*) AS n, sum(o.amount) AS s FROM orders o WHERE o.amount > (SELECT avg(p.amount) FROM orders p WHERE p.customer_id = o.customer_id)', []);
    return { n: ctx.num(r.n), s: ctx.num(r.s) };
  },
  check: (db, ctx, out) => out,
};
