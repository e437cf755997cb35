const PATTERNS = ['%one%', '%two%', '%three%', '%four%', '%five%', '%six%', '%seven%', '%eight%', '%nine%', '%teen%'];
export default {
  name: 'like', group: 'read', title: '10 LIKE scans',
  setup: (db, ctx) => ctx.loadT1(db),
  async run(db) {
    const counts = [];
    for (const p of PATTERNS) counts.push(Number((await db.query('SELECT count(*) AS n FROM t1 WHERE c LIKE ?', [p]))[0].n));
    return counts;
  },
  check: (db, ctx, out) => out,
};
