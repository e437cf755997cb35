// Replication in the browser: two databases (two Workers, two names, cairn-sync.wasm) in one
// page sync over a MessageChannel; edits on both sides converge, signatures verify, and the
// replica survives a reopen. A database opened without sync refuses replicated writes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

test('two databases sync over a MessageChannel and converge', async () => {
  const b = await launch();
  const workers = []; // the Worker scripts the page started
  b.page.on('request', (r) => {
    const name = /\/(cairn[\w-]*worker\.js|cairn-extra\.js)$/.exec(r.url());
    if (name) workers.push(name[1]);
  });
  try {
    const r = await b.page.evaluate(async () => {
      const ddl = `CREATE TABLE todo (id TEXT PRIMARY KEY DEFAULT (uuid7()), title TEXT NOT NULL,
                   done INTEGER DEFAULT 0, likes INTEGER DEFAULT 0) REPLICATED (COUNTER likes)`;
      const out = {};
      const a = await cairn.open('sync-a', { sync: true });
      const c = await cairn.open('sync-b', { sync: true });
      await a.exec(ddl);
      await c.exec(ddl);
      const aId = await a.sync.id();
      const cId = await c.sync.id();
      out.ids = [aId.length, cId.length, aId !== cId];
      // c writes to a's scopes, as a second device of the same account would.
      await a.sync.authorize('todo', [cId]);
      await c.sync.setOwner(aId);
      out.beforeListed = await attempt(() => c.run("INSERT INTO todo (id, title) VALUES ('early', 'x')"));
      const ch = new MessageChannel();
      await a.sync.connect(ch.port1);
      await c.sync.connect(ch.port2);
      await a.run("INSERT INTO todo (id, title) VALUES ('t1', 'milk'), ('t2', 'bread')");
      await a.run("INSERT INTO todo (title) VALUES ('generated id')");
      // Once the writer list has arrived, c may write.
      await until('c to be authorized', async () => (await attempt(() => c.run("INSERT INTO todo (id, title) VALUES ('t3', 'eggs')"))).ok);
      const all = 'SELECT id, title, done, likes FROM todo ORDER BY id';
      const same = async () => JSON.stringify(await a.query(all)) === JSON.stringify(await c.query(all));
      await until('first convergence', async () => (await a.query(all)).length === 4 && same());
      // Concurrent edits of one row: different columns merge, counters add up.
      await a.run("UPDATE todo SET done = 1, likes = likes + 2 WHERE id = 't1'");
      await c.run("UPDATE todo SET title = 'oat milk', likes = likes + 3 WHERE id = 't1'");
      await c.run("DELETE FROM todo WHERE id = 't2'");
      await until('second convergence', async () => {
        const row = await a.get("SELECT title, done, likes FROM todo WHERE id = 't1'");
        return row.likes === 5 && row.title === 'oat milk' && (await same());
      });
      out.rows = await a.query(all);
      out.t1 = await c.get("SELECT title, done, likes FROM todo WHERE id = 't1'");
      out.digests = [await a.sync.digest(), await c.sync.digest()];
      out.verify = [await a.sync.verify(), await c.sync.verify()];
      out.check = [await a.check(), await c.check()];
      out.events = (await c.sync.events()).map((e) => e.kind);
      // Reopen: same identity, same rows, same merged state.
      await a.close();
      const a2 = await cairn.open('sync-a', { sync: true });
      out.reopened = {
        id: (await a2.sync.id()) === aId,
        digest: await a2.sync.digest(),
        rows: (await a2.query(all)).length,
        verify: await a2.sync.verify(),
      };
      await a2.close();
      await c.close();
      // Without sync (cairn.wasm): replicated writes are refused, reads work.
      const plain = await cairn.open('sync-b');
      out.plainRead = (await plain.get('SELECT count(*) AS n FROM todo')).n;
      out.plainWrite = await attempt(() => plain.run("INSERT INTO todo (id, title) VALUES ('p', 'x')"));
      out.plainSync = await attempt(() => plain.sync.id());
      out.plainAfter = (await plain.get('SELECT count(*) AS n FROM todo')).n;
      await plain.close();
      return out;
    });
    assert.deepEqual(r.ids, [64, 64, true]);
    assert.equal(r.beforeListed.ok, false);
    assert.equal(r.beforeListed.code, 'SYNC_REFUSED', r.beforeListed.message);
    assert.equal(r.rows.length, 3, JSON.stringify(r.rows));
    assert.deepEqual(r.t1, { title: 'oat milk', done: 1, likes: 5 });
    assert.ok(r.rows.some((row) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(row.id)), 'a uuid7 id');
    assert.equal(r.digests[0], r.digests[1]);
    assert.deepEqual(r.verify, [[], []]);
    assert.deepEqual(r.check, [[], []]);
    assert.ok(r.events.includes('applied'), JSON.stringify(r.events));
    assert.deepEqual(r.reopened, { id: true, digest: r.digests[0], rows: 3, verify: [] });
    assert.equal(r.plainRead, 3);
    assert.equal(r.plainWrite.code, 'NOT_REPLICABLE', r.plainWrite.message);
    assert.equal(r.plainSync.code, 'NO_SYNC', r.plainSync.message);
    assert.equal(r.plainAfter, 3);
    // With { sync: true } the Worker script that carries the sync transports; without, the other.
    assert.ok(workers.includes('cairn-sync-worker.js') && workers.includes('cairn-worker.js'), workers.join(', '));
    // `db.sync` fetched what the page needs to sync, once (worker/extra.js).
    assert.equal(workers.filter((w) => w === 'cairn-extra.js').length, 1, workers.join(', '));
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});

test('three databases on one BroadcastChannel converge, and one that leaves is let go', async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const ddl = `CREATE TABLE item (id TEXT PRIMARY KEY, label TEXT, n INTEGER DEFAULT 0) REPLICATED (COUNTER n)`;
      const dbs = [];
      for (const name of ['bus-a', 'bus-b', 'bus-c']) {
        const db = await cairn.open(name, { sync: true });
        await db.exec(ddl);
        dbs.push(db);
      }
      // All three write to the first one's scopes.
      const owner = await dbs[0].sync.id();
      await dbs[0].sync.authorize('item', [await dbs[1].sync.id(), await dbs[2].sync.id()]);
      for (const db of dbs.slice(1)) await db.sync.setOwner(owner);
      const links = [];
      for (const db of dbs) links.push(await db.sync.connectChannel('test-bus'));
      await dbs[0].run("INSERT INTO item (id, label) VALUES ('x', 'from a')");
      for (const [i, db] of dbs.entries()) {
        await until(`writer ${i}`, async () => {
          try {
            await db.run('UPDATE item SET n = n + ? WHERE id = ?', [i + 1, 'x']);
            return (await db.get("SELECT count(*) AS c FROM item WHERE id = 'x'")).c === 1;
          } catch (e) {
            if (e.code !== 'SYNC_REFUSED') throw e;
            return false;
          }
        });
      }
      const all = 'SELECT id, label, n FROM item ORDER BY id';
      const want = JSON.stringify([{ id: 'x', label: 'from a', n: 6 }]);
      for (const db of dbs) await until('convergence', async () => JSON.stringify(await db.query(all)) === want);
      const digests = [];
      for (const db of dbs) digests.push(await db.sync.digest());
      // c leaves; a and b go on syncing.
      await links[2].close();
      await dbs[0].run("INSERT INTO item (id, label) VALUES ('y', 'after c left')");
      await until('b to see y', async () => (await dbs[1].get("SELECT count(*) AS c FROM item WHERE id = 'y'")).c === 1);
      const cHasY = (await dbs[2].get("SELECT count(*) AS c FROM item WHERE id = 'y'")).c;
      const rows = await dbs[1].query(all);
      for (const db of dbs) await db.close();
      return { digests, rows, cHasY };
    });
    assert.equal(new Set(r.digests).size, 1, JSON.stringify(r.digests));
    assert.deepEqual(r.rows.map((x) => x.id), ['x', 'y']);
    assert.equal(r.cHasY, 0);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});

test('a database with no peer signs its records once statements are idle', async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const db = await cairn.open('sync-idle', { sync: true });
      await db.exec('CREATE TABLE note (id TEXT PRIMARY KEY, body TEXT) REPLICATED');
      await db.run("INSERT INTO note VALUES ('a', 'one')");
      await db.run("INSERT INTO note VALUES ('b', 'two'), ('c', 'three')");
      const before = await db.sync.pending();
      const end = Date.now() + 15000;
      while ((await db.sync.pending()) > 0 && Date.now() < end) await new Promise((res) => setTimeout(res, 100));
      const after = await db.sync.pending();
      const verify = await db.sync.verify();
      const events = (await db.sync.events()).filter((e) => e.kind === 'error');
      await db.close();
      // The blocks were saved: nothing is pending after a reopen either.
      const again = await cairn.open('sync-idle', { sync: true });
      const reopened = { pending: await again.sync.pending(), verify: await again.sync.verify() };
      await again.close();
      // The engine without replication has nothing to seal and says so.
      const plain = await cairn.open('sync-idle');
      let plainPending;
      try {
        plainPending = await plain.sync.pending();
      } catch (e) {
        plainPending = e.code;
      }
      await plain.close();
      return { before, after, verify, events, reopened, plainPending };
    });
    assert.equal(r.before, 2, 'one record per commit, not yet sealed');
    assert.equal(r.after, 0, 'sealed with no link open');
    assert.deepEqual(r.verify, []);
    assert.deepEqual(r.events, []);
    assert.deepEqual(r.reopened, { pending: 0, verify: [] });
    assert.equal(r.plainPending, 'NO_SYNC');
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});

test('after an engine restart the tab joins its sync channel again', async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const ddl = 'CREATE TABLE item (id TEXT PRIMARY KEY, label TEXT) REPLICATED';
      const a = await cairn.open('restart-a', { sync: true });
      const c = await cairn.open('restart-c', { sync: true });
      await a.exec(ddl);
      await c.exec(ddl);
      await c.sync.setOwner(await a.sync.id());
      const linkA = await a.sync.connectChannel('restart-bus');
      await c.sync.connectChannel('restart-bus');
      const count = (db) => db.get('SELECT count(*) AS n FROM item').then((x) => x.n);
      await a.run("INSERT INTO item VALUES ('before', 'x')");
      await until('c to see the first row', async () => (await count(c)) === 1);
      const firstLink = linkA.link;
      // A panic stops a's engine; a new Worker reopens the database and joins the channel again.
      const panic = await attempt(() => a._send('debugPanic', 0, ['boom']));
      await a.run("INSERT INTO item VALUES ('after', 'y')");
      await until('c to see the row written after the restart', async () => (await count(c)) === 2);
      // And the other way.
      await a.sync.authorize('item', [await c.sync.id()]);
      await until('c to be allowed to write', async () => (await attempt(() => c.run("INSERT INTO item VALUES ('from-c', 'z')"))).ok);
      await until('a to see c', async () => (await count(a)) === 3);
      const closed = await linkA.close();
      const digests = [await a.sync.digest(), await c.sync.digest()];
      const verify = [await a.sync.verify(), await c.sync.verify()];
      await a.close();
      await c.close();
      return { panic: panic.code, relinked: typeof linkA.link === 'number' && linkA.link !== undefined, firstLink, closed, digests, verify };
    });
    assert.equal(r.panic, 'INTERNAL');
    assert.equal(r.relinked, true);
    assert.equal(r.closed, true);
    assert.equal(r.digests[0], r.digests[1]);
    assert.deepEqual(r.verify, [[], []]);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});
