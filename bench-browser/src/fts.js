import { mulberry32 } from './data.js';

// What the full-text workloads share (workloads/80-87, through `ctx.fts`): the documents,
// each engine's index, loading and the top-20 queries.

// Documents of about 40 words over a vocabulary of 2,000 made-up words, drawn with a skew
// (a few words common, most rare), the same for every engine.
export function docs(ctx, count, seed = 5) {
  const syl = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'da', 'fe', 'gu', 'ha', 'jo', 'pi', 'wu'];
  const vocab = [];
  for (let i = 0; vocab.length < 2000; i++) {
    vocab.push(syl[i % 16] + syl[(i >> 4) % 16] + (i >= 256 ? syl[(i >> 8) % 16] : '') + (i >= 1024 ? 'n' : ''));
  }
  const rnd = mulberry32(seed);
  const out = [];
  for (let d = 0; d < count; d++) {
    const w = [];
    for (let k = 0; k < 40; k++) w.push(vocab[Math.floor(Math.pow(rnd(), 2.5) * vocab.length)]);
    out.push([d + 1, d % 10, w.join(' ')]);
  }
  return { vocab, rows: out };
}

// The fts table of each engine: fts5 for cairn and SQLite, a tsvector column with a GIN
// index for PGlite.
export async function createFts(db, ctx) {
  await db.exec(ctx.pick({
    default: 'CREATE TABLE docs(id INTEGER PRIMARY KEY, cat INTEGER, body TEXT); CREATE VIRTUAL TABLE docs_fts USING fts5(body)',
    pglite: "CREATE TABLE docs(id INTEGER PRIMARY KEY, cat INTEGER, body TEXT); CREATE TABLE docs_fts(id INTEGER PRIMARY KEY, body TEXT, tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED); CREATE INDEX docs_fts_tsv ON docs_fts USING gin(tsv)",
  }));
}

export async function insertDocs(db, ctx, rows) {
  const fts = ctx.pick({ default: 'INSERT INTO docs_fts(rowid, body) VALUES (?, ?)', pglite: 'INSERT INTO docs_fts(id, body) VALUES (?, ?)' });
  for (const [id, cat, body] of rows) {
    await db.run('INSERT INTO docs(id, cat, body) VALUES (?, ?, ?)', [id, cat, body]);
    await db.run(fts, [id, body]);
  }
}

export async function loadDocs(db, ctx) {
  const d = docs(ctx, ctx.scale(10000));
  await createFts(db, ctx);
  await db.transaction((tx) => insertDocs(tx, ctx, d.rows));
  return d;
}

// Top 20 by rank for each query; returns the number of rows each gave.
export async function top20(db, ctx, queries, filter = false) {
  const sql = ctx.pick({
    default: filter
      ? 'SELECT f.rowid AS id FROM docs_fts f JOIN docs d ON d.id = f.rowid WHERE docs_fts MATCH ? AND d.cat = 3 ORDER BY rank LIMIT 20'
      : 'SELECT rowid AS id FROM docs_fts WHERE docs_fts MATCH ? ORDER BY rank LIMIT 20',
    pglite: filter
      ? "SELECT f.id FROM docs_fts f JOIN docs d ON d.id = f.id WHERE f.tsv @@ to_tsquery('simple', ?) AND d.cat = 3 ORDER BY ts_rank(f.tsv, to_tsquery('simple', ?)) DESC LIMIT 20"
      : "SELECT id FROM docs_fts WHERE tsv @@ to_tsquery('simple', ?) ORDER BY ts_rank(tsv, to_tsquery('simple', ?)) DESC LIMIT 20",
  });
  const counts = [];
  for (const q of queries) {
    const text = ctx.pick({ default: q.fts, pglite: q.pg });
    const params = ctx.engine === 'pglite' ? [text, text] : [text];
    counts.push((await db.query(sql, params)).length);
  }
  return counts;
}

// Query words: the vocabulary's i-th word for i spread over the common to the rare.
export const pickWords = (d, n) => Array.from({ length: n }, (_, i) => d.vocab[(i * 37) % 400]);
