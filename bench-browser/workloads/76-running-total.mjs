export default {
  name: 'running-total', group: 'sql36', title: 'a running total: sum(b) OVER (ORDER BY id) over the whole table',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const [r] = await db.query('SELECT count(*) AS n, max(rt) AS hi, sum(rt) AS s FROM (SELECT sum(b) OVER (ORDER BY id) AS rt FROM t1) x', []);
    return { n: ctx.num(r.n), hi: ctx.num(r.hi), s: ctx.num(r.s) };
  },
  check: (db, ctx, out) => out,
};
