export default {
  name: 'order-limit', group: 'read', title: '100 ORDER BY b LIMIT 10 queries (no index on b)',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const st = await db.prepare('SELECT a, b, c FROM t1 WHERE b >= ? ORDER BY b LIMIT 10');
    let n = 0, s = 0;
    for (const lo of ctx.data.ints(100, 90000, 6)) for (const r of await st.all([lo])) { n++; s += Number(r.b); }
    await st.finalize();
    return { n, s };
  },
  check: (db, ctx, out) => out,
};
