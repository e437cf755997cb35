// `cairn-db/node`: the same cairn.wasm and API in Node.js, over node:fs files and ':memory:';
// files it writes open in the native shell (crates/cli) and the other way round; imports and
// exports with progress, and imports that must leave the old database as it was.
// Runs the built package (dist/: `node scripts/build.mjs`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createReadStream, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { open, create, importDatabase, destroy, CairnError } from '../../dist/node.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(join(tmpdir(), 'cairn-node-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

async function attempt(fn) {
  try {
    return { ok: true, value: await fn() };
  } catch (e) {
    return { ok: false, code: e.code, message: e.message, isCairn: e instanceof CairnError };
  }
}

/** The native shell, built by cargo: runs `input` on `file`, returns its output. */
function shell(file, input) {
  execFileSync('cargo', ['build', '-q', '-p', 'cairn-cli', '--bin', 'cairn'], { cwd: ROOT, stdio: 'inherit' });
  const bin = join(resolve(ROOT, process.env.CARGO_TARGET_DIR ?? 'target'), 'debug/cairn');
  return execFileSync(bin, [file], { input, encoding: 'utf8' });
}

test('the API over a file: statements, prepared statements, transactions, errors, reopen', async () => {
  const file = join(dir, 'api.cairn');
  const db = await open(file);
  await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, data BLOB)');
  const info = await db.run('INSERT INTO t (name, data) VALUES (?, ?)', ['ada', new Uint8Array([1, 2, 3])]);
  assert.equal(info.changes, 1);
  const stmt = db.prepare('INSERT INTO t (name) VALUES (:name)');
  for (const name of ['bob', 'cy']) await stmt.run({ ':name': name });
  await stmt.finalize();
  await db.transaction(async (tx) => {
    await tx.run("UPDATE t SET name = 'ada2' WHERE name = 'ada'");
  });
  const rolled = await attempt(() => db.transaction(async (tx) => {
    await tx.run("DELETE FROM t");
    throw new Error('no');
  }));
  assert.equal(rolled.ok, false);
  assert.deepEqual(await db.query('SELECT name FROM t ORDER BY id'), [{ name: 'ada2' }, { name: 'bob' }, { name: 'cy' }]);
  assert.deepEqual((await db.get('SELECT data FROM t WHERE id = 1')).data, new Uint8Array([1, 2, 3]));
  const bad = await attempt(() => db.query('SELEC 1'));
  assert.equal(bad.code, 'SYNTAX');
  assert.ok(bad.isCairn, 'errors are CairnError');
  const dup = await attempt(() => db.run('INSERT INTO t (id, name) VALUES (1, ?)', ['x']));
  assert.equal(dup.code, 'CONSTRAINT_PRIMARY_KEY');
  // One holder of a file in the process, as one Worker holds an OPFS file.
  assert.equal((await attempt(() => open(file))).code, 'BUSY');
  assert.equal((await attempt(() => destroy(file))).code, 'BUSY');
  // A statement that needs cairn-rest.wasm (integrity check), loaded from disk.
  assert.deepEqual(await db.check(), []);
  await db.close();
  assert.equal((await attempt(() => db.query('SELECT 1'))).code, 'CLOSED');

  const again = await open(file, { create: false });
  assert.deepEqual(await again.query('SELECT count(*) AS n FROM t'), [{ n: 3 }]);
  await again.close();
  await destroy(file);
  assert.equal(existsSync(file), false);
  assert.equal((await attempt(() => open(file, { create: false }))).code, 'NOT_FOUND');
});

test(':memory: databases are separate and leave no file', async () => {
  const a = await open(':memory:');
  const b = await create(':memory:');
  await a.exec("CREATE TABLE m (v TEXT); INSERT INTO m VALUES ('a')");
  assert.deepEqual(await a.query('SELECT v FROM m'), [{ v: 'a' }]);
  assert.equal((await attempt(() => b.query('SELECT v FROM m'))).code, 'UNKNOWN_TABLE');
  assert.equal(existsSync(':memory:'), false);
  const bytes = await a.export();
  assert.ok(bytes.length >= 4096);
  await Promise.all([a.close(), b.close()]);
});

test('a file written in Node opens in the native shell, and the shell\'s in Node', async () => {
  const file = join(dir, 'to-shell.cairn');
  const db = await open(file);
  await db.exec(`CREATE TABLE k (id TEXT PRIMARY KEY, v INTEGER, r REAL);
    CREATE INDEX k_v ON k(v);
    INSERT INTO k VALUES ('a', 1, 0.5), ('b', 2, NULL), ('c', 2, -1.25);`);
  await db.close();
  assert.equal(shell(file, '.mode csv\n.check\nSELECT id, v, r FROM k WHERE v = 2 ORDER BY id;\n'), 'ok\nid,v,r\nb,2,NULL\nc,2,-1.25\n');

  const other = join(dir, 'from-shell.cairn');
  shell(other, "CREATE TABLE s (x INTEGER, y TEXT);\nINSERT INTO s VALUES (7, 'seven'), (8, 'eight');\n");
  const back = await open(other, { create: false });
  assert.deepEqual(await back.query('SELECT x, y FROM s ORDER BY x'), [{ x: 7, y: 'seven' }, { x: 8, y: 'eight' }]);
  assert.deepEqual(await back.check(), []);
  await back.close();
});

/** A database of about `mb` MiB, exported. */
async function bigExport(mb) {
  const db = await open(':memory:');
  await db.exec('CREATE TABLE b (id INTEGER PRIMARY KEY, blob BLOB)');
  await db.transaction(async (tx) => {
    for (let i = 0; i < mb * 16; i++) await tx.run('INSERT INTO b (blob) VALUES (?)', [new Uint8Array(65536).fill(i)]);
  });
  const steps = [];
  const bytes = await db.export({ onProgress: (p) => steps.push(p) });
  await db.close();
  return { bytes, steps };
}

test('export and import report progress in order up to the total, from bytes and streams', async () => {
  const { bytes, steps } = await bigExport(3);
  assert.ok(bytes.length > 3 << 20, `export is ${bytes.length} bytes`);
  assert.ok(steps.length >= 3, `${steps.length} export steps`);
  for (let i = 1; i < steps.length; i++) assert.ok(steps[i].done > steps[i - 1].done);
  assert.deepEqual(steps.at(-1), { done: bytes.length, total: bytes.length });

  const fromBytes = [];
  await importDatabase(join(dir, 'big1.cairn'), bytes, { onProgress: (p) => fromBytes.push(p) });
  assert.ok(fromBytes.length >= 3);
  for (let i = 1; i < fromBytes.length; i++) assert.ok(fromBytes[i].done > fromBytes[i - 1].done);
  assert.deepEqual(fromBytes.at(-1), { done: bytes.length, total: bytes.length });

  // A Node.js file stream (64 KiB pieces), with its length given for the progress.
  const src = join(dir, 'big.export');
  writeFileSync(src, bytes);
  const fromStream = [];
  await importDatabase(join(dir, 'big2.cairn'), createReadStream(src), { total: bytes.length, onProgress: (p) => fromStream.push(p) });
  assert.deepEqual(fromStream.at(-1), { done: bytes.length, total: bytes.length });
  for (const f of ['big1.cairn', 'big2.cairn']) {
    assert.deepEqual(readFileSync(join(dir, f)), Buffer.from(bytes));
    const db = await open(join(dir, f), { create: false });
    assert.deepEqual(await db.query('SELECT count(*) AS n FROM b'), [{ n: 48 }]);
    await db.close();
  }
});

/** A copy of `bytes` with a byte changed in every page after the first two. */
function damage(bytes) {
  const out = bytes.slice();
  for (let at = 8192 + 100; at < out.length; at += 4096) out[at] ^= 0xff;
  return out;
}

test('a bad import leaves the old database as it was', async () => {
  const file = join(dir, 'keep.cairn');
  const db = await open(file);
  await db.exec("CREATE TABLE keep (v TEXT); INSERT INTO keep VALUES ('old')");
  await db.close();
  const before = readFileSync(file);
  const other = await open(':memory:');
  await other.exec("CREATE TABLE keep (v TEXT); INSERT INTO keep VALUES ('new')");
  const good = await other.export();
  await other.close();

  const cases = {
    exists: await attempt(() => importDatabase(file, good)),
    garbage: await attempt(() => importDatabase(file, new Uint8Array(8192).fill(7), { replace: true })),
    // A cairn file with its pages damaged past the superblocks: the whole-file check refuses it.
    damaged: await attempt(() => importDatabase(file, damage(good), { replace: true })),
    foreign: await attempt(() => importDatabase(file, Buffer.from('SQLite format 3\0'.padEnd(4096, '\0')), { replace: true })),
    cut: await attempt(() => importDatabase(file, Readable.from((function* () {
      yield good.slice(0, 4096);
      throw new Error('connection reset');
    })()), { replace: true })),
    short: await attempt(() => importDatabase(file, Readable.from([good.slice(0, 4096)]), { replace: true, total: good.length })),
    notBytes: await attempt(() => importDatabase(file, 42, { replace: true })),
    memory: await attempt(() => importDatabase(':memory:', good)),
  };
  assert.equal(cases.exists.code, 'ALREADY_EXISTS');
  assert.equal(cases.garbage.code, 'NOT_A_DATABASE');
  assert.equal(cases.damaged.code, 'CORRUPT', JSON.stringify(cases.damaged));
  assert.equal(cases.foreign.code, 'NOT_A_DATABASE');
  assert.equal(cases.cut.code, 'IMPORT_INCOMPLETE');
  assert.match(cases.cut.message, /connection reset/);
  assert.equal(cases.short.code, 'IMPORT_INCOMPLETE');
  assert.equal(cases.notBytes.code, 'INVALID_INPUT');
  assert.equal(cases.memory.code, 'INVALID_NAME');
  assert.deepEqual(readFileSync(file), before, 'the file is byte for byte as it was');
  const kept = await open(file, { create: false });
  assert.deepEqual(await kept.query('SELECT v FROM keep'), [{ v: 'old' }]);
  assert.equal((await attempt(() => importDatabase(file, good, { replace: true }))).code, 'BUSY');
  await kept.close();
  // And a sound one replaces it.
  await importDatabase(file, good, { replace: true });
  const replaced = await open(file, { create: false });
  assert.deepEqual(await replaced.query('SELECT v FROM keep'), [{ v: 'new' }]);
  await replaced.close();
});

test('a database left open does not keep the process alive', () => {
  const script = `import { open } from ${JSON.stringify(join(ROOT, 'dist/node.js'))};
    const db = await open(':memory:'); await db.exec('CREATE TABLE t (a INTEGER)'); console.log('done');`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60000 });
  assert.equal(out, 'done\n');
});

test("the packed package's cairn-db/node in a fresh Node.js app", () => {
  const app = mkdtempSync(join(tmpdir(), 'cairn-node-app-'));
  try {
    execFileSync('npm', ['pack', '--silent', '--pack-destination', app], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    const tarball = execFileSync('ls', [app], { encoding: 'utf8' }).split('\n').find((f) => f.endsWith('.tgz'));
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'fresh-node-app', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', join(app, tarball)], { cwd: app, stdio: 'inherit' });
    writeFileSync(join(app, 'main.js'), `
      import { open, CairnError } from 'cairn-db/node';
      const db = await open('notes.cairn');
      await db.exec('CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT)');
      await db.run('INSERT INTO note (body) VALUES (?)', ['from node']);
      let code = null;
      try { await db.query('SELEC'); } catch (e) { code = e instanceof CairnError ? e.code : 'not a CairnError'; }
      const rows = await db.query('SELECT id, body FROM note');
      const check = await db.check();
      await db.close();
      // The sync thread and its WebSocket (the ws package, an optional dependency, on Node.js 20).
      const synced = await open('synced.cairn', { sync: true });
      const id = await synced.sync.id();
      await synced.sync.connectRelay('ws://127.0.0.1:9/');
      let relay;
      for (let i = 0; i < 200 && !relay?.lastError; i++) {
        await new Promise((r) => setTimeout(r, 50));
        relay = (await synced.sync.status()).relays[0];
      }
      await synced.close();
      console.log(JSON.stringify({ rows, code, check, id: id.length, relay: relay?.lastError?.code }));
    `);
    const out = JSON.parse(execFileSync(process.execPath, ['main.js'], { cwd: app, encoding: 'utf8', timeout: 60000 }));
    assert.deepEqual(out, { rows: [{ id: 1, body: 'from node' }], code: 'SYNTAX', check: [], id: 64, relay: 'CONNECTION' });
    assert.ok(existsSync(join(app, 'notes.cairn')), 'the file is where the app ran');
  } finally {
    rmSync(app, { recursive: true, force: true });
  }
});

test('a file open in another process is BUSY until that process ends; its commits stay', async () => {
  const file = join(dir, 'shared.cairn');
  const { spawn } = await import('node:child_process');
  const script = `import { open } from ${JSON.stringify(join(ROOT, 'dist/node.js'))};
    const db = await open(${JSON.stringify(file)}); await db.exec('CREATE TABLE t (a INTEGER)');
    for (const a of [1, 2, 3]) await db.run('INSERT INTO t VALUES (?)', [a]);
    console.log('ready'); setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise((res, rej) => {
      child.stdout.on('data', (d) => String(d).includes('ready') && res());
      child.on('exit', (code) => rej(new Error(`the other process exited (${code})`)));
    });
    assert.equal((await attempt(() => open(file))).code, 'BUSY');
    assert.equal((await attempt(() => destroy(file))).code, 'BUSY');
    assert.equal((await attempt(() => importDatabase(file, new Uint8Array(4096), { replace: true }))).code, 'NOT_A_DATABASE');
  } finally {
    child.kill('SIGKILL');
    await new Promise((res) => (child.exitCode !== null || child.signalCode !== null ? res() : child.on('exit', res)));
  }
  // Killed, it left its lock behind: a lock whose process is gone is taken over, and what it
  // committed before it was killed is there.
  assert.ok(existsSync(`${file}.lock`));
  const db = await open(file);
  assert.deepEqual(await db.query('SELECT sum(a) AS s FROM t'), [{ s: 6 }]);
  assert.deepEqual(await db.check(), []);
  await db.close();
  assert.equal(existsSync(`${file}.lock`), false, 'close() lets go of the lock');
});

test('live queries and change listeners in Node.js', async () => {
  const db = await open(join(dir, 'watch.cairn'));
  await db.exec('CREATE TABLE t (v INTEGER); CREATE TABLE u (v INTEGER)');
  const sums = [];
  const changes = [];
  db.onChange((c) => changes.push(c));
  const stop = db.watch('SELECT sum(v) AS s FROM t', [], (rows) => sums.push(rows[0].s));
  const until = async (f) => {
    for (let i = 0; i < 400 && !f(); i++) await new Promise((r) => setTimeout(r, 5));
  };
  await until(() => sums.length === 1);
  await db.run('INSERT INTO t VALUES (1)');
  await db.run('INSERT INTO u VALUES (5)'); // another table: no result
  await db.run('INSERT INTO t VALUES (2)');
  await until(() => sums.length === 3 && changes.length === 3);
  stop();
  await db.run('INSERT INTO t VALUES (3)');
  await until(() => changes.length === 4);
  assert.deepEqual(sums, [null, 1, 3]);
  assert.deepEqual(changes.map((c) => [c.tables[0].table, c.tables[0].inserted, c.origin]), [['t', 1, 'local'], ['u', 1, 'local'], ['t', 1, 'local'], ['t', 1, 'local']]);
  await db.close();
});

test('migrations at open: the missing steps, and a failing one rolled back with MIGRATION', async () => {
  const file = join(dir, 'migrated.cairn');
  const steps = ['CREATE TABLE t (x INTEGER)', { version: 2, up: (tx) => tx.run('INSERT INTO t VALUES (2)') }];
  let db = await open(file, { migrations: steps });
  assert.equal((await db.get('PRAGMA user_version')).user_version, 2);
  await db.close();
  const failed = await attempt(() => open(file, { migrations: [...steps, 'INSERT INTO t VALUES (3); SELECT nope FROM t'] }));
  assert.equal(failed.code, 'MIGRATION');
  assert.match(failed.message, /^migration 3 failed, the database stays at version 2: /);
  // The failed open let the file go; it stands at version 2 with version 3's row rolled back.
  db = await open(file);
  assert.equal((await db.get('PRAGMA user_version')).user_version, 2);
  assert.deepEqual(await db.query('SELECT x FROM t'), [{ x: 2 }]);
  await db.close();
});
