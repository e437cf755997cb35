// Live queries (`db.watch`), change listeners (`db.onChange`) and the React hook over them
// (`cairn-db/react`), in Chromium over OPFS: writes of this tab, of a second tab and of a sync peer
// each wake a watcher with the right rows; an unrelated table's write, or one that leaves the
// result as it was, does not; stop() stops; onChange gives the counts and the origin.
//
// Each watcher's callbacks are counted up to a later "sentinel" result: the Worker sends a
// query's results in commit order, so once a later commit's result has arrived, a callback the
// earlier commit should not have caused would already be there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch } from './harness.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// In the page: `window.log(name)` makes a watcher's callback that keeps each result.
async function helpers(page) {
  await page.evaluate(() => {
    window.seen = {};
    window.log = (name) => {
      seen[name] = [];
      return (r) => seen[name].push(r);
    };
    window.changes = [];
  });
}

test('a watcher sees this tab\'s commits that change its result, and nothing else', async () => {
  const b = await launch();
  try {
    await helpers(b.page);
    const r = await b.page.evaluate(async () => {
      const out = {};
      const db = await cairn.open('watch-local');
      await db.exec(`CREATE TABLE todo (id INTEGER PRIMARY KEY, title TEXT, done INTEGER DEFAULT 0);
                     CREATE TABLE other (id INTEGER PRIMARY KEY, v TEXT);`);
      db.onChange((c) => changes.push(c));
      const stop = db.watch('SELECT id, title FROM todo WHERE done = ? ORDER BY id', [0], log('open'));
      const stopCount = db.watch('SELECT count(*) AS n FROM todo', [], log('count'));
      const arrays = db.watch('SELECT title FROM todo WHERE done = 0 ORDER BY id', null, log('array'), { rowMode: 'array' });
      await until('the first results', () => seen.open.length === 1 && seen.count.length === 1 && seen.array.length === 1);
      out.first = [seen.open[0], seen.count[0]];
      await db.run("INSERT INTO todo (title) VALUES ('milk')");
      await until('the insert', () => seen.open.length === 2);
      out.afterInsert = seen.open[1];
      // Unrelated: another table. Same result: a row the WHERE leaves out (count moves).
      await db.run("INSERT INTO other (v) VALUES ('x')");
      await db.run("INSERT INTO todo (title, done) VALUES ('bread', 1)");
      await until('the count of 2', () => seen.count.at(-1)?.[0].n === 2);
      await db.run("INSERT INTO todo (title) VALUES ('eggs')"); // the sentinel
      await until('the sentinel', () => seen.open.at(-1)?.length === 2 && seen.count.length === 4);
      out.openCalls = seen.open.length;
      out.countCalls = seen.count.map((x) => x[0].n);
      out.array = seen.array.at(-1);
      // A transaction: counts per table, one change for the commit.
      changes.length = 0;
      await db.transaction(async (tx) => {
        await tx.run("UPDATE todo SET done = 1 WHERE title = 'milk'");
        await tx.run("DELETE FROM todo WHERE title = 'bread'");
        await tx.run("INSERT INTO other (v) VALUES ('y'), ('z')");
      });
      await until('the commit', () => seen.open.at(-1)?.length === 1);
      out.txChanges = changes.slice();
      out.afterTx = seen.open.at(-1);
      // stop(): no more results for that watcher; the count still runs (the sentinel).
      stop();
      arrays();
      await db.run("INSERT INTO todo (title) VALUES ('jam')");
      await until('the count after stop', () => seen.count.length === 6);
      out.countAfterStop = seen.count.map((x) => x[0].n);
      out.openAfterStop = seen.open.length;
      out.arrayAfterStop = seen.array.length;
      stopCount();
      out.rolledBack = await attempt(() => db.transaction(async (tx) => {
        await tx.run("INSERT INTO todo (title) VALUES ('never')");
        throw new Error('no');
      }));
      await db.run("INSERT INTO other (v) VALUES ('last')");
      await until('the last change', () => changes.at(-1)?.tables[0].table === 'other' && changes.at(-1).tables[0].inserted === 1);
      out.lastChanges = changes.slice(-2);
      await db.close();
      return out;
    });
    assert.deepEqual(r.first, [[], [{ n: 0 }]]);
    assert.deepEqual(r.afterInsert, [{ id: 1, title: 'milk' }]);
    // initial, milk, eggs: the other table's insert and bread (done = 1) called nothing.
    assert.equal(r.openCalls, 3);
    assert.deepEqual(r.countCalls, [0, 1, 2, 3]);
    assert.deepEqual(r.countAfterStop, [0, 1, 2, 3, 2, 3]);
    assert.deepEqual(r.array.values, ['milk', 'eggs']);
    assert.deepEqual(r.array.columns, ['title']);
    assert.deepEqual(r.afterTx, [{ id: 3, title: 'eggs' }]);
    assert.equal(r.txChanges.length, 1, JSON.stringify(r.txChanges));
    assert.deepEqual(r.txChanges[0], {
      tables: [{ table: 'todo', inserted: 0, updated: 1, deleted: 1 }, { table: 'other', inserted: 2, updated: 0, deleted: 0 }],
      commits: 1,
      schema: false,
      origin: 'local',
    });
    assert.equal(r.openAfterStop, 4);
    assert.equal(r.arrayAfterStop, 4);
    assert.equal(r.rolledBack.ok, false);
    // The jam insert, then other's: the rolled-back transaction changed nothing.
    assert.deepEqual(r.lastChanges.map((c) => [c.tables[0].table, c.tables[0].inserted, c.origin]), [['todo', 1, 'local'], ['other', 1, 'local']]);
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
  }
});

test('a watched query\'s errors reach onError, or the page, and a schema change re-runs it', async () => {
  const b = await launch();
  try {
    await helpers(b.page);
    const r = await b.page.evaluate(async () => {
      const out = {};
      const db = await cairn.open('watch-errors');
      const errors = [];
      const onError = (e) => errors.push([e.name, e.code]);
      db.watch('SELECT * FROM nowhere', [], log('none'), { onError });
      db.watch("INSERT INTO t VALUES ('x')", [], log('write'), { onError });
      db.watch('SELECT 1; SELECT 2', [], log('two'), { onError });
      await until('three errors', () => errors.length === 3);
      out.errors = errors.slice();
      out.notAFunction = await attempt(() => db.watch('SELECT 1', [], 'no'));
      // A table dropped under a watcher: an error; made again: results again.
      await db.exec('CREATE TABLE t (v TEXT)');
      db.watch('SELECT v FROM t', [], log('t'), { onError });
      await until('t', () => seen.t.length === 1);
      await db.exec('DROP TABLE t');
      await until('the drop', () => errors.length === 4);
      out.dropped = errors[3];
      await db.exec("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('back')");
      await until('t again', () => seen.t.length === 2);
      out.again = seen.t[1];
      // No onError: the page's uncaught error.
      db.watch('SELECT * FROM nowhere', [], log('uncaught'));
      await new Promise((res) => setTimeout(res, 300));
      await db.close();
      return out;
    });
    assert.deepEqual(r.errors.map((e) => e[0]), ['CairnError', 'CairnError', 'CairnError']);
    assert.deepEqual(r.errors.map((e) => e[1]).sort(), ['INVALID', 'INVALID', 'UNKNOWN_TABLE'].sort(), JSON.stringify(r.errors));
    assert.equal(r.notAFunction.code, 'INVALID_INPUT');
    assert.equal(r.dropped[1], 'UNKNOWN_TABLE');
    assert.deepEqual(r.again, [{ v: 'back' }]);
    assert.equal(b.errors.length, 1, JSON.stringify(b.errors));
    assert.match(b.errors[0], /nowhere/);
  } finally {
    await b.close();
  }
});

test('a second tab\'s watchers and listeners see the owner\'s commits, and the owner sees theirs', async () => {
  const b = await launch();
  try {
    const a = b.page;
    const second = await b.context.newPage();
    await second.goto(`${b.server.url}/tests/browser/page.html`);
    await second.waitForFunction(() => window.cairnReady === true);
    for (const p of [a, second]) await helpers(p);
    const setUp = async () => {
      window.db = await cairn.open('watch-tabs');
      if (db.isOwner) await db.exec('CREATE TABLE note (id INTEGER PRIMARY KEY, who TEXT)');
      db.onChange((c) => changes.push(c));
      db.watch('SELECT who FROM note ORDER BY id', [], log('notes'));
      await until('the first result', () => seen.notes.length === 1);
      return db.isOwner;
    };
    assert.equal(await a.evaluate(setUp), true);
    assert.equal(await second.evaluate(setUp), false);
    await a.evaluate(() => db.run("INSERT INTO note (who) VALUES ('a')"));
    const inB = await second.evaluate(async () => {
      await until('a\'s row', () => seen.notes.at(-1).length === 1);
      await until('a\'s change', () => changes.length === 1);
      return { notes: seen.notes, changes };
    });
    assert.deepEqual(inB.notes, [[], [{ who: 'a' }]]);
    assert.deepEqual(inB.changes, [{ tables: [{ table: 'note', inserted: 1, updated: 0, deleted: 0 }], commits: 1, schema: false, origin: 'tab' }]);
    await second.evaluate(() => db.run("INSERT INTO note (who) VALUES ('b')"));
    const inA = await a.evaluate(async () => {
      await until('b\'s row', () => seen.notes.at(-1).length === 2);
      await until('b\'s change', () => changes.length === 2);
      return { notes: seen.notes, origins: changes.map((c) => c.origin) };
    });
    assert.deepEqual(inA.notes, [[], [{ who: 'a' }], [{ who: 'a' }, { who: 'b' }]]);
    assert.deepEqual(inA.origins, ['local', 'tab']);
    const inB2 = await second.evaluate(async () => {
      await until('b\'s own row', () => seen.notes.at(-1).length === 2);
      await until('b\'s own change', () => changes.length === 2);
      return { calls: seen.notes.length, origins: changes.map((c) => c.origin) };
    });
    assert.deepEqual(inB2, { calls: 3, origins: ['tab', 'local'] });
    // The owner closes: the second tab takes over and asks its own Worker again.
    await a.close();
    const after = await second.evaluate(async () => {
      await until('the take-over', async () => db.isOwner);
      await db.run("INSERT INTO note (who) VALUES ('c')");
      await until('c', () => seen.notes.at(-1).length === 3);
      return { owner: db.isOwner, last: seen.notes.at(-1), origin: changes.at(-1).origin };
    });
    assert.deepEqual(after, { owner: true, last: [{ who: 'a' }, { who: 'b' }, { who: 'c' }], origin: 'local' });
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
  }
});

test('a sync apply wakes a watcher, and onChange says it came from sync', async () => {
  const b = await launch();
  try {
    await helpers(b.page);
    const r = await b.page.evaluate(async () => {
      const ddl = 'CREATE TABLE item (id TEXT PRIMARY KEY, name TEXT NOT NULL) REPLICATED';
      const a = await cairn.open('watch-sync-a', { sync: true });
      const c = await cairn.open('watch-sync-c', { sync: true });
      await a.exec(ddl);
      await c.exec(ddl);
      await c.sync.setOwner(await a.sync.id());
      c.onChange((x) => changes.push(x));
      c.watch('SELECT id, name FROM item ORDER BY id', [], log('items'));
      await until('the first result', () => seen.items.length === 1);
      const ch = new MessageChannel();
      await a.sync.connect(ch.port1);
      await c.sync.connect(ch.port2);
      await a.run("INSERT INTO item VALUES ('i1', 'lamp'), ('i2', 'desk')");
      await until('the synced rows', () => seen.items.at(-1).length === 2);
      await until('the change', () => changes.some((x) => x.tables.some((t) => t.table === 'item')));
      const out = { items: seen.items, changes: changes.filter((x) => x.tables.some((t) => t.table === 'item')) };
      await a.close();
      await c.close();
      return out;
    });
    assert.deepEqual(r.items, [[], [{ id: 'i1', name: 'lamp' }, { id: 'i2', name: 'desk' }]]);
    assert.equal(r.changes[0].origin, 'sync');
    assert.deepEqual(r.changes[0].tables.find((t) => t.table === 'item'), { table: 'item', inserted: 2, updated: 0, deleted: 0 });
  } finally {
    await b.close();
  }
});

test('useQuery (cairn-db/react) re-renders a React list on each change', async () => {
  const esbuild = await import('esbuild');
  await esbuild.build({
    entryPoints: [join(root, 'tests/react/app.js')],
    outfile: join(root, 'dist/react-test/app.js'),
    bundle: true,
    format: 'esm',
    nodePaths: [join(root, 'tests/react/node_modules')],
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'warning',
  });
  const b = await launch();
  try {
    const list = () => b.page.evaluate(() => [...document.querySelectorAll('#todos li')].map((li) => li.textContent));
    await b.page.evaluate(async () => {
      window.app = await import('/dist/react-test/app.js');
      window.db = await cairn.open('watch-react');
      await db.exec("CREATE TABLE todo (id INTEGER PRIMARY KEY, title TEXT, done INTEGER DEFAULT 0); INSERT INTO todo (title) VALUES ('first')");
      const el = document.createElement('div');
      document.body.append(el);
      window.root = app.mount(db, el);
    });
    await b.page.waitForFunction(() => document.querySelectorAll('#todos li').length === 1);
    assert.deepEqual(await list(), ['first']);
    await b.page.evaluate(() => db.run("INSERT INTO todo (title) VALUES ('second')"));
    await b.page.waitForFunction(() => document.querySelectorAll('#todos li').length === 2);
    assert.deepEqual(await list(), ['first', 'second']);
    await b.page.evaluate(() => db.run("UPDATE todo SET done = 1 WHERE title = 'first'"));
    await b.page.waitForFunction(() => document.querySelectorAll('#todos li').length === 1);
    assert.deepEqual(await list(), ['second']);
    // Unmounted: the watcher stops with the effect's cleanup; later writes render nothing.
    const rendersAfter = await b.page.evaluate(async () => {
      root.unmount();
      const n = app.renders.count;
      await db.run("INSERT INTO todo (title) VALUES ('third')");
      await db.query('SELECT 1');
      await new Promise((res) => setTimeout(res, 200));
      return [n, app.renders.count];
    });
    assert.equal(rendersAfter[0], rendersAfter[1]);
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
  }
});

test('after an engine restart the watchers are asked of the new Worker and go on', async () => {
  // The panic on purpose is in the test build only.
  const b = await launch({ build: 'test' });
  try {
    await helpers(b.page);
    const r = await b.page.evaluate(async () => {
      const db = await cairn.open('watch-restart');
      await db.exec('CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1)');
      db.onChange((c) => changes.push(c));
      db.watch('SELECT a FROM t ORDER BY a', [], log('t'));
      await until('the first result', () => seen.t.length === 1);
      const panic = await attempt(() => db._send('debugPanic', 0, ['boom']));
      await until('the restarted Worker', async () => (await attempt(() => db.query('SELECT 1'))).ok);
      await db.run('INSERT INTO t VALUES (2)');
      await until('the insert after the restart', () => seen.t.length === 2);
      await until('its change', () => changes.length === 1);
      return { panic: panic.code, seen: seen.t, changes };
    });
    assert.equal(r.panic, 'INTERNAL');
    // The same result from the new Worker was not delivered again.
    assert.deepEqual(r.seen, [[{ a: 1 }], [{ a: 1 }, { a: 2 }]]);
    assert.deepEqual(r.changes.map((c) => [c.tables[0].table, c.tables[0].inserted, c.origin]), [['t', 1, 'local']]);
  } finally {
    await b.close();
  }
});
