export default {
  name: 'read-all', group: 'read', title: 'Read all 10,000 rows in order',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db) {
    const rows = await db.query('SELECT * FROM t1 ORDER BY id', []);
    let s = 0; for (const r of rows) s += Number(r.b);
    return { n: rows.length, sb: s, last: rows.length ? Number(rows[rows.length - 1].id) : null };
  },
  check: (db, ctx, out) => out,
};
