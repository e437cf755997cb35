// Documents with a JSON body, shared by 72-74 (modules import nothing, so each carries it).
async function loadDocs(db, ctx) {
  await db.exec(ctx.pick({ default: 'CREATE TABLE docs(id INTEGER PRIMARY KEY, body TEXT)', pglite: 'CREATE TABLE docs(id INTEGER PRIMARY KEY, body JSONB)' }));
  const rows = [];
  for (let i = 1; i <= ctx.rows; i++) {
    rows.push([i, JSON.stringify({ kind: 'k' + (i % 500), price: (i * 7919) % 1000, name: ctx.data.words(i % 1000), tags: ['t' + (i % 5), 't' + (i % 11)] })]);
  }
  await db.transaction((tx) => ctx.insertRows(tx, 'docs', 2, rows));
}

export default {
  name: 'json-filter', group: 'sql36', title: '20 filters on a JSON field, no index: json_extract(body, \'$.kind\') = ?',
  tables: ['docs'],
  setup: loadDocs,
  async run(db, ctx) {
    const sql = ctx.pick({
      default: 'SELECT count(*) AS n, sum(json_extract(body, \'$.price\')) AS s FROM docs WHERE json_extract(body, \'$.kind\') = ?',
      pglite: 'SELECT count(*) AS n, sum((body->>\'price\')::int) AS s FROM docs WHERE body->>\'kind\' = ?',
    });
    const out = [];
    for (let k = 0; k < 20; k++) {
      const [r] = await db.query(sql, ['k' + k * 7]);
      out.push([ctx.num(r.n), ctx.num(r.s)]);
    }
    return out;
  },
  check: (db, ctx, out) => out,
};
