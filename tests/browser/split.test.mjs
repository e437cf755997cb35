// The engine in two modules (docs/size.md, "The split module"): cairn.wasm opens a database (a
// new one or one written before) and runs the common statements without calling into
// cairn-rest.wasm, which the Worker fetches once in the background; a rest that
// cannot be fetched fails the statements that need it with REST_UNAVAILABLE, and the database,
// with its open transaction, stays as it was (docs/protocol.md, "The rest of the engine").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch, skipUnless } from './harness.mjs';

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

test('common statements run without the rest of the engine; each Worker fetches it once, EXPLAIN and check() run in it', () =>
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
    // Once by each Worker, in the background: the database was opened twice.
    assert.equal(rest.length, 2, `cairn-rest.wasm is fetched once a Worker (fetched: ${rest.join(', ')})`);
    // A page without sync fetches the Worker script and module without it (docs/size.md).
    assert.ok(files.has('cairn-worker.js'), [...files].join(', '));
    assert.deepEqual([...files].filter((f) => f.includes('sync')), [], 'no sync file is fetched');
    // Nor what only syncing or a second tab needs (worker/extra.js): closed and opened again in
    // the same tab, the database is this tab's again at once.
    assert.ok(!files.has('cairn-extra.js'), [...files].join(', '));
  }));

// Over the shared-memory channel (the test page is isolated) and over postMessage.
test("a workerUrl that is not cairn's Worker fails open() with a code naming it, never a hang", () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const at = (f) => `/tests/browser/fixtures/${f}`;
      const silent = await attempt(() => cairn.open('not-cairn', { workerUrl: at('silent-worker.js') }));
      const chatty = await attempt(() => cairn.open('not-cairn', { workerUrl: at('chatty-worker.js') }));
      const prehello = await attempt(() => cairn.open('not-cairn', { workerUrl: at('prehello-worker.js') }));
      const stale = await attempt(() => cairn.open('not-cairn', { workerUrl: at('stale-worker.js') }));
      const syncSilent = await attempt(() => cairn.open('not-cairn', { sync: true, syncWorkerUrl: at('silent-worker.js') }));
      // None of them left the database held.
      const db = await cairn.open('not-cairn');
      const ok = await db.get('SELECT 1 AS one');
      await db.close();
      return { silent, chatty, prehello, stale, syncSilent, ok };
    });
    assert.equal(r.silent.code, 'WORKER_ERROR', JSON.stringify(r.silent));
    assert.match(r.silent.message, /silent-worker\.js is not cairn's Worker: it loaded, but posted no hello/);
    assert.equal(r.chatty.code, 'WORKER_ERROR', JSON.stringify(r.chatty));
    assert.match(r.chatty.message, /chatty-worker\.js is not cairn's Worker: its first message was not cairn's hello/);
    assert.equal(r.prehello.code, 'WORKER_ERROR', JSON.stringify(r.prehello));
    assert.match(r.prehello.message, /prehello-worker\.js/);
    assert.equal(r.stale.code, 'WORKER_MISMATCH', JSON.stringify(r.stale));
    assert.match(r.stale.message, /stale-worker\.js speaks protocol 0/);
    assert.equal(r.syncSilent.code, 'WORKER_ERROR', JSON.stringify(r.syncSilent));
    assert.match(r.syncSilent.message, /silent-worker\.js .*check syncWorkerUrl/);
    assert.deepEqual(r.ok, { one: 1 });
  }));

for (const channel of ['auto', 'postMessage']) {
  test(`a rest of the engine that cannot be fetched fails the statement with REST_UNAVAILABLE; the database and its transaction stay (${channel})`, () =>
    withPage(async (page, rest) => {
      const r = await page.evaluate(async (channel) => {
        const db = await cairn.open('split-missing', { channel, restWasmUrl: '/dist/no-such-file.wasm' });
        await db.exec('CREATE TABLE t(a INTEGER)');
        await db.run('INSERT INTO t VALUES (1)');
        // The background fetch has failed once the Worker says the rest is not there and no fetch
        // is under way; a statement that needs it before then waits for that fetch.
        const tx = db.transaction(async (t) => {
          await t.run('INSERT INTO t VALUES (2)');
          const failed = await attempt(() => t.query('EXPLAIN SELECT a FROM t'));
          const rare = await attempt(() => t.query("SELECT hex('a') AS h"));
          await t.run('INSERT INTO t VALUES (3)');
          const inside = await t.query('SELECT a FROM t ORDER BY a');
          return { failed, rare, inside };
        });
        const inTx = await tx;
        const after = await db.query('SELECT a FROM t ORDER BY a');
        const mem = await db.memory();
        const check = await attempt(() => db.check());
        const again = await attempt(() => db.query('EXPLAIN SELECT a FROM t'));
        await db.close();
        // The database reopens from the file with every commit in it.
        const db2 = await cairn.open('split-missing', { channel, restWasmUrl: '/dist/no-such-file.wasm' });
        const reopened = await db2.query('SELECT a FROM t ORDER BY a');
        await db2.close();
        return { ...inTx, after, mem, check, again, reopened, via: db.channel };
      }, channel);
      assert.equal(r.via, channel === 'auto' ? 'sharedMemory' : 'postMessage');
      assert.equal(r.failed.code, 'REST_UNAVAILABLE', JSON.stringify(r.failed));
      assert.match(r.failed.message, /no-such-file\.wasm: HTTP 404/);
      assert.equal(r.rare.code, 'REST_UNAVAILABLE', 'a rarer function is in the rest too');
      assert.equal(r.check.code, 'REST_UNAVAILABLE');
      assert.deepEqual(r.inside, [{ a: 1 }, { a: 2 }, { a: 3 }], 'the transaction went on after the failed statements');
      assert.deepEqual(r.after, [{ a: 1 }, { a: 2 }, { a: 3 }], 'and committed');
      assert.equal(r.mem.restReady, false);
      assert.equal(r.again.code, 'REST_UNAVAILABLE');
      assert.deepEqual(r.reopened, [{ a: 1 }, { a: 2 }, { a: 3 }]);
      assert.equal(rest.length, 0);
    }));
}

test("preloadRest: 'wait' makes open() wait for the rest, and fail with REST_UNAVAILABLE without it", () =>
  withPage(async (page, rest) => {
    const r = await page.evaluate(async () => {
      const db = await cairn.open('split-wait', { preloadRest: 'wait' });
      const mem = await db.memory();
      await db.close();
      const missing = await attempt(() => cairn.open('split-wait', { preloadRest: 'wait', restWasmUrl: '/dist/no-such-file.wasm' }));
      // The failed open let the database go: it opens again at once.
      const again = await cairn.open('split-wait');
      await again.close();
      const bad = await attempt(() => cairn.open('split-wait', { preloadRest: 'soon' }));
      return { mem, missing, bad };
    });
    assert.equal(r.mem.restReady, true, 'open() resolved with the rest there');
    assert.equal(r.mem.restLoaded, false, 'but nothing called into it yet');
    assert.equal(r.missing.code, 'REST_UNAVAILABLE');
    assert.match(r.missing.message, /no-such-file\.wasm/);
    assert.equal(r.bad.code, 'INVALID_INPUT');
    assert.ok(rest.length >= 1);
  }));

test('a wrong workerUrl or wasmUrl fails open() with a code naming the URL, at once', () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const worker = await attempt(() => cairn.open('bad-urls', { workerUrl: '/dist/no-such-worker.js' }));
      const wasm = await attempt(() => cairn.open('bad-urls', { wasmUrl: '/dist/no-such-file.wasm' }));
      const notWasm = await attempt(() => cairn.open('bad-urls', { wasmUrl: '/dist/cairn.js' }));
      const syncWorker = await attempt(() => cairn.open('bad-urls', { sync: true, syncWorkerUrl: '/dist/no-such-worker.js' }));
      // What a server that answers every path with its page gives.
      const htmlWorker = await attempt(() => cairn.open('bad-urls', { workerUrl: '/tests/browser/page.html' }));
      const htmlWasm = await attempt(() => cairn.open('bad-urls', { wasmUrl: '/tests/browser/page.html' }));
      // None of them left the database held.
      const db = await cairn.open('bad-urls');
      await db.close();
      return { worker, wasm, notWasm, syncWorker, htmlWorker, htmlWasm };
    });
    assert.equal(r.worker.code, 'WORKER_ERROR', JSON.stringify(r.worker));
    assert.match(r.worker.message, /no-such-worker\.js/);
    assert.equal(r.syncWorker.code, 'WORKER_ERROR');
    assert.match(r.syncWorker.message, /no-such-worker\.js/);
    assert.equal(r.wasm.code, 'LOAD_FAILED', JSON.stringify(r.wasm));
    assert.match(r.wasm.message, /no-such-file\.wasm: HTTP 404/);
    assert.equal(r.notWasm.code, 'LOAD_FAILED');
    assert.match(r.notWasm.message, /cairn\.js/);
    assert.equal(r.htmlWorker.code, 'WORKER_ERROR', JSON.stringify(r.htmlWorker));
    assert.match(r.htmlWorker.message, /page\.html/);
    assert.equal(r.htmlWasm.code, 'LOAD_FAILED', JSON.stringify(r.htmlWasm));
    assert.match(r.htmlWasm.message, /page\.html/);
  }));

for (const channel of ['auto', 'postMessage']) {
  test(`a statement that needs the rest while it is on its way waits for it, and the others do not (${channel})`, {
    skip: skipUnless(['chromium'], "the rest's response is held by the driver's request interception (context.route), which the Firefox adapter has not"),
  }, async () => {
    const b = await launch();
    let release;
    const gate = new Promise((r) => { release = r; });
    // The rest's response is held until the page has run its statements without it.
    await b.context.route('**/cairn-rest.wasm', async (route) => {
      await gate;
      await route.continue();
    });
    await b.page.exposeFunction('releaseRest', () => release());
    try {
      const r = await b.page.evaluate(async (channel) => {
        const db = await cairn.open('split-wait-fetch', { channel });
        await db.exec('CREATE TABLE t(a INTEGER)');
        await db.run('INSERT INTO t VALUES (1)');
        const rows = await db.query('SELECT a FROM t');
        const before = await db.memory();
        const plan = db.query('EXPLAIN SELECT a FROM t');
        await releaseRest();
        const explained = (await plan).length;
        const after = await db.memory();
        await db.close();
        return { rows, before, explained, after, via: db.channel };
      }, channel);
      assert.equal(r.via, channel === 'auto' ? 'sharedMemory' : 'postMessage');
      assert.deepEqual(r.rows, [{ a: 1 }]);
      assert.equal(r.before.restReady, false, 'the common statements ran while the rest was held');
      assert.ok(r.explained > 0, 'EXPLAIN waited for the rest and ran');
      assert.equal(r.after.restLoaded, true);
      assert.deepEqual(b.errors, []);
    } finally {
      await b.close();
    }
  });
}
