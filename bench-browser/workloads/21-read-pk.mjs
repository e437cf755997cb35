export default {
  name: 'read-pk', group: 'read', title: '1,000 point reads by key',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const st = await db.prepare('SELECT * FROM t1 WHERE id = ?');
    let n = 0, s = 0;
    for (const k of ctx.data.ints(ctx.scale(1000), ctx.rows, 3)) {
      for (const r of await st.all([k + 1])) { n++; s += Number(r.b) + r.c.length; }
    }
    await st.finalize();
    return { n, s };
  },
  check: (db, ctx, out) => out,
};
