// `cairn-db/node` with `{ sync: true }`: two Node.js databases, each in its own file with its own
// key beside it (`<file>-key`), sync one replicated table through a cairn relay on loopback (the
// relay transport over the `ws` package's WebSocket on Node.js 20), and over a BroadcastChannel
// between two threads of one process. Runs the built package (dist/: `node scripts/build.mjs`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open, importDatabase, destroy } from '../../dist/node.js';
import { startRelay, deadPort } from '../browser/relays.mjs';

const dir = mkdtempSync(join(tmpdir(), 'cairn-node-sync-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

const DDL = `CREATE TABLE IF NOT EXISTS todo (id TEXT PRIMARY KEY DEFAULT (uuid7()), title TEXT NOT NULL,
             likes INTEGER DEFAULT 0) REPLICATED (COUNTER likes)`;
const ALL = 'SELECT id, title, likes FROM todo ORDER BY id';

/** Polls `f` until it returns true; fails after 20 s with what `db` saw (its sync events). */
async function until(db, what, f) {
  const end = Date.now() + 20_000;
  for (;;) {
    if (await f()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; events: ${JSON.stringify(await db.sync.events())}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Two databases, `two` listed as a writer of `one`'s scopes of `todo`. */
async function pair(a, b) {
  const one = await open(join(dir, a), { sync: true });
  const two = await open(join(dir, b), { sync: true });
  for (const db of [one, two]) await db.exec(DDL);
  const [id1, id2] = [await one.sync.id(), await two.sync.id()];
  assert.notEqual(id1, id2);
  await one.sync.authorize('todo', [id2]);
  await two.sync.setOwner(id1);
  return [one, two];
}

/** Edits on both sides, then both converge to the same rows, digest and a clean verify. */
async function converge(one, two) {
  await one.run("INSERT INTO todo (id, title) VALUES ('a1', 'from one'), ('a2', 'also from one')");
  await until(two, 'rows from one', async () => (await two.get('SELECT count(*) AS n FROM todo')).n === 2);
  await until(two, 'two to be a writer', async () => {
    try {
      await two.run("INSERT INTO todo (id, title) VALUES ('b1', 'from two')");
      return true;
    } catch (e) {
      if (e.code !== 'SYNC_REFUSED') throw e;
      return false;
    }
  });
  await two.run("UPDATE todo SET likes = likes + 2 WHERE id = 'a1'");
  await one.run("UPDATE todo SET likes = likes + 5 WHERE id = 'a1'");
  const want = [
    { id: 'a1', title: 'from one', likes: 7 },
    { id: 'a2', title: 'also from one', likes: 0 },
    { id: 'b1', title: 'from two', likes: 0 },
  ];
  for (const db of [one, two]) await until(db, 'convergence', async () => JSON.stringify(await db.query(ALL)) === JSON.stringify(want));
  assert.equal(await one.sync.digest(), await two.sync.digest());
  assert.deepEqual([await one.sync.verify(), await two.sync.verify()], [[], []]);
}

test('two Node.js databases sync through a relay; each key stays in its own file', async () => {
  const relay = await startRelay();
  const [one, two] = await pair('relay-one.cairn', 'relay-two.cairn');
  try {
    for (const db of [one, two]) await db.sync.connectRelay(relay.url);
    await converge(one, two);
    await until(one, 'the relay to hold everything', async () => (await one.sync.status()).pending === 0);
    const status = await one.sync.status();
    assert.equal(status.relays[0].state, 'connected');
    assert.equal(status.relays[0].url, relay.url);
  } finally {
    await Promise.all([one.close(), two.close()]);
    await relay.stop();
  }
  // The secret key is in `<file>-key`, never in the database file: no 32 bytes of the exported
  // key (its secret among them) are in it.
  const file = join(dir, 'relay-one.cairn');
  const db = await open(file, { sync: true });
  const key = await db.sync.exportKey();
  const id = await db.sync.id();
  await db.close();
  const bytes0 = readFileSync(file);
  for (let at = 0; at + 32 <= key.length; at++) assert.equal(bytes0.includes(Buffer.from(key).subarray(at, at + 32)), false);
  assert.ok(readFileSync(`${file}-key`).length > 0);
  assert.ok(existsSync(`${file}-key`));
  // Opened again, it is the same replica with the same key.
  const again = await open(file, { sync: true });
  assert.equal(await again.sync.id(), id);
  const bytes = await again.export();
  await again.close();
  // An import over it drops the key: the imported database signs with a key of its own.
  await importDatabase(file, bytes, { replace: true });
  assert.equal(existsSync(`${file}-key`), false);
  const imported = await open(file, { sync: true });
  assert.notEqual(await imported.sync.id(), id);
  await imported.close();
  await destroy(file);
  assert.equal(existsSync(`${file}-key`), false);
});

test('two Node.js databases in one process sync over a BroadcastChannel', async () => {
  const [one, two] = await pair('bus-one.cairn', 'bus-two.cairn');
  try {
    for (const db of [one, two]) await db.sync.connectChannel('node-bus');
    await converge(one, two);
  } finally {
    await Promise.all([one.close(), two.close()]);
  }
});

test('a relay that cannot be reached is a CONNECTION event, not a hang or a crash', async () => {
  const db = await open(':memory:', { sync: true });
  try {
    const url = `ws://127.0.0.1:${await deadPort()}/`;
    await db.sync.connectRelay(url);
    await until(db, 'the CONNECTION event', async () => (await db.sync.status()).relays[0]?.lastError?.code === 'CONNECTION');
    assert.match((await db.sync.status()).relays[0].lastError.message, /cannot reach the relay/);
    assert.deepEqual(await db.query('SELECT 1 AS one'), [{ one: 1 }]);
  } finally {
    await db.close();
  }
});
