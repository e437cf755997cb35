export default {
  name: 'rank-partition', group: 'sql36', title: 'rank() OVER (PARTITION BY g ORDER BY b DESC): the top 3 of each group',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const [r] = await db.query('SELECT count(*) AS n, sum(b) AS s, sum(r) AS sr FROM (SELECT b, rank() OVER (PARTITION BY g ORDER BY b DESC) AS r FROM t1) x WHERE r <= 3', []);
    return { n: ctx.num(r.n), s: ctx.num(r.s), sr: ctx.num(r.sr) };
  },
  check: (db, ctx, out) => out,
};
