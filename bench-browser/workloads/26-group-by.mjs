export default {
  name: 'group-by', group: 'read', title: 'GROUP BY g with count, sum, avg',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db) {
    const rows = await db.query('SELECT g, count(*) AS n, sum(b) AS s, avg(b) AS m FROM t1 GROUP BY g ORDER BY g', []);
    let n = 0, s = 0, m = 0;
    for (const r of rows) { n += Number(r.n); s += Number(r.s); m += Math.round(Number(r.m)); }
    return { groups: rows.length, n, s, m };
  },
  check: (db, ctx, out) => out,
};
