// The build's split of cairn.wasm (docs/size.md, "The split module"), the part that runs the
// engine: in Node, over an in-memory stand-in for an OPFS access handle, through the engine's own
// exports as the Worker calls them.
//
// profile(): runs the SQL users write (scripts/corpus.mjs: the SQL tests' statements, the
// differential corpus, the examples; never the browser benchmark's workloads), the to-do example
// grown to 1,000 and 10,000 rows, and the calls every page makes, over a module instrumented by
// `cairn-split instrument`, and returns the functions that ran and the regions of them it
// entered: what stays in cairn.wasm.
// check(): runs the same, and then statements outside them (EXPLAIN, the integrity check, ALTER
// TABLE, errors, rarer functions, export), over the whole module and over the split one, and
// fails unless every result and every error is the same, the common part did not load the rest,
// and the statements outside it did.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readResult } from '../worker/result.js';
import { MODE_ROWS, MODE_RUN, MODE_FIRST, paramBytes } from '../worker/protocol.js';
import { restFrom, restLoaded, restLoadedBy } from '../worker/split.js';
import { corpus } from './corpus.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** A FileSystemSyncAccessHandle's synchronous surface, over bytes in memory. */
class MemoryHandle {
  constructor() {
    this.buf = new Uint8Array(1 << 16);
    this.len = 0;
  }
  read(dst, { at }) {
    const n = Math.max(0, Math.min(dst.length, this.len - at));
    dst.set(this.buf.subarray(at, at + n));
    return n;
  }
  write(src, { at }) {
    const end = at + src.length;
    if (end > this.buf.length) {
      const grown = new Uint8Array(Math.max(end, this.buf.length * 2));
      grown.set(this.buf);
      this.buf = grown;
    }
    this.buf.set(src, at);
    this.len = Math.max(this.len, end);
    return src.length;
  }
  getSize() { return this.len; }
  truncate(n) {
    if (n < this.len) this.buf.fill(0, n, this.len);
    this.len = n;
  }
  flush() {}
  close() {}
}

// The key file the sync build keeps beside each database (docs/sync.md 10b), one per database
// handle, kept across a reopen as the Worker keeps cairn-keys/<name>; the plain build ignores it.
const keys = new WeakMap();
function keyHandle(handle) {
  if (!keys.has(handle)) keys.set(handle, new MemoryHandle());
  return keys.get(handle);
}

// The engine's randomness (keys, uuid7()) and clock (hybrid logical clocks, uuid7()) the same for
// every engine: each starts from the same seed and time, so that the profile and the check take
// the same paths. With regions as the unit, a random key or a timestamp of another length takes
// another arm of an encoder, and a build's check once found the rest loaded by such an arm.
let seed = 0;
let clock = 0;
function deterministic() {
  seed = 0x9e3779b9;
  clock = Date.UTC(2026, 0, 1);
  const getRandomValues = (a) => {
    const b = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    for (let i = 0; i < b.length; i++) {
      seed = (seed ^ (seed << 13)) >>> 0;
      seed = (seed ^ (seed >>> 17)) >>> 0;
      seed = (seed ^ (seed << 5)) >>> 0;
      b[i] = seed & 0xff;
    }
    return a;
  };
  Object.defineProperty(globalThis, 'crypto', { configurable: true, writable: true, value: { getRandomValues } });
  globalThis.__cairnPanicked = (message) => {
    globalThis.__cairnPanic = message;
  };
  Date.now = () => (clock += 1);
}

/** Loads the glue afresh (its module state is one instance) with the module `bytes`. */
let loads = 0;
export async function engine(glue, bytes) {
  deterministic();
  const g = await import(`${pathToFileURL(glue)}?${++loads}`);
  return { glue: g, exports: g.initSync({ module: bytes }) };
}

function rowsOf(wire) {
  const [rowCount, , , n] = wire;
  const columns = wire.slice(4, 4 + n);
  const at = 5 + n;
  const byRow = wire[4 + n] === null;
  const get = byRow ? (r, c) => wire[at + r * n + c] : (r, c) => wire[at + c][r];
  const rows = [];
  for (let r = 0; r < rowCount; r++) {
    const row = {};
    for (let c = 0; c < n; c++) row[columns[c]] = get(r, c);
    rows.push(row);
  }
  return rows;
}

/** The calls a page makes, on the engine's Database as the Worker drives it. */
function adapter(e, d) {
  const cache = new Map();
  const id = (sql) => {
    let i = cache.get(sql);
    if (i === undefined) cache.set(sql, (i = d.prepare(sql)));
    return i;
  };
  const run = (stmt, params, mode) => readResult(e.exports.memory, d.executePrepared(stmt, paramBytes(params), mode), mode);
  const db = {
    exec: async (sql) => d.exec(sql),
    query: async (sql, params) => rowsOf(run(id(sql), params, MODE_ROWS)),
    run: async (sql, params) => run(id(sql), params, MODE_RUN),
    get: async (sql, params) => run(id(sql), params, MODE_FIRST),
    async prepare(sql) {
      const s = d.prepare(sql);
      return {
        run: async (params) => run(s, params, MODE_RUN),
        all: async (params) => rowsOf(run(s, params, MODE_ROWS)),
        get: async (params) => run(s, params, MODE_FIRST),
        finalize: async () => d.finalize(s),
      };
    },
    async transaction(cb) {
      d.exec('BEGIN');
      try {
        await cb(db);
        d.exec('COMMIT');
      } catch (err) {
        if (d.inTransaction()) d.exec('ROLLBACK');
        throw err;
      }
    },
  };
  return db;
}

const plain = (v) => JSON.parse(JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : ArrayBuffer.isView(x) ? Array.from(x) : x)));
const failure = (err) => ({ error: err && err.code ? `${err.code}: ${err.message}` : String(err) });

// Transaction control and schema statements go by exec, as pages send them; writes without
// RETURNING by run; the rest as queries (get when the source reads one row).
const byExec = /^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE|CREATE|DROP)\b/i;
const byRun = (sql) => /^\s*(INSERT|UPDATE|DELETE|REPLACE)\b/i.test(sql) && !/\bRETURNING\b/i.test(sql);

/** Runs the corpus (scripts/corpus.mjs), a database per source, each opened again after it: with
 * `keep` (from corpusPassing()) only the statements it lists, else all. Returns the results, or
 * (`results` false) which statements succeeded. */
async function runCorpus(e, keep = null, results = keep !== null) {
  const out = [];
  const passed = [];
  let n = 0;
  for (const [f, { source, statements }] of corpus(root).entries()) {
    const handle = new MemoryHandle();
    const name = `corpus-${n++}.db`;
    e.glue.checkName(name); // as the Worker does before it opens a file
    const d = e.glue.Database.open(handle, name, 'full', 0, keyHandle(handle));
    const db = adapter(e, d);
    const ok = new Set();
    for (const [i, { sql, params, call }] of statements.entries()) {
      if (keep && !keep[f].has(i)) continue;
      try {
        const r = byExec.test(sql) ? d.exec(sql) : call === 'get' ? await db.get(sql, params) : byRun(sql) ? await db.run(sql, params) : await db.query(sql, params);
        ok.add(i);
        if (results) out.push([source, sql, plain(r ?? null)]);
      } catch (err) {
        if (results) throw new Error(`${source}: \`${sql}\` failed, though it succeeded in the first run: ${failure(err).error}`);
      }
    }
    passed.push(ok);
    if (d.inTransaction()) d.exec('ROLLBACK');
    d.close();
    // Opened again, as every later visit opens it.
    const again = e.glue.Database.open(handle, `c${n++}`, 'full', 0, keyHandle(handle));
    out.push([source, 'reopened', plain(await adapter(e, again).query('SELECT 1 AS one', []))]);
    again.close();
  }
  return results ? out : passed;
}

/** Which statements of the corpus succeed, run over a module of its own (`bytes`). A failed
 * statement may have had an effect (a script whose first statement ran), so the corpus runs again
 * without the failures until none fails. */
export async function corpusPassing(glue, bytes) {
  let keep = null;
  for (let round = 0; round < 5; round++) {
    const passed = await runCorpus(await engine(glue, bytes), keep, false);
    if (keep && passed.every((p, f) => p.size === keep[f].size)) return keep;
    keep = passed;
  }
  throw new Error('the corpus did not settle: statements kept failing once others were left out');
}

/** The to-do example (examples/todo) grown to `rows` items in lists: what its statements and
 * their neighbours in such an app (paging, counts, a join with GROUP BY, search, ranged writes,
 * a copy by INSERT ... SELECT) do to tables of that size, and the database opened again. */
async function todoApp(e, rows) {
  const out = [];
  const handle = new MemoryHandle();
  const name = `todo-${rows}`;
  let d = e.glue.Database.open(handle, name, 'full', 0, keyHandle(handle));
  let db = adapter(e, d);
  await db.exec('CREATE TABLE IF NOT EXISTS lists (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)');
  await db.exec(`CREATE TABLE IF NOT EXISTS todo (
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0, list INTEGER, due TEXT)`);
  await db.transaction(async (tx) => {
    for (let l = 1; l <= 20; l++) await tx.run('INSERT INTO lists (name) VALUES (?)', [`list ${l}`]);
    const add = await tx.prepare('INSERT INTO todo (title, done, list, due) VALUES (?, ?, ?, ?)');
    for (let i = 0; i < rows; i++) {
      const k = (i * 7919) % rows;
      await add.run([`task ${k} ${'x'.repeat(k % 40)}`, k % 3 === 0 ? 1 : 0, 1 + (k % 20), `2026-${String(1 + (k % 12)).padStart(2, '0')}-${String(1 + (k % 28)).padStart(2, '0')}`]);
    }
    await add.finalize();
  });
  await db.exec('CREATE INDEX IF NOT EXISTS todo_list ON todo (list, done)');
  // A later version of the app: an index on a column of (nearly) distinct values, built over
  // the rows already there (a migration), and changes fetched from a server written back as
  // upserts, half of them to rows held (rewritten longer), half new.
  await db.exec('CREATE INDEX IF NOT EXISTS todo_title ON todo (title)');
  await db.transaction(async (tx) => {
    const put = await tx.prepare(`INSERT INTO todo (id, title, done, list, due) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (id) DO UPDATE SET title = excluded.title, done = excluded.done, due = excluded.due`);
    for (let i = 0; i < Math.min(rows, 2000); i++) {
      const id = i % 2 === 0 ? 1 + ((i * 7919) % rows) : rows + 100 + i;
      await put.run([id, `task ${id} (synced) ${'y'.repeat(i % 60)}`, i % 5 === 0 ? 1 : 0, 1 + (i % 20), i % 7 === 0 ? null : `2027-01-${String(1 + (i % 28)).padStart(2, '0')}`]);
    }
    await put.finalize();
  });
  const reads = [
    ['SELECT id, title, done FROM todo ORDER BY id LIMIT 50 OFFSET ?', [Math.floor(rows / 2)]],
    ['SELECT count(*) AS remaining FROM todo WHERE done = 0', []],
    ['SELECT l.name, count(*) AS n, sum(t.done) AS finished FROM lists l JOIN todo t ON t.list = l.id GROUP BY l.name ORDER BY l.name', []],
    ['SELECT id, title FROM todo WHERE title LIKE ? ORDER BY title LIMIT 20', ['task 1%']],
    ['SELECT id, due FROM todo WHERE due < ? AND done = 0 ORDER BY due DESC, id LIMIT 10', ['2026-03-01']],
    ['SELECT title FROM todo WHERE list = ? AND done = 0 ORDER BY id DESC LIMIT 5', [7]],
    // A list sorted for display, whole, and the lists' summary with CASE inside aggregates.
    ['SELECT id, title, done FROM todo WHERE list = ? ORDER BY title, id', [9]],
    ['SELECT list, sum(CASE WHEN done = 0 THEN 1 ELSE 0 END) AS open, sum(CASE WHEN due < ? THEN 1 ELSE 0 END) AS late, count(*) AS n FROM todo GROUP BY list', ['2026-06-01']],
  ];
  for (const [sql, params] of reads) out.push(['todo', rows, sql, plain(await db.query(sql, params))]);
  for (const [sql, params] of [
    ['UPDATE todo SET done = 1 WHERE list = ?', [3]],
    ['UPDATE todo SET title = title || ? WHERE id % 50 = 0', [' (moved)']],
    ['UPDATE todo SET due = NULL, done = done + 1 WHERE id BETWEEN ? AND ?', [10, Math.floor(rows / 3)]],
    ['DELETE FROM todo WHERE done = 1 AND list = ?', [4]],
    ['INSERT INTO todo (title, list, due) SELECT title, ?, due FROM todo WHERE list = ?', [21, 5]],
    ['DELETE FROM todo WHERE id = ?', [Math.floor(rows / 2)]],
  ]) out.push(['todo', rows, sql, plain(await db.run(sql, params))]);
  d.close();
  d = e.glue.Database.open(handle, name, 'full', 0, keyHandle(handle));
  db = adapter(e, d);
  for (const [sql, params] of reads) out.push(['todo', rows, 'again', sql, plain(await db.query(sql, params))]);
  await db.exec('DROP TABLE todo');
  d.close();
  return out;
}

/** The corpus (its statements that succeed: `keep`, from corpusPassing()), the to-do app at
 * `rows`, then the calls every page makes; returns their results in order. */
export async function common(e, rows, keep, sync = false) {
  const out = await runCorpus(e, keep);
  out.push(...(await todoApp(e, rows)));
  // What pages do besides: named parameters, one row, a transaction rolled back.
  for (const name of ['notes', 'My Notes 2024', 'app_data.v2', 'user@example.com']) e.glue.checkName(name);
  const handle = new MemoryHandle();
  const d = e.glue.Database.open(handle, 'My Notes 2024', 'relaxed', 0, keyHandle(handle));
  const db = adapter(e, d);
  await db.exec('CREATE TABLE notes(id TEXT PRIMARY KEY, body TEXT NOT NULL, at INTEGER)');
  const put = await db.prepare('INSERT INTO notes(id, body, at) VALUES (:id, :body, :at)');
  for (let i = 0; i < 20; i++) await put.run({ ':id': `n${i}`, ':body': `note ${i}`, ':at': i });
  await put.finalize();
  const one = await db.prepare('SELECT body FROM notes WHERE id = ?');
  out.push(['api', plain(await one.get(['n7']))]);
  await one.finalize();
  out.push(['api', 'in transaction', d.inTransaction()]);
  d.exec('BEGIN');
  await db.run('DELETE FROM notes WHERE at < ?', [10]);
  d.exec('ROLLBACK');
  out.push(['api', plain(await db.query('SELECT count(*) AS n, max(at) AS m FROM notes ORDER BY 1', []))]);
  // The statements of an ordinary application: tables with constraints and text keys, every
  // value type, the usual clauses and operators, the write forms.
  await db.exec(`CREATE TABLE IF NOT EXISTS items(
    id TEXT PRIMARY KEY, owner INTEGER NOT NULL, title TEXT NOT NULL DEFAULT '', price REAL,
    data BLOB, done INTEGER DEFAULT 0, UNIQUE (owner, title), CHECK (price IS NULL OR price >= 0))`);
  await db.exec('CREATE INDEX IF NOT EXISTS items_owner ON items(owner, done)');
  await db.exec('CREATE TABLE IF NOT EXISTS pairs(a INTEGER, b TEXT, v REAL, PRIMARY KEY (a, b))');
  const add = await db.prepare('INSERT INTO items(id, owner, title, price, data) VALUES (?, ?, ?, ?, ?) RETURNING id');
  for (let i = 0; i < 30; i++) {
    out.push(['items', plain(await add.all([`i${i}`, i % 4, `title ${i}`, i % 5 ? i * 1.25 : null, new Uint8Array([i, 255 - i])]))]);
  }
  await add.finalize();
  for (const [sql, params] of [
    ['INSERT INTO pairs VALUES (?, ?, ?), (?, ?, ?)', [1, 'x', 0.5, 2, 'y', -1.5]],
    ['INSERT OR IGNORE INTO pairs VALUES (1, ?, 9)', ['x']],
    ['INSERT OR REPLACE INTO pairs VALUES (2, ?, 7.25)', ['y']],
    ['INSERT INTO pairs VALUES (3, ?, 1) ON CONFLICT (a, b) DO NOTHING', ['z']],
    ['INSERT INTO pairs VALUES (3, ?, 2) ON CONFLICT (a, b) DO UPDATE SET v = v + excluded.v', ['z']],
    ['UPDATE items SET done = 1, title = title || ? WHERE owner = ? AND price > ?', [' (done)', 1, 5]],
    ['UPDATE items SET price = price * 2 WHERE id IN (?, ?, ?)', ['i2', 'i3', 'i4']],
    ['UPDATE items SET data = NULL WHERE id = ? RETURNING id, data', ['i7']],
    ['DELETE FROM items WHERE done = 1 AND owner = ? RETURNING id', [1]],
    ['DELETE FROM pairs WHERE v < ?', [0]],
  ]) out.push([sql, plain(await db.query(sql, params))]);
  for (const [sql, params] of [
    ['SELECT * FROM items WHERE id = ?', ['i9']],
    ['SELECT id, title, price FROM items WHERE owner = ? AND done = 0 ORDER BY price DESC, id LIMIT ? OFFSET ?', [2, 3, 1]],
    ['SELECT owner, count(*) AS n, sum(price) AS s, avg(price) AS a, min(title) AS lo, max(price) AS hi FROM items GROUP BY owner HAVING count(*) > ? ORDER BY owner', [1]],
    ['SELECT count(*) AS n FROM items WHERE price BETWEEN ? AND ? OR title LIKE ?', [2, 10, '%1%']],
    ['SELECT id FROM items WHERE price IS NULL OR data IS NOT NULL AND NOT done ORDER BY id', []],
    ['SELECT DISTINCT owner FROM items WHERE owner IN (1, 2, 3) ORDER BY owner DESC', []],
    ['SELECT i.id, p.v FROM items AS i JOIN pairs AS p ON p.a = i.owner WHERE i.owner > ? ORDER BY i.id, p.b', [0]],
    ['SELECT length(title) AS l, lower(title) AS lo, upper(id) AS up, coalesce(price, 0) + 1 AS p, abs(-owner) AS o, round(price, 1) AS r FROM items ORDER BY id LIMIT 5', []],
    ['SELECT a, b, v FROM pairs ORDER BY a, b', []],
    ['SELECT count(*) AS n FROM items', []],
  ]) out.push([sql, plain(await db.query(sql, params))]);
  await db.exec('CREATE TABLE log(id INTEGER PRIMARY KEY, kind TEXT, n INTEGER NOT NULL DEFAULT 0, note TEXT)');
  await db.exec('CREATE INDEX log_kind ON log(kind)');
  await db.transaction(async (tx) => {
    for (let i = 0; i < 40; i++) out.push(['log', plain(await tx.run('INSERT INTO log(kind, note) VALUES (?, ?)', [`k${i % 3}`, `note ${i}`]))]);
  });
  for (const [sql, params] of [
    ['UPDATE log SET note = note || ? WHERE id = ?', ['!', 3]],
    ['UPDATE log SET n = n + 1, kind = ? WHERE id = ?', ['k9', 4]],
    ['UPDATE log SET n = n - ? WHERE kind = ?', [2, 'k1']],
    ['DELETE FROM log WHERE id = ?', [5]],
    ['DELETE FROM log WHERE kind = ? AND id > ?', ['k2', 30]],
    ['SELECT id, note FROM log WHERE kind = ? ORDER BY id DESC LIMIT 3', ['k0']],
    ['SELECT kind, count(*) AS n, sum(n) AS s FROM log GROUP BY kind ORDER BY kind', []],
    ['SELECT * FROM log WHERE id BETWEEN ? AND ? ORDER BY id', [2, 6]],
    ['SELECT max(id) AS m FROM log', []],
  ]) out.push([sql, plain(await db.query(sql, params))]);
  // A page's live queries: after each commit, what it changed; when one starts, what it reads.
  out.push(['live', plain(d.takeChanged()), plain(d.tablesRead('SELECT l.id FROM log AS l JOIN items AS i ON i.id = l.note WHERE l.n > 0'))]);
  // Tables without a declared key (a hidden row id), one of them of a single column.
  await db.exec('CREATE TABLE tags(name TEXT, n INTEGER)');
  await db.exec('CREATE TABLE seen(a INTEGER)');
  for (const [sql, params] of [
    ['INSERT INTO tags VALUES (?, ?), (?, ?), (?, ?)', ['red', 3, 'blue', 1, 'green', 2]],
    ['INSERT INTO tags(name) VALUES (?)', ['none']],
    ['INSERT INTO seen VALUES (?)', [7]],
    ['INSERT INTO seen VALUES (?)', [5]],
    ['SELECT a FROM seen', []],
    ['SELECT a FROM seen ORDER BY a', []],
    ['SELECT * FROM tags', []],
    ['SELECT name FROM tags WHERE n > ? ORDER BY n DESC', [1]],
    ['UPDATE tags SET n = n + 1 WHERE name = ?', ['blue']],
    ['DELETE FROM tags WHERE n IS NULL', []],
    ['SELECT count(*) AS c, sum(n) AS s FROM tags', []],
    ['DELETE FROM seen WHERE a = ?', [7]],
    ['SELECT a FROM seen', []],
  ]) out.push([sql, plain(await db.query(sql, params))]);
  d.exec('BEGIN');
  await db.run('INSERT INTO seen VALUES (?)', [8]);
  await db.run('INSERT INTO tags VALUES (?, ?)', ['white', 4]);
  d.exec('ROLLBACK');
  await db.exec('DROP TABLE pairs');
  d.close();
  // The next visit: the same database opened again, its tables read and written.
  const again = e.glue.Database.open(handle, 'My Notes 2024', 'full', 0, keyHandle(handle));
  const next = adapter(e, again);
  for (const [sql, params] of [
    ['SELECT body FROM notes WHERE id = ?', ['n3']],
    ['SELECT id FROM notes ORDER BY at DESC LIMIT 2', []],
    ['INSERT INTO notes(id, body, at) VALUES (?, ?, ?)', ['n99', 'later', 99]],
    ['INSERT INTO items(id, owner, title, price, data) VALUES (?, ?, ?, ?, ?) RETURNING id, done', ['j1', 2, 'later', 3.5, null]],
    ['SELECT id, title FROM items WHERE owner = ? AND done = 0 ORDER BY id LIMIT 3', [2]],
    ['UPDATE items SET price = price + 1 WHERE id = ?', ['j1']],
    ['INSERT INTO log(kind, note) VALUES (?, ?)', ['k0', 'later']],
    ['SELECT kind, count(*) AS n FROM log GROUP BY kind ORDER BY kind', []],
    ['DELETE FROM log WHERE id = ?', [6]],
    ['SELECT max(id) AS m FROM log', []],
    ['SELECT name, n FROM tags ORDER BY name', []],
    ['INSERT INTO seen VALUES (?)', [9]],
    ['SELECT a FROM seen ORDER BY a', []],
  ]) out.push(['again', sql, plain(await next.query(sql, params))]);
  // A transaction of inserts and an update, rolled back.
  again.exec('BEGIN');
  await next.run('INSERT INTO seen VALUES (?)', [10]);
  await next.run('INSERT INTO tags VALUES (?, ?)', ['grey', 0]);
  await next.run('INSERT INTO log(kind, note) VALUES (?, ?)', ['k1', 'gone']);
  await next.run('UPDATE notes SET at = at + 1 WHERE id = ?', ['n1']);
  again.exec('ROLLBACK');
  out.push(['again', plain(await next.query('SELECT count(*) AS n FROM seen', []))]);
  again.close();
  out.push(...(await large(e)));
  if (sync) out.push(...(await replicas(e)));
  return out;
}

/** What tables of 10,000 and 100,000 rows reach that tables of 1,000 do not: trees four
 * and five levels deep (long keys, so that branch pages fill with few rows) whose branch pages
 * split and merge, a root that splits under an integer key, and a page cache smaller than the
 * tables, so that pages are evicted and read back. */
async function large(e) {
  const out = [];
  const handle = new MemoryHandle();
  let raw = e.glue.Database.open(handle, 'large.db', 'full', 16, keyHandle(handle));
  let d = adapter(e, raw);
  const key = (i) => `${String((i * 7919) % 100003).padStart(6, '0')}-${'k'.repeat(600)}`;
  await d.exec('CREATE TABLE big(k TEXT PRIMARY KEY, n INTEGER, pad TEXT)');
  await d.exec('CREATE INDEX big_n ON big(n)');
  await d.exec('CREATE TABLE wide(id INTEGER PRIMARY KEY, c INTEGER, body TEXT)');
  await d.transaction(async (tx) => {
    for (let i = 0; i < 3000; i++) {
      await tx.run('INSERT INTO big VALUES (?, ?, ?)', [key(i), i % 97, 'p'.repeat(i % 300)]);
      await tx.run('INSERT INTO wide(c, body) VALUES (?, ?)', [i, `${i}`.padEnd(1000, '.')]);
    }
  });
  // Loaded in bulk into empty tables: trees built with several branch levels.
  await d.exec('CREATE TABLE big2(k TEXT PRIMARY KEY, n INTEGER, pad TEXT)');
  await d.exec('CREATE TABLE wide2(id INTEGER PRIMARY KEY, c INTEGER, body TEXT)');
  out.push(['large', plain(await d.run('INSERT INTO big2 SELECT k, n, pad FROM big', []))]);
  out.push(['large', plain(await d.run('INSERT INTO wide2 SELECT id, c, body FROM wide', []))]);
  for (let i = 3000; i < 3100; i++) await d.run('INSERT INTO big VALUES (?, ?, ?)', [key(i), i % 97, 'x']);
  for (const [sql, params] of [
    ['UPDATE big SET pad = pad || ? WHERE n = ?', ['q'.repeat(200), 5]],
    ['UPDATE big SET pad = ? WHERE n < ?', ['', 10]],
    ['UPDATE wide SET body = ? WHERE id % 7 = 0', ['short']],
    // Rows rewritten longer in full leaves (split while updating), by key and by range, and
    // numbers rewritten in place across their encoded widths.
    ['UPDATE wide SET body = body || ? WHERE id % 3 = 1', ['+'.repeat(300)]],
    ['UPDATE wide2 SET c = c * 1000 + 70000 WHERE id BETWEEN ? AND ?', [100, 2900]],
    ['UPDATE wide2 SET c = c - 140000, body = body || ? WHERE id > ?', ['-', 2000]],
    ['UPDATE wide2 SET c = -c WHERE c > ?', [0]],
    ['INSERT INTO wide2(id, c, body) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET body = body || excluded.body', [7, 0, '#'.repeat(500)]],
    ['DELETE FROM big WHERE n BETWEEN ? AND ?', [20, 80]],
    ['DELETE FROM wide WHERE id > ?', [500]],
  ]) out.push(['large', sql, plain(await d.run(sql, params))]);
  for (let i = 0; i < 300; i += 3) await d.run('DELETE FROM big WHERE k = ?', [key(i)]);
  for (let i = 1; i < 600; i += 2) await d.run('UPDATE wide2 SET body = body || ? WHERE id = ?', ['*'.repeat(200), i]);
  for (let i = 2; i < 900; i += 3) await d.run('DELETE FROM wide2 WHERE id = ?', [i]);
  const read = async (db) => {
    out.push(['large', plain(await db.query('SELECT count(*) AS c, sum(n) AS s, min(k) = max(k) AS one FROM big', []))]);
    out.push(['large', plain(await db.query('SELECT n, length(pad) AS l FROM big WHERE n = ? ORDER BY k LIMIT 3', [5]))]);
    out.push(['large', plain(await db.query('SELECT count(*) AS c, sum(length(body)) AS l FROM wide', []))]);
    out.push(['large', plain(await db.query('SELECT count(*) AS c, sum(c) AS s, sum(length(body)) AS l FROM wide2', []))]);
  };
  await read(d);
  raw.close();
  raw = e.glue.Database.open(handle, 'large.db', 'full', 16, keyHandle(handle));
  d = adapter(e, raw);
  await read(d);
  await d.exec('DROP TABLE wide');
  raw.close();
  return out;
}

/** Two replicas of a shared list (the sync module): writes on both, synced both ways to quiet. */
async function replicas(e) {
  const out = [];
  const handles = [new MemoryHandle(), new MemoryHandle()];
  const [a, b] = ['replica-a', 'replica-b'].map((name, i) => e.glue.Database.open(handles[i], name, 'full', 0, keyHandle(handles[i])));
  const ddl = 'CREATE TABLE todo(id TEXT PRIMARY KEY DEFAULT (uuid7()), title TEXT NOT NULL, done INTEGER DEFAULT 0, likes INTEGER DEFAULT 0) REPLICATED (COUNTER likes)';
  for (const d of [a, b]) d.exec(ddl);
  const owner = a.syncId();
  a.syncAuthorize('todo', [b.syncId()]);
  b.syncSetOwner(owner);
  const dbA = adapter(e, a);
  const dbB = adapter(e, b);
  await dbA.transaction(async (tx) => {
    for (let i = 0; i < 20; i++) await tx.run('INSERT INTO todo(id, title) VALUES (?, ?)', [`t${i}`, `task ${i}`]);
  });
  // Both ways until neither has anything to send: hellos, what each lacks, acknowledgements.
  const links = new Map([[a, a.syncConnect()], [b, b.syncConnect()]]);
  const peer = (d) => (d === a ? b : a);
  let queue = [...links].map(([d, [, hello]]) => [peer(d), hello]);
  const exchange = () => {
    for (let round = 0; round < 50 && queue.length; round++) {
      const next = [];
      for (const [to, msg] of queue) for (const m of to.syncReceive(links.get(to)[0], msg)) next.push([peer(to), m]);
      for (const d of [a, b]) for (const m of d.syncPoll(links.get(d)[0])) next.push([peer(d), m]);
      queue = next;
    }
  };
  exchange(); // b now has a's list of writers, itself on it
  await dbB.run("INSERT INTO todo(title) VALUES ('from b')", []);
  await dbB.run('UPDATE todo SET done = 1, likes = likes + 1 WHERE id = ?', ['t3']);
  await dbA.run('UPDATE todo SET title = ?, likes = likes + 2 WHERE id = ?', ['task three', 't3']);
  await dbA.run('DELETE FROM todo WHERE id = ?', ['t4']);
  for (const d of [a, b]) d.syncSeal();
  for (const d of [a, b]) for (const m of d.syncPoll(links.get(d)[0])) queue.push([peer(d), m]);
  exchange();
  for (const [d, q] of [[a, dbA], [b, dbB]]) {
    out.push(['replica', plain(await q.query('SELECT id, title, done, likes FROM todo WHERE id IN (?, ?, ?) ORDER BY id', ['t3', 't4', 't5']))]);
    out.push(['replica', d.syncDigest() === a.syncDigest(), d.syncPending(), plain(d.syncEvents().length)]);
  }
  for (const d of [a, b]) {
    d.syncDisconnect(links.get(d)[0]);
    d.close();
  }
  // The next visit: a replica opened again, read and written.
  const again = e.glue.Database.open(handles[1], 'replica-b', 'full', 0, keyHandle(handles[1]));
  const next = adapter(e, again);
  await next.run('UPDATE todo SET done = 1, likes = likes + 1 WHERE id = ?', ['t5']);
  await next.run("INSERT INTO todo(title) VALUES ('again')", []);
  out.push(['replica', 'again', plain(await next.query('SELECT title, done, likes FROM todo WHERE id = ?', ['t5'])), again.syncPending()]);
  again.close();
  return out;
}

/** Statements outside the common part, each with its result or its error. */
async function uncommon(e) {
  const out = [];
  const d = e.glue.Database.open(new MemoryHandle(), 'rest', 'full', 0, keyHandle(new MemoryHandle()));
  const db = adapter(e, d);
  const step = async (what, fn) => {
    try {
      out.push([what, plain(await fn())]);
    } catch (err) {
      out.push([what, failure(err)]);
    }
  };
  const q = (sql, params = []) => step(sql, () => db.query(sql, params));
  await step('create', () => db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, b INTEGER, c TEXT UNIQUE CHECK (length(c) < 20))"));
  await step('index', () => db.exec('CREATE INDEX t_b ON t(b)'));
  await step('load', () => db.exec("INSERT INTO t VALUES (1, 10, 'one'), (2, 20, 'two'), (3, 30, 'three')"));
  await q('EXPLAIN SELECT c FROM t WHERE b = 20');
  await q('EXPLAIN SELECT t.c, u.c FROM t JOIN t AS u ON u.b = t.b ORDER BY t.c');
  await step('check', () => d.check());
  await step('schema', () => d.schema());
  await q('SELEC 1');
  await q('SELECT nope FROM t');
  await q('SELECT * FROM missing');
  await q('SELECT frobnicate(1)');
  await q('SELECT ?', []);
  await step('unique', () => db.run("INSERT INTO t VALUES (4, 40, 'one')", []));
  await step('check constraint', () => db.run("INSERT INTO t VALUES (5, 50, 'a much longer text than twenty')", []));
  await step('primary key', () => db.run("INSERT INTO t VALUES (1, 10, 'uno')", []));
  await step('type', () => db.run("INSERT INTO t VALUES ('x', 10, 'x')", []));
  await q("SELECT hex('ab'), substr('hello', 2, 3), replace('aaa', 'a', 'b'), instr('abc', 'c'), trim('  x '), typeof(1.5), round(2.5), upper('x'), nullif(1, 1), coalesce(NULL, 2), abs(-3), length('four'), lower('Q')");
  await q("SELECT group_concat(c, '-') AS g, total(b) AS t, avg(b) AS a, count(DISTINCT b % 20) AS d FROM t");
  await q("SELECT c GLOB 't*' AS g, c LIKE 'T%' ESCAPE '!' AS l, CAST(b AS TEXT) || 'x' AS s, CASE WHEN b > 15 THEN 'big' ELSE 'small' END AS k FROM t ORDER BY c DESC");
  await q('WITH x(a) AS (SELECT 1) SELECT a FROM x UNION SELECT 2 ORDER BY 1');
  await q('SELECT c FROM t WHERE b IN (SELECT b FROM t WHERE b > 15) AND EXISTS (SELECT 1 FROM t) ORDER BY (SELECT max(b) FROM t), c');
  await q('SELECT t.c, u.c AS uc FROM t LEFT JOIN t AS u ON u.b = t.b + 10 ORDER BY t.c');
  await q("INSERT OR REPLACE INTO t VALUES (2, 21, 'deux') RETURNING id, c");
  await q('UPDATE t SET b = b * 2 WHERE id >= 2 RETURNING *');
  await q('DELETE FROM t WHERE id = 3 RETURNING c');
  await q("SELECT json_object('c', c, 'b', b / 4.0, 'l', json_array(b, 0.1, 1e20, -2.25)) AS j, json_quote(c) ->> '$' AS n FROM t ORDER BY id");
  await q("SELECT t.id, e.key, e.value, e.fullkey FROM t, json_each(json_object('a', t.b, 'b', json_array(t.c))) e ORDER BY t.id, e.key");
  await q("SELECT json_group_array(c) AS g, json_extract('{\"a\":[1,{\"b\":2.50}]}', '$.a[1].b') AS x, json_extract('{bad', '$') AS y FROM t");
  await step('json index', () => db.exec("CREATE INDEX t_j ON t(json_extract(json_object('k', c), '$.k'))"));
  await q("EXPLAIN SELECT id FROM t WHERE json_extract(json_object('k', c), '$.k') = 'one'");
  await step('alter', () => db.exec("ALTER TABLE t ADD COLUMN z TEXT DEFAULT 'zed'"));
  await step('rename', () => db.exec('ALTER TABLE t RENAME TO t2'));
  await q('SELECT * FROM t2 ORDER BY id');
  await q('PRAGMA table_info(t2)');
  await q("SELECT m.name, p.name AS col, p.pk FROM sqlite_schema m, pragma_table_info(m.name) p WHERE m.type = 'table' ORDER BY 1, p.cid");
  await q('SELECT il.name, ii.name AS col FROM pragma_index_list(\'t2\') il JOIN pragma_index_info(il.name) ii ORDER BY il.seq, ii.seqno');
  await step('user version', () => db.exec('PRAGMA user_version = 3'));
  await q('PRAGMA user_version');
  await step('rename column', () => db.exec('ALTER TABLE t2 RENAME COLUMN z TO zz'));
  await step('drop column', () => db.exec('ALTER TABLE t2 DROP COLUMN zz'));
  await step('drop indexed column', () => db.exec('ALTER TABLE t2 DROP COLUMN b'));
  await q('SELECT * FROM t2 ORDER BY id');
  await step('drop index', () => db.exec('DROP INDEX t_b'));
  await step('drop missing', () => db.exec('DROP TABLE missing'));
  await step('export', () => {
    const bytes = d.exportBytes();
    e.glue.Database.checkImport(bytes);
    return bytes.length;
  });
  await step('import of junk', () => e.glue.Database.checkImport(new Uint8Array(100).fill(7)));
  d.close();
  await step('bad name', () => e.glue.checkName('../escape'));
  return out;
}

/** Runs the common statements over `instrumented` (through `glue`); returns the functions that ran and the regions entered. */
export async function profile(glue, instrumented, { rows = [1000, 10000], sync = false } = {}) {
  const bytes = readFileSync(instrumented);
  const keep = await corpusPassing(glue, bytes);
  const e = await engine(glue, bytes);
  // At two sizes: a table of 10,000 rows takes paths one of 1,000 does not (a leaf split while
  // a row is rewritten in place, a bulk load with more levels).
  for (const n of rows) await common(e, n, keep, sync);
  const marked = (prefix) => Object.keys(e.exports)
    .filter((k) => k[0] === prefix && /^.\d+$/.test(k) && e.exports[k].value)
    .map((k) => Number(k.slice(1)))
    .sort((a, b) => a - b);
  return { funcs: marked('h'), regions: marked('r') };
}

/** Checks that `primary` with `rest` gives what `whole` gives; throws on the first difference. */
export async function check(glue, whole, primary, rest, { rows = 1000, sync = false } = {}) {
  const keep = await corpusPassing(glue, readFileSync(whole));
  const a = await engine(glue, readFileSync(whole));
  const wholeCommon = await common(a, rows, keep, sync);
  const wholeRest = await uncommon(a);
  const b = await engine(glue, readFileSync(primary));
  restFrom(b.exports, () => readFileSync(rest));
  const splitCommon = await common(b, rows, keep, sync);
  if (restLoaded()) throw new Error(`the common statements loaded the rest of the engine: ${restLoadedBy()}`);
  const splitRest = await uncommon(b);
  if (!restLoaded()) throw new Error('the statements outside the common part did not load the rest of the engine');
  const same = (x, y, what) => {
    for (let i = 0; i < Math.max(x.length, y.length); i++) {
      const [p, q] = [JSON.stringify(x[i]), JSON.stringify(y[i])];
      if (p !== q) throw new Error(`${what} differ at step ${i}:\n  whole: ${p}\n  split: ${q}`);
    }
  };
  same(wholeCommon, splitCommon, 'the common statements\' results');
  same(wholeRest, splitRest, 'the other statements\' results');
  return { common: wholeCommon.length, rest: wholeRest.length, errors: wholeRest.filter(([, r]) => r && r.error).length };
}
