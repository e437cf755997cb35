export default {
  name: 'paging', group: 'app', title: '20 pages of 50 rows, LIMIT ... OFFSET across the table',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const st = await db.prepare('SELECT id, b, c FROM t1 ORDER BY id LIMIT 50 OFFSET ?');
    let n = 0, s = 0;
    for (let p = 0; p < 20; p++) {
      for (const r of await st.all([Math.floor((p * (ctx.rows - 50)) / 19)])) { n++; s += Number(r.id) + Number(r.b) + r.c.length; }
    }
    await st.finalize();
    return { n, s };
  },
  check: (db, ctx, out) => out,
};
