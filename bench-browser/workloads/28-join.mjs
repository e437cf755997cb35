export default {
  name: 'join', group: 'read', title: '100 customer joins (orders by indexed customer_id)',
  setup: (db, ctx) => ctx.loadJoin(db),
  async run(db) {
    const st = await db.prepare('SELECT o.id, o.amount, c.name FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.customer_id = ?');
    let n = 0, s = 0;
    for (let id = 1; id <= 100; id++) for (const r of await st.all([id])) { n++; s += Number(r.amount) + r.name.length; }
    await st.finalize();
    return { n, s };
  },
  check: (db, ctx, out) => out,
};
