// Replication in the browser: two databases (two Workers, two names, cairn-sync.wasm) in one
// page sync over a MessageChannel; edits on both sides converge, signatures verify, and the
// replica survives a reopen. A database opened without sync refuses replicated writes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

test('two databases sync over a MessageChannel and converge', async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const until = async (what, f, ms = 15000) => {
        const end = Date.now() + ms;
        for (;;) {
          const v = await f();
          if (v) return v;
          if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
          await new Promise((res) => setTimeout(res, 50));
        }
      };
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
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});
