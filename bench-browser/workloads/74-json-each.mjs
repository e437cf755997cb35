async function loadDocs(db, ctx) {
  await db.exec(ctx.pick({ default: 'CREATE TABLE docs(id INTEGER PRIMARY KEY, body TEXT)', pglite: 'CREATE TABLE docs(id INTEGER PRIMARY KEY, body JSONB)' }));
  const rows = [];
  for (let i = 1; i <= ctx.rows; i++) {
    rows.push([i, JSON.stringify({ kind: 'k' + (i % 500), price: (i * 7919) % 1000, name: ctx.data.words(i % 1000), tags: ['t' + (i % 5), 't' + (i % 11)] })]);
  }
  await db.transaction((tx) => ctx.insertRows(tx, 'docs', 2, rows));
}

export default {
  name: 'json-each', group: 'sql36', title: 'every document\'s tags expanded by json_each, counted by tag',
  tables: ['docs'],
  setup: loadDocs,
  async run(db, ctx) {
    const rows = await db.query(ctx.pick({
      default: 'SELECT j.value AS tag, count(*) AS n FROM docs, json_each(docs.body, \'$.tags\') AS j GROUP BY j.value',
      pglite: 'SELECT j.value AS tag, count(*) AS n FROM docs, jsonb_array_elements_text(docs.body->\'tags\') AS j(value) GROUP BY j.value',
    }), []);
    return rows.map((r) => [r.tag, ctx.num(r.n)]).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  },
  check: (db, ctx, out) => out,
};
