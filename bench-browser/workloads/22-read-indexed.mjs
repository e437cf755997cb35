export default {
  name: 'read-indexed', group: 'read', title: '1,000 reads by an indexed column (b)',
  setup: (db, ctx) => ctx.loadT1(db, { indexB: true }),
  async run(db, ctx) {
    const all = ctx.data.t1Rows(ctx.rows, 1);
    const st = await db.prepare('SELECT * FROM t1 WHERE b = ?');
    let n = 0, s = 0;
    for (const i of ctx.data.ints(ctx.scale(1000), ctx.rows, 4)) {
      for (const r of await st.all([all[i][2]])) { n++; s += Number(r.a); }
    }
    await st.finalize();
    return { n, s };
  },
  check: (db, ctx, out) => out,
};
