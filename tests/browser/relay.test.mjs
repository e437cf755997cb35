// Two browsers, each with its own profile (its own OPFS, its own key), sync one replicated table
// through a cairn relay on loopback; edits on each side reach the other and converge. Then a
// browser and a Node.js database (`cairn-db/node`, dist/node.js) do the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch } from './harness.mjs';
import { startRelay } from './relays.mjs';
import { open as openInNode } from '../../dist/node.js';

test('two browser profiles sync through a relay', async () => {
  const relay = await startRelay();
  const one = await launch();
  const two = await launch();
  try {
    const ddl = `CREATE TABLE todo (id TEXT PRIMARY KEY DEFAULT (uuid7()), title TEXT NOT NULL,
                 likes INTEGER DEFAULT 0) REPLICATED (COUNTER likes)`;
    const setup = (page) => page.evaluate(async (ddl) => {
      window.db = await cairn.open('shared', { sync: true });
      await db.exec(ddl);
      return db.sync.id();
    }, ddl);
    const id1 = await setup(one.page);
    const id2 = await setup(two.page);
    assert.notEqual(id1, id2);
    // Browser two writes to scopes browser one owns, once one has listed it.
    await one.page.evaluate(async (id2) => db.sync.authorize('todo', [id2]), id2);
    await two.page.evaluate(async (id1) => db.sync.setOwner(id1), id1);
    for (const b of [one, two]) await b.page.evaluate((url) => db.sync.connectRelay(url), relay.url);

    const until = (page, what, fn, arg) => page.evaluate(async ([what, src, arg]) => {
      const f = new Function('arg', `return (${src})(arg)`);
      const end = Date.now() + 20000;
      for (;;) {
        if (await f(arg)) return true;
        if (Date.now() > end) {
          const ev = await db.sync.events();
          throw new Error(`timed out waiting for ${what}; events: ${JSON.stringify(ev)}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    }, [what, fn.toString(), arg]);

    await one.page.evaluate(() => db.run("INSERT INTO todo (id, title) VALUES ('a1', 'from one'), ('a2', 'also from one')"));
    await until(two.page, 'rows from one', async () => (await db.get('SELECT count(*) AS n FROM todo')).n === 2);
    // Two may write once the writer list has reached it through the relay.
    await until(two.page, 'two to be a writer', async () => {
      try {
        await db.run("INSERT INTO todo (id, title) VALUES ('b1', 'from two')");
        return true;
      } catch (e) {
        if (e.code !== 'SYNC_REFUSED') throw e;
        return false;
      }
    });
    await two.page.evaluate(() => db.run("UPDATE todo SET likes = likes + 2 WHERE id = 'a1'"));
    await one.page.evaluate(() => db.run("UPDATE todo SET likes = likes + 5 WHERE id = 'a1'"));
    const all = 'SELECT id, title, likes FROM todo ORDER BY id';
    const want = [
      { id: 'a1', title: 'from one', likes: 7 },
      { id: 'a2', title: 'also from one', likes: 0 },
      { id: 'b1', title: 'from two', likes: 0 },
    ];
    for (const b of [one, two]) {
      await until(b.page, 'convergence', async (want) => JSON.stringify(await db.query('SELECT id, title, likes FROM todo ORDER BY id')) === want, JSON.stringify(want));
    }
    const state = (page) => page.evaluate(async (all) => ({ rows: await db.query(all), digest: await db.sync.digest(), verify: await db.sync.verify() }), all);
    const s1 = await state(one.page);
    const s2 = await state(two.page);
    assert.deepEqual(s1.rows, want);
    assert.deepEqual(s2.rows, want);
    assert.equal(s1.digest, s2.digest);
    assert.deepEqual([s1.verify, s2.verify], [[], []]);
    assert.deepEqual(one.errors, []);
    assert.deepEqual(two.errors, []);
  } finally {
    await one.close();
    await two.close();
    await relay.stop();
  }
});

test('a browser and a Node.js database sync through a relay', async () => {
  const relay = await startRelay();
  const b = await launch();
  const dir = mkdtempSync(join(tmpdir(), 'cairn-node-relay-'));
  const node = await openInNode(join(dir, 'shared.cairn'), { sync: true });
  try {
    const ddl = `CREATE TABLE todo (id TEXT PRIMARY KEY, title TEXT NOT NULL, likes INTEGER DEFAULT 0)
                 REPLICATED (COUNTER likes)`;
    const browserId = await b.page.evaluate(async (ddl) => {
      window.db = await cairn.open('shared', { sync: true });
      await db.exec(ddl);
      return db.sync.id();
    }, ddl);
    await node.exec(ddl);
    // The browser owns the table's scope and lists the Node.js database as a writer.
    await b.page.evaluate(async (id) => db.sync.authorize('todo', [id]), await node.sync.id());
    await node.sync.setOwner(browserId);
    await b.page.evaluate((url) => db.sync.connectRelay(url), relay.url);
    await node.sync.connectRelay(relay.url);
    await b.page.evaluate(() => db.run("INSERT INTO todo (id, title) VALUES ('w1', 'from the browser')"));

    const all = 'SELECT id, title, likes FROM todo ORDER BY id';
    const want = [{ id: 'n1', title: 'from node', likes: 0 }, { id: 'w1', title: 'from the browser', likes: 3 }];
    const end = Date.now() + 20_000;
    const wait = async (what, f) => {
      while (!(await f())) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}; events: ${JSON.stringify(await node.sync.events())}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await wait('the browser\'s row in Node.js', async () => (await node.get('SELECT count(*) AS n FROM todo')).n === 1);
    await wait('Node.js to be a writer', async () => {
      try {
        await node.run("INSERT INTO todo (id, title) VALUES ('n1', 'from node')");
        return true;
      } catch (e) {
        if (e.code !== 'SYNC_REFUSED') throw e;
        return false;
      }
    });
    await node.run("UPDATE todo SET likes = likes + 1 WHERE id = 'w1'");
    await b.page.evaluate(() => db.run("UPDATE todo SET likes = likes + 2 WHERE id = 'w1'"));
    const inBrowser = () => b.page.evaluate((all) => db.query(all), all);
    await wait('convergence', async () => JSON.stringify(await node.query(all)) === JSON.stringify(want) &&
      JSON.stringify(await inBrowser()) === JSON.stringify(want));
    assert.equal(await b.page.evaluate(() => db.sync.digest()), await node.sync.digest());
    assert.deepEqual(await node.sync.verify(), []);
    assert.deepEqual(b.errors, []);
  } finally {
    await node.close();
    await b.close();
    await relay.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
