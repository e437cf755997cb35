export default {
  name: 'range-unindexed', group: 'read', title: '100 unindexed range aggregates (count, avg over b BETWEEN)',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const st = await db.prepare('SELECT count(*) AS n, avg(b) AS m FROM t1 WHERE b BETWEEN ? AND ?');
    let n = 0, s = 0;
    for (const lo of ctx.data.ints(100, 99000, 5)) {
      const [r] = await st.all([lo, lo + 1000]);
      const c = Number(r.n); n += c; if (c) s += Math.round(Number(r.m) * c);
    }
    await st.finalize();
    return { n, s };
  },
  check: (db, ctx, out) => out,
};
