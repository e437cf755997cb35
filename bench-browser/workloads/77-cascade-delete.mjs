export default {
  name: 'cascade-delete', group: 'sql36', title: 'DELETE of 1,000 parents, ON DELETE CASCADE to their children (indexed)',
  // Children first: dropping a parent table with foreign keys on deletes its rows first.
  tables: ['children', 'parents'],
  async setup(db, ctx) {
    // PostgreSQL always enforces foreign keys; SQLite and cairn do once asked.
    if (ctx.engine !== 'pglite') await db.exec('PRAGMA foreign_keys = yes');
    await db.exec('CREATE TABLE parents(id INTEGER PRIMARY KEY, name TEXT)');
    await db.exec('CREATE TABLE children(id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parents(id) ON DELETE CASCADE, v INTEGER)');
    await db.exec('CREATE INDEX children_parent ON children(parent_id)');
    const np = 2 * ctx.scale(1000);
    const parents = [];
    for (let i = 1; i <= np; i++) parents.push([i, ctx.data.words(i)]);
    const children = [];
    for (let i = 1; i <= ctx.rows; i++) children.push([i, 1 + (i % np), (i * 31) % 1000]);
    await db.transaction(async (tx) => {
      await ctx.insertRows(tx, 'parents', 2, parents);
      await ctx.insertRows(tx, 'children', 3, children);
    });
  },
  async run(db, ctx) {
    await db.run('DELETE FROM parents WHERE id <= ?', [ctx.scale(1000)]);
  },
  async check(db, ctx) {
    const [p] = await db.query('SELECT count(*) AS n FROM parents', []);
    const [c] = await db.query('SELECT count(*) AS n, sum(v) AS s, min(parent_id) AS lo FROM children', []);
    return { parents: ctx.num(p.n), children: ctx.num(c.n), s: ctx.num(c.s), lo: ctx.num(c.lo) };
  },
};
