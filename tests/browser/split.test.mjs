// The engine in two modules (docs/size.md, "The split module"): cairn.wasm opens a database (a
// new one or one written before) and runs the common statements without fetching
// cairn-rest.wasm; the first statement that needs the rest fetches it once; a rest that cannot
// be fetched stops the engine as a panic does, and the database reopens at its last commit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

async function withPage(fn) {
  const b = await launch();
  const rest = [];
  const files = new Set(); // every cairn file the page and its Workers fetched
  b.page.on('request', (r) => {
    if (r.url().endsWith('/cairn-rest.wasm')) rest.push(r.url());
    const name = /\/(cairn[\w-]*\.(?:js|wasm))$/.exec(r.url());
    if (name) files.add(name[1]);
  });
  try {
    await fn(b.page, rest, files);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
}

test('common statements run without the rest of the engine; EXPLAIN and check() fetch it once', () =>
  withPage(async (page, rest, files) => {
    const r = await page.evaluate(async () => {
      let db = await cairn.open('split');
      // Statements of the kinds the build's split keeps in cairn.wasm (scripts/split.mjs).
      await db.exec('CREATE TABLE t(id INTEGER PRIMARY KEY, b INTEGER, c TEXT)');
      await db.exec('CREATE INDEX t_b ON t(b)');
      await db.transaction(async (tx) => {
        for (let i = 1; i <= 50; i++) await tx.run('INSERT INTO t VALUES (?, ?, ?)', [i, i % 7, `row ${i}`]);
      });
      await db.run('UPDATE t SET c = c || ? WHERE id = ?', ['!', 3]);
      await db.run('UPDATE t SET b = b + 1 WHERE id = ?', [4]);
      await db.run('DELETE FROM t WHERE b = ?', [0]);
      const one = await db.prepare('SELECT c FROM t WHERE id = ?');
      await one.get([3]);
      await one.finalize();
      let rows = await db.query('SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY b');
      // The next visit: the database opened again, its table read and written.
      await db.close();
      db = await cairn.open('split');
      await db.run('INSERT INTO t VALUES (?, ?, ?)', [51, 51 % 7, 'row 51']);
      await db.run('UPDATE t SET c = ? WHERE id = ?', ['again', 51]);
      await db.exec('BEGIN');
      await db.run('INSERT INTO t VALUES (?, ?, ?)', [52, 0, 'row 52']);
      await db.exec('ROLLBACK');
      // A table without a declared key.
      await db.exec('CREATE TABLE seen(a INTEGER)');
      await db.run('INSERT INTO seen VALUES (?)', [2]);
      await db.run('INSERT INTO seen VALUES (?)', [1]);
      const seen = await db.query('SELECT a FROM seen ORDER BY a');
      const reread = await db.query('SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY b');
      rows = { rows, reread, seen };
      const { restLoaded: before, restLoadedBy: by } = await db.memory();
      const plan = await db.query('EXPLAIN SELECT c FROM t WHERE b = 3');
      const after = (await db.memory()).restLoaded;
      const check = await db.check();
      const bad = await attempt(() => db.query('SELEC 1'));
      await db.close();
      return { rows, before, by, after, plan: plan.length, check, bad };
    });
    assert.deepEqual(r.rows.rows.map((x) => x.n), [8, 7, 7, 6, 8, 7], 'the common statements ran');
    assert.deepEqual(r.rows.reread.map((x) => x.n), [8, 8, 7, 6, 8, 7], 'the reopened database was read and written');
    assert.deepEqual(r.rows.seen, [{ a: 1 }, { a: 2 }]);
    assert.equal(r.before, false, `the common statements must not load the rest of the engine (loaded by ${r.by})`);
    assert.equal(r.after, true, 'EXPLAIN loads the rest of the engine');
    assert.ok(r.plan > 0, 'EXPLAIN gives its plan');
    assert.deepEqual(r.check, [], 'check() runs in the rest and finds nothing wrong');
    assert.equal(r.bad.code, 'SYNTAX');
    assert.equal(rest.length, 1, `cairn-rest.wasm is fetched once (fetched: ${rest.join(', ')})`);
    // A page without sync fetches the Worker script and module without it (docs/size.md).
    assert.ok(files.has('cairn-worker.js'), [...files].join(', '));
    assert.deepEqual([...files].filter((f) => f.includes('sync')), [], 'no sync file is fetched');
    // Nor what only syncing or a second tab needs (worker/extra.js): closed and opened again in
    // the same tab, the database is this tab's again at once.
    assert.ok(!files.has('cairn-extra.js'), [...files].join(', '));
  }));

test('a rest of the engine that cannot be fetched is INTERNAL, and the database reopens at its last commit', () =>
  withPage(async (page, rest) => {
    const r = await page.evaluate(async () => {
      const db = await cairn.open('split-missing', { restWasmUrl: '/dist/no-such-file.wasm' });
      await db.exec('CREATE TABLE t(a INTEGER)');
      await db.run('INSERT INTO t VALUES (1)');
      await db.exec('BEGIN');
      await db.run('INSERT INTO t VALUES (2)');
      const failed = await attempt(() => db.query('EXPLAIN SELECT a FROM t'));
      let after = null;
      for (let i = 0; i < 100; i++) {
        after = await attempt(() => db.query('SELECT a FROM t ORDER BY a'));
        if (after.ok) break;
        await new Promise((res) => setTimeout(res, 20));
      }
      await db.close();
      return { failed, after };
    });
    assert.equal(r.failed.code, 'INTERNAL');
    assert.match(r.failed.message, /could not load the rest of the engine/);
    assert.deepEqual(r.after, { ok: true, value: [{ a: 1 }] }, 'the uncommitted insert must be gone, the committed one kept');
    assert.equal(rest.length, 0);
  }));
