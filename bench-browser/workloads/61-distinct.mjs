export default {
  name: 'distinct', group: 'app', title: 'SELECT DISTINCT of a text column, then of two integer columns',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db) {
    const words = await db.query('SELECT DISTINCT c FROM t1', []);
    const pairs = await db.query('SELECT DISTINCT g, b % 7 AS m FROM t1', []);
    let len = 0, s = 0;
    for (const r of words) len += r.c.length;
    for (const r of pairs) s += Number(r.g) * 7 + Number(r.m);
    return { words: words.length, len, pairs: pairs.length, s };
  },
  check: (db, ctx, out) => out,
};
