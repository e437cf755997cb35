// The package's API in a real Worker over real OPFS: statements, prepared statements,
// transactions, errors with codes, export and import, over both channels.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch } from './harness.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

async function withPage(fn, opts) {
  const b = await launch(opts);
  try {
    await fn(b.page, b);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
}

for (const channel of ['postMessage', 'auto']) {
  test(`statements, prepared statements and transactions (${channel})`, () =>
    withPage(async (page) => {
      const r = await page.evaluate(async (channel) => {
        const db = await cairn.open('api', { channel });
        const out = { channel: db.channel };
        await db.exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, data BLOB);
                       CREATE INDEX t_name ON t (name);`);
        out.run = await db.run('INSERT INTO t (name, score) VALUES (?, ?), (?, ?)', ['ada', 1.5, 'bob', 2]);
        out.named = await db.run('INSERT INTO t (name, score, data) VALUES (:n, :s, :d)', { ':n': 'cy', ':s': null, ':d': new Uint8Array([1, 2, 255]) });
        out.rows = await db.query('SELECT id, name, score, data FROM t ORDER BY id');
        out.array = await db.query('SELECT id, name FROM t WHERE id <= ? ORDER BY id', [2], { rowMode: 'array' });
        out.get = await db.get('SELECT count(*) AS n, sum(score) AS s FROM t');
        out.none = await db.get('SELECT * FROM t WHERE id = 99');
        const ins = db.prepare('INSERT INTO t (name, score) VALUES (?, ?)');
        for (let i = 0; i < 20; i++) await ins.run([`p${i}`, i]);
        await ins.finalize();
        out.afterFinalize = await attempt(() => ins.run(['x', 1]));
        const sel = db.prepare('SELECT name FROM t WHERE score = ?');
        out.prepared = [(await sel.get([7])).name, (await sel.all([3])).map((r) => r.name)];
        // A transaction that commits, and one that throws and rolls back.
        out.committed = await db.transaction(async (tx) => {
          await tx.run("INSERT INTO t (name) VALUES ('in-tx')");
          return (await tx.get("SELECT count(*) AS n FROM t WHERE name = 'in-tx'")).n;
        });
        out.rolledBack = await attempt(() => db.transaction(async (tx) => {
          await tx.run("INSERT INTO t (name) VALUES ('doomed')");
          throw new Error('changed my mind');
        }));
        out.doomed = (await db.get("SELECT count(*) AS n FROM t WHERE name = 'doomed'")).n;
        // Savepoints: a nested transaction that throws undoes only itself.
        out.nested = await db.transaction(async (tx) => {
          await tx.run("INSERT INTO t (name) VALUES ('outer')");
          const inner = await attempt(() => tx.transaction(async (sp) => {
            await sp.run("INSERT INTO t (name) VALUES ('inner-undone')");
            throw new Error('inner changed its mind');
          }));
          await tx.transaction(async (sp) => sp.run("INSERT INTO t (name) VALUES ('inner-kept')"));
          return inner.message;
        });
        out.nestedRows = (await db.query("SELECT name FROM t WHERE name IN ('outer', 'inner-undone', 'inner-kept') ORDER BY name")).map((r) => r.name);
        await db.run("DELETE FROM t WHERE name IN ('outer', 'inner-kept')");
        // Concurrent callers wait for an open transaction instead of joining it.
        let release;
        const gate = new Promise((r) => { release = r; });
        const txDone = db.transaction(async (tx) => {
          await tx.run("INSERT INTO t (name) VALUES ('slow')");
          await gate;
        });
        await new Promise((r) => setTimeout(r, 20));
        const outside = db.get("SELECT count(*) AS n FROM t WHERE name = 'slow'");
        release();
        await txDone;
        out.outsideSawCommitted = (await outside).n;
        out.count = (await db.get('SELECT count(*) AS n FROM t')).n;
        out.check = await db.check();
        out.schema = (await db.schema()).map((s) => s.name);
        out.memory = await db.memory();
        await db.close();
        return out;
      }, channel);
      if (channel === 'auto') assert.equal(r.channel, 'sharedMemory', 'an isolated page must use the shared-memory channel');
      else assert.equal(r.channel, 'postMessage');
      assert.deepEqual(r.run, { changes: 2, lastInsertRowid: 2 });
      assert.deepEqual(r.named, { changes: 1, lastInsertRowid: 3 });
      assert.deepEqual(r.rows.map((x) => [x.id, x.name, x.score]), [[1, 'ada', 1.5], [2, 'bob', 2], [3, 'cy', null]]);
      assert.deepEqual(Array.from(r.rows[2].data), [1, 2, 255]);
      assert.equal(r.rows[0].data, null);
      assert.deepEqual(r.array.columns, ['id', 'name']);
      assert.deepEqual(r.array.values, [1, 'ada', 2, 'bob']);
      assert.deepEqual(r.get, { n: 3, s: 3.5 });
      assert.equal(r.none, undefined);
      assert.equal(r.afterFinalize.code, 'FINALIZED');
      assert.deepEqual(r.prepared, ['p7', ['p3']]);
      assert.equal(r.committed, 1);
      assert.equal(r.rolledBack.ok, false);
      assert.match(r.rolledBack.message, /changed my mind/);
      assert.equal(r.doomed, 0);
      assert.match(r.nested, /inner changed its mind/);
      assert.deepEqual(r.nestedRows, ['inner-kept', 'outer']);
      assert.equal(r.outsideSawCommitted, 1, 'a statement outside the transaction ran inside it');
      assert.equal(r.count, 25);
      assert.deepEqual(r.check, []);
      assert.deepEqual(r.schema.sort(), ['t', 't_name']);
      assert.ok(r.memory.wasmBytes >= 65536 && r.memory.wasmBytes % 65536 === 0, `wasm memory ${r.memory.wasmBytes}`);
    }));
}

// Every kind of JavaScript value a parameter can be, and the ones it cannot, on both channels:
// what each is stored as, and the error (code and message) for what is refused.
for (const channel of ['postMessage', 'auto']) {
  test(`parameter values: what each kind is stored as, and what is refused (${channel})`, () =>
    withPage(async (page) => {
      const r = await page.evaluate(async (channel) => {
        const db = await cairn.open('params', { channel });
        await db.exec('CREATE TABLE v (k INTEGER PRIMARY KEY, x ANY)');
        const kinds = {
          int: 7, negative: -12, big: 2 ** 40, unsafe: 2 ** 60, fraction: 2.5, minusZero: -0, nan: NaN,
          infinity: Infinity, bigint: 9007199254740993n, bigintMin: -(2n ** 63n), yes: true, no: false,
          nul: null, undef: undefined, text: 'héllo ✓', empty: '', blob: new Uint8Array([0, 1, 255]),
          buffer: new Uint8Array([9, 8]).buffer,
        };
        const stored = {};
        let k = 0;
        for (const [name, value] of Object.entries(kinds)) {
          k++;
          await db.run('INSERT INTO v (k, x) VALUES (?, ?)', [k, value]);
          const row = await db.get('SELECT typeof(x) AS t, x FROM v WHERE k = ?', [k]);
          stored[name] = [row.t, row.x instanceof Uint8Array ? [...row.x] : typeof row.x === 'bigint' ? `${row.x}n` : row.x];
        }
        const named = await db.get('SELECT :a + :b AS s, :c AS c', { ':a': 2, ':b': 40n, ':c': 'named' });
        const refused = {};
        for (const [name, p] of Object.entries({
          tooBig: [2n ** 63n], tooSmall: [-(2n ** 63n) - 1n], nested: [[1, 2]], object: [{ a: 1 }],
          floats: [new Float64Array([1])], namedTooBig: { ':a': 2n ** 64n }, notParams: 'text',
        })) {
          try {
            await db.get(Array.isArray(p) ? 'SELECT ? AS x' : 'SELECT :a AS x', p);
            refused[name] = 'accepted';
          } catch (e) {
            refused[name] = [e.code, e.message];
          }
        }
        return { channel: db.channel, stored, named: [named.s, named.c], refused, count: (await db.get('SELECT count(*) AS n FROM v')).n };
      }, channel);
      if (channel === 'auto') assert.equal(r.channel, 'sharedMemory');
      assert.deepEqual(r.stored, {
        int: ['integer', 7], negative: ['integer', -12], big: ['integer', 2 ** 40], unsafe: ['real', 2 ** 60],
        fraction: ['real', 2.5], minusZero: ['integer', 0], nan: ['null', null], infinity: ['real', Infinity],
        bigint: ['integer', '9007199254740993n'], bigintMin: ['integer', `${-(2n ** 63n)}n`], yes: ['integer', 1],
        no: ['integer', 0], nul: ['null', null], undef: ['null', null], text: ['text', 'héllo ✓'], empty: ['text', ''],
        blob: ['blob', [0, 1, 255]], buffer: ['blob', [9, 8]],
      });
      assert.deepEqual(r.named, [42, 'named']);
      const kinds = 'must be null, a number, a bigint, a string, a boolean or a Uint8Array';
      assert.deepEqual(r.refused, {
        tooBig: ['TYPE', 'parameter 1 does not fit in a 64-bit integer'],
        tooSmall: ['TYPE', 'parameter 1 does not fit in a 64-bit integer'],
        nested: ['TYPE', `parameter 1 ${kinds}`],
        object: ['TYPE', `parameter 1 ${kinds}`],
        floats: ['TYPE', `parameter 1 ${kinds}`],
        namedTooBig: ['TYPE', 'parameter ":a" does not fit in a 64-bit integer'],
        notParams: ['INVALID_INPUT', 'parameters must be an array (positional) or an object (named)'],
      });
      assert.equal(r.count, 18, 'a refused statement stores nothing');
    }));
}

test('errors carry a stable code, a position, and leave the database usable', () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const db = await cairn.open('errors');
      await db.exec('CREATE TABLE u (id INTEGER PRIMARY KEY, email TEXT UNIQUE NOT NULL, age INTEGER CHECK (age >= 0))');
      await db.run("INSERT INTO u (email, age) VALUES ('a@x', 1)");
      const out = {};
      out.syntax = await attempt(() => db.query('SELECT * FROM u WHER id = 1'));
      out.unknownTable = await attempt(() => db.query('SELECT * FROM nope'));
      out.unknownColumn = await attempt(() => db.query('SELECT nope FROM u'));
      out.paramCount = await attempt(() => db.query('SELECT * FROM u WHERE id = ?', []));
      out.badParams = await attempt(() => db.query('SELECT 1', 'not params'));
      out.unique = await attempt(() => db.run("INSERT INTO u (email, age) VALUES ('a@x', 2)"));
      out.notNull = await attempt(() => db.run('INSERT INTO u (age) VALUES (3)'));
      out.check = await attempt(() => db.run("INSERT INTO u (email, age) VALUES ('b@x', -1)"));
      // In a transaction, a failed statement has no effect and the transaction goes on.
      out.tx = await db.transaction(async (tx) => {
        await tx.run("INSERT INTO u (email, age) VALUES ('c@x', 5)");
        const dup = await attempt(() => tx.run("INSERT INTO u (email, age) VALUES ('c@x', 6)"));
        await tx.run("INSERT INTO u (email, age) VALUES ('d@x', 7)");
        return dup.code;
      });
      out.emails = (await db.query('SELECT email FROM u ORDER BY email')).map((x) => x.email);
      out.errorClass = await page_errorClass();
      return out;
      async function page_errorClass() {
        try { await db.query('SELEC'); } catch (e) { return [e instanceof cairn.CairnError, e.name]; }
      }
    });
    assert.equal(r.syntax.code, 'SYNTAX');
    assert.equal(r.syntax.ok, false);
    assert.equal(r.unknownTable.code, 'UNKNOWN_TABLE');
    assert.equal(r.unknownColumn.code, 'UNKNOWN_COLUMN');
    assert.equal(r.paramCount.code, 'PARAM_COUNT');
    assert.equal(r.badParams.code, 'INVALID_INPUT');
    assert.equal(r.unique.code, 'CONSTRAINT_UNIQUE');
    assert.equal(r.notNull.code, 'CONSTRAINT_NOT_NULL');
    assert.equal(r.check.code, 'CONSTRAINT_CHECK');
    assert.equal(r.tx, 'CONSTRAINT_UNIQUE');
    assert.deepEqual(r.emails, ['a@x', 'c@x', 'd@x']);
    assert.deepEqual(r.errorClass, [true, 'CairnError']);
  }));

test('a syntax error reports its line and column', () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const db = await cairn.open('pos');
      return attempt(() => db.query('SELECT 1,\n  2 +* 3'));
    });
    assert.equal(r.code, 'SYNTAX');
    assert.match(r.message, /line 2/);
  }));

test('export, import and destroy', () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const db = await cairn.open('src');
      await db.exec("CREATE TABLE k (id TEXT PRIMARY KEY, v INTEGER); INSERT INTO k VALUES ('a', 1), ('b', 2);");
      const bytes = await db.export();
      const out = { size: bytes.length };
      out.importGarbage = await attempt(() => cairn.importDatabase('bad', new Uint8Array(8192).fill(7)));
      out.importEmpty = await attempt(() => cairn.importDatabase('bad', new Uint8Array(0)));
      // The same file marked as format version 1 (both superblocks), as an earlier cairn wrote.
      const older = bytes.slice();
      const ps = new DataView(older.buffer).getUint32(20, true);
      for (const at of [16, ps + 16]) new DataView(older.buffer).setUint32(at, 1, true);
      out.importOlder = await attempt(() => cairn.importDatabase('old', older));
      out.openOlder = await attempt(() => cairn.open('old', { create: false }));
      await cairn.importDatabase('copy', bytes);
      const copy = await cairn.open('copy', { create: false });
      out.copied = await copy.query('SELECT id, v FROM k ORDER BY id');
      out.copyCheck = await copy.check();
      out.destroyOpen = await attempt(() => cairn.destroy('copy'));
      await copy.close();
      await cairn.destroy('copy');
      out.openDestroyed = await attempt(() => cairn.open('copy', { create: false }));
      out.missing = await attempt(() => cairn.open('never-made', { create: false }));
      return out;
    });
    assert.ok(r.size >= 4096, `export is ${r.size} bytes`);
    assert.equal(r.importGarbage.code, 'NOT_A_DATABASE', JSON.stringify(r.importGarbage));
    assert.equal(r.importEmpty.code, 'NOT_A_DATABASE', JSON.stringify(r.importEmpty));
    assert.equal(r.importOlder.code, 'UNSUPPORTED_VERSION', JSON.stringify(r.importOlder));
    assert.match(r.importOlder.message, /version 1, written by an earlier cairn/);
    assert.equal(r.openOlder.code, 'NOT_FOUND', 'a refused import leaves no database behind');
    assert.deepEqual(r.copied, [{ id: 'a', v: 1 }, { id: 'b', v: 2 }]);
    assert.deepEqual(r.copyCheck, []);
    assert.equal(r.destroyOpen.code, 'BUSY');
    assert.equal(r.openDestroyed.code, 'NOT_FOUND');
    assert.equal(r.missing.code, 'NOT_FOUND');
  }));

test('the native shell opens a file exported from the browser', () =>
  withPage(async (page) => {
    const bytes = await page.evaluate(async () => {
      const db = await cairn.open('for-the-shell');
      await db.exec(`CREATE TABLE k (id TEXT PRIMARY KEY, v INTEGER, r REAL);
        CREATE INDEX k_v ON k(v);
        INSERT INTO k VALUES ('a', 1, 0.5), ('b', 2, NULL), ('c', 2, -1.25);`);
      const out = await db.export();
      await db.close();
      return Array.from(out);
    });
    execFileSync('cargo', ['build', '-q', '-p', 'cairn-cli', '--bin', 'cairn'], { cwd: ROOT, stdio: 'inherit' });
    const dir = mkdtempSync(join(tmpdir(), 'cairn-export-'));
    try {
      const file = join(dir, 'exported.cairn');
      writeFileSync(file, Uint8Array.from(bytes));
      const out = execFileSync(join(resolve(ROOT, process.env.CARGO_TARGET_DIR ?? 'target'), 'debug/cairn'), [file], {
        input: '.mode csv\n.check\nSELECT id, v, r FROM k WHERE v = 2 ORDER BY id;\n',
        encoding: 'utf8',
      });
      assert.equal(out, 'ok\nid,v,r\nb,2,NULL\nc,2,-1.25\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }));

test('a page that is not cross-origin isolated works over postMessage', () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const db = await cairn.open('plain');
      await db.exec('CREATE TABLE t (a INTEGER)');
      await db.run('INSERT INTO t VALUES (?)', [42]);
      return { isolated: crossOriginIsolated, channel: db.channel, rows: await db.query('SELECT a FROM t') };
    });
    assert.equal(r.isolated, false);
    assert.equal(r.channel, 'postMessage');
    assert.deepEqual(r.rows, [{ a: 42 }]);
  }, { isolated: false }));

test('a panic is INTERNAL, the Worker restarts, and the database reopens at its last commit', () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const db = await cairn.open('panic');
      await db.exec('CREATE TABLE t (a INTEGER)');
      await db.run('INSERT INTO t VALUES (1)');
      const stmt = db.prepare('SELECT count(*) AS n FROM t');
      await db.exec('BEGIN');
      await db.run('INSERT INTO t VALUES (2)');
      const panic = await attempt(() => db._send('debugPanic', 0, ['boom']));
      // The next calls wait for the restarted Worker.
      let after = null;
      for (let i = 0; i < 100; i++) {
        after = await attempt(() => db.query('SELECT a FROM t ORDER BY a'));
        if (after.ok) break;
        await new Promise((res) => setTimeout(res, 20));
      }
      return { panic, after, prepared: await stmt.get() };
    });
    assert.equal(r.panic.code, 'INTERNAL');
    assert.match(r.panic.message, /boom/);
    assert.deepEqual(r.after, { ok: true, value: [{ a: 1 }] }, 'the uncommitted insert must be gone, the committed one kept');
    assert.deepEqual(r.prepared, { n: 1 }, 'a prepared statement must survive the restart');
    // The panic on purpose is a test op: the test build has it (its Worker is the shipped one
    // with the test ops), the shipped plain build does not.
  }, { build: 'test' }));

test('the shipped Worker has no panic on purpose', () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const db = await cairn.open('no-panic');
      const panic = await attempt(() => db._send('debugPanic', 0, ['boom']));
      return { panic, after: await db.query('SELECT 1 AS one') };
    });
    assert.equal(r.panic.code, 'UNKNOWN_OP', r.panic.message);
    assert.deepEqual(r.after, [{ one: 1 }]);
  }));

test('results too big for the shared-memory channel come by postMessage, every time', { timeout: 60_000 }, () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      // A small channel, so most results overflow it.
      const db = await cairn.open('big', { channelBytes: 4096 });
      await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)');
      await db.run('INSERT INTO t (body) SELECT ? FROM (VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10))', ['x'.repeat(50)]);
      for (let i = 0; i < 5; i++) await db.run('INSERT INTO t (body) SELECT body FROM t');
      const counts = [];
      for (let i = 0; i < 200; i++) {
        // Alternate a result that overflows with one that fits, as a read loop would.
        counts.push((await db.query('SELECT id, body FROM t')).length);
        counts.push((await db.query('SELECT count(*) AS n FROM t'))[0].n);
      }
      return { channel: db.channel, counts: [...new Set(counts)] };
    });
    assert.equal(r.channel, 'sharedMemory');
    assert.deepEqual(r.counts, [320]);
  }));

// In the browser a REAL's digits come from JavaScript (`toExponential`, `toFixed`), natively from
// Rust's float formatting; the fixture is the native build's output (crates/sql/tests/reals.rs).
test('REAL to text and round() give the native build\'s results', { timeout: 60_000 }, () =>
  withPage(async (page) => {
    const fixture = readFileSync(new URL('./fixtures/reals.txt', import.meta.url), 'utf8').trim().split('\n');
    const differ = await page.evaluate(async (lines) => {
      const dv = new DataView(new ArrayBuffer(8));
      const num = (hex) => { dv.setBigUint64(0, BigInt(`0x${hex}`)); return dv.getFloat64(0); };
      const hex = (x) => { dv.setFloat64(0, x); return dv.getBigUint64(0).toString(16).padStart(16, '0'); };
      const db = await cairn.open('reals');
      const stmt = db.prepare('WITH x(v) AS (SELECT CAST(?1 AS REAL)) '
        + 'SELECT CAST(v AS TEXT) AS t, round(v, 1) AS r1, round(v, 2) AS r2, round(v, 7) AS r7 FROM x');
      const differ = [];
      for (const line of lines) {
        const [bits] = line.split(' ');
        const r = await stmt.get([num(bits)]);
        const got = [bits, r.t, hex(r.r1), hex(r.r2), hex(r.r7)].join(' ');
        if (got !== line) differ.push({ want: line, got });
      }
      await stmt.finalize();
      return differ;
    }, fixture);
    assert.ok(fixture.length > 1000);
    assert.deepEqual(differ.slice(0, 5), []);
  }));
