// Two pages of one browser open the same database: one owns it (its Worker holds the file), the
// other's statements go through the owner; when the owner closes mid-stream, the other takes over
// and no write whose promise resolved is lost.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

test('a second tab goes through the owner, and takes over when the owner closes', async () => {
  const b = await launch();
  try {
    const a = b.page;
    const second = await b.context.newPage();
    await second.goto(`${b.server.url}/tests/browser/page.html`);
    await second.waitForFunction(() => window.cairnReady === true);

    const ownerA = await a.evaluate(async () => {
      window.db = await cairn.open('shared');
      await db.exec('CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY, who TEXT, n INTEGER)');
      await db.run("INSERT INTO log (who, n) VALUES ('a', 0)");
      return db.isOwner;
    });
    const ownerB = await second.evaluate(async () => {
      window.db = await cairn.open('shared');
      return db.isOwner;
    });
    assert.equal(ownerA, true);
    assert.equal(ownerB, false);

    // B writes through A, and each sees the other's rows.
    const seen = await second.evaluate(async () => {
      await db.run("INSERT INTO log (who, n) VALUES ('b', 1)");
      const tx = await db.transaction(async (tx) => {
        await tx.run("INSERT INTO log (who, n) VALUES ('b', 2)");
        return (await tx.get('SELECT count(*) AS c FROM log')).c;
      });
      return { tx, rows: await db.query('SELECT who, n FROM log ORDER BY id') };
    });
    assert.equal(seen.tx, 3);
    assert.deepEqual(seen.rows, [{ who: 'a', n: 0 }, { who: 'b', n: 1 }, { who: 'b', n: 2 }]);
    assert.equal((await a.evaluate(() => db.get("SELECT count(*) AS c FROM log WHERE who = 'b'"))).c, 2);

    // B streams writes; A's tab closes in the middle of the stream.
    await second.evaluate(() => {
      window.outcomes = [];
      window.stream = (async () => {
        for (let n = 100; n < 400; n++) {
          try {
            await db.run("INSERT INTO log (who, n) VALUES ('stream', ?)", [n]);
            outcomes.push([n, 'ok']);
          } catch (e) {
            outcomes.push([n, e.code]);
          }
        }
      })();
    });
    await second.waitForFunction(() => outcomes.length >= 50);
    await a.close();
    await second.evaluate(() => stream);
    const end = await second.evaluate(async () => ({
      outcomes,
      owner: db.isOwner,
      rows: (await db.query("SELECT n FROM log WHERE who = 'stream' ORDER BY n")).map((r) => r.n),
      check: await db.check(),
    }));
    assert.equal(end.owner, true, 'the second tab must have taken over');
    assert.deepEqual(end.check, []);
    const ok = end.outcomes.filter(([, s]) => s === 'ok').map(([n]) => n);
    const failed = end.outcomes.filter(([, s]) => s !== 'ok');
    for (const [n, code] of failed) assert.equal(code, 'OWNER_GONE', `write ${n} failed with ${code}`);
    assert.ok(failed.length <= 2, `${failed.length} writes failed at the hand-over`);
    // Every write that resolved is there; a write whose outcome was unknown may or may not be.
    for (const n of ok) assert.ok(end.rows.includes(n), `resolved write ${n} was lost`);
    const unknown = new Set(failed.map(([n]) => n));
    for (const n of end.rows) assert.ok(ok.includes(n) || unknown.has(n), `write ${n} appeared twice or from nowhere`);
    assert.ok(ok.length >= 290, `only ${ok.length} of 300 writes went through`);
  } finally {
    await b.close();
  }
});

test('a tab that goes away mid-transaction leaves nothing of it, and does not block the owner', async () => {
  const b = await launch();
  try {
    const a = b.page;
    await a.evaluate(async () => {
      window.db = await cairn.open('abandon', { busyTimeout: 2000 });
      await db.exec('CREATE TABLE t (x INTEGER)');
    });
    const second = await b.context.newPage();
    await second.goto(`${b.server.url}/tests/browser/page.html`);
    await second.waitForFunction(() => window.cairnReady === true);
    await second.evaluate(async () => {
      const db = await cairn.open('abandon');
      // A statement first, so the owner meets this tab outside the transaction's session.
      await db.get('SELECT count(*) AS c FROM t');
      db.transaction(async (tx) => {
        await tx.run('INSERT INTO t VALUES (1)');
        window.inTx = true;
        await new Promise(() => {}); // never finishes
      });
    });
    await second.waitForFunction(() => window.inTx === true);
    await second.close();
    const r = await a.evaluate(async () => ({
      rows: await db.query('SELECT x FROM t'),
      write: await attempt(() => db.run('INSERT INTO t VALUES (2)')),
    }));
    assert.deepEqual(r.rows, [], 'the abandoned transaction left rows behind');
    assert.equal(r.write.ok, true, JSON.stringify(r.write));
  } finally {
    await b.close();
  }
});

test('a second tab may join a sync channel, and the channel outlives the owner tab', async () => {
  const b = await launch();
  try {
    const a = b.page;
    const second = await b.context.newPage();
    await second.goto(`${b.server.url}/tests/browser/page.html`);
    await second.waitForFunction(() => window.cairnReady === true);
    const ddl = 'CREATE TABLE item (id TEXT PRIMARY KEY, label TEXT) REPLICATED';
    await a.evaluate(async (ddl) => {
      window.db = await cairn.open('tk-shared', { sync: true });
      await db.exec(ddl);
    }, ddl);
    // The second tab: a follower of tk-shared, and the owner of tk-other, which writes.
    const first = await second.evaluate(async (ddl) => {
      window.db = await cairn.open('tk-shared', { sync: true });
      window.other = await cairn.open('tk-other', { sync: true });
      await other.exec(ddl);
      await other.sync.connectChannel('tk-bus');
      // Asked from a follower: runs in the owner's Worker.
      window.link = await db.sync.connectChannel('tk-bus');
      await other.run("INSERT INTO item VALUES ('one', 'before')");
      await until('the owner to get the first row', async () => (await db.get('SELECT count(*) AS n FROM item')).n === 1);
      return { owner: db.isOwner, link: typeof link.link };
    }, ddl);
    assert.deepEqual(first, { owner: false, link: 'number' });
    // The owner asks for the same channel: one membership, two holders.
    const shared = await a.evaluate(async () => {
      const mine = await db.sync.connectChannel('tk-bus');
      return mine.link;
    });
    const firstLink = await second.evaluate(() => link.link);
    assert.equal(shared, firstLink, 'the owner joined the channel a second time');
    // The owner's tab goes; the second tab takes over and joins the channel in its own Worker.
    await a.close();
    const after = await second.evaluate(async () => {
      await until('the take-over', async () => {
        await db.get('SELECT 1 AS x');
        return db.isOwner;
      });
      await other.run("INSERT INTO item VALUES ('two', 'after')");
      await until('the new owner to get the second row', async () => (await db.get('SELECT count(*) AS n FROM item')).n === 2);
      const rows = await db.query('SELECT id, label FROM item ORDER BY id');
      const closed = await link.close();
      const closedAgain = await link.close();
      const digests = [await db.sync.digest(), await other.sync.digest()];
      return { owner: db.isOwner, rows, closed, closedAgain, digests };
    });
    assert.equal(after.owner, true);
    assert.deepEqual(after.rows, [{ id: 'one', label: 'before' }, { id: 'two', label: 'after' }]);
    assert.equal(after.closed, true);
    assert.equal(after.closedAgain, false);
    assert.equal(after.digests[0], after.digests[1]);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});
