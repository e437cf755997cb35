export default {
  name: 'upsert', group: 'update', title: '1,000 upserts (half new keys), one transaction',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db, ctx) {
    const k = ctx.scale(1000);
    const old = ctx.data.ints(Math.ceil(k / 2), ctx.rows, 14);
    const fresh = ctx.data.t1Rows(Math.floor(k / 2), 15, ctx.rows + 1);
    const rows = [];
    const vals = ctx.data.ints(old.length, 100000, 16);
    for (let i = 0; i < old.length; i++) rows.push([old[i] + 1, old[i] + 1, vals[i], ctx.data.words(vals[i]), i % 100]);
    for (let i = 0; i < fresh.length; i++) { rows.splice(2 * i + 1, 0, fresh[i]); }
    const sql = 'INSERT INTO t1 VALUES (?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET b = excluded.b, c = excluded.c';
    await db.transaction(async (tx) => { for (const r of rows) await tx.run(sql, r); });
  },
  check: (db, ctx) => ctx.tableCheck(db),
};
