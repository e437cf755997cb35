export default {
  name: 'case-aggregate', group: 'app', title: 'sum and count of CASE expressions, GROUP BY g % 10',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const rows = await db.query(`SELECT g % 10 AS k,
        sum(CASE WHEN b < 50000 THEN 1 ELSE 0 END) AS lo,
        sum(CASE WHEN b >= 50000 THEN b ELSE 0 END) AS hi,
        count(CASE WHEN c LIKE 'n%' THEN 1 END) AS n,
        sum(CASE g % 3 WHEN 0 THEN a WHEN 1 THEN -a ELSE 0 END) AS m
      FROM t1 GROUP BY g % 10 ORDER BY k`, []);
    return rows.map((r) => [ctx.num(r.k), ctx.num(r.lo), ctx.num(r.hi), ctx.num(r.n), ctx.num(r.m)]);
  },
  check: (db, ctx, out) => out,
};
