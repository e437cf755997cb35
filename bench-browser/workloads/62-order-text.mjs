// Byte order in every engine: PostgreSQL's default collation may follow the locale, so PGlite is
// told COLLATE "C", which is what SQLite's and cairn's BINARY order is.
export default {
  name: 'order-text', group: 'app', title: 'ORDER BY a text column, a fifth of the table',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const rows = await db.query(ctx.pick({
      default: 'SELECT id, c FROM t1 WHERE g < 20 ORDER BY c, id',
      pglite: 'SELECT id, c FROM t1 WHERE g < 20 ORDER BY c COLLATE "C", id',
    }), []);
    // A digest that depends on the order: each id weighted by its place.
    let h = 0;
    for (let i = 0; i < rows.length; i++) h = (h + (i + 1) * Number(rows[i].id)) % 1000000007;
    return { n: rows.length, first: rows[0]?.c ?? null, last: rows.at(-1)?.c ?? null, h };
  },
  check: (db, ctx, out) => out,
};
