// open(name, { migrations }): the missing steps run in order, each in a transaction that sets
// PRAGMA user_version; a failing one is rolled back and open() rejects with MIGRATION naming it;
// two tabs opening at once run each step once, the second waiting for the first.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

let b;
before(async () => {
  b = await launch();
});
after(async () => {
  await b?.close();
});

test('the missing steps run in order, once, and set user_version', async () => {
  const r = await b.page.evaluate(async () => {
    const steps = [
      'CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT); CREATE TABLE ran (step INTEGER)',
      "INSERT INTO ran VALUES (2); ALTER TABLE note ADD COLUMN tag TEXT DEFAULT 'none'",
    ];
    const out = {};
    let db = await cairn.open('migrated', { migrations: steps });
    out.first = [(await db.get('PRAGMA user_version')).user_version, await db.query('SELECT step FROM ran')];
    await db.run("INSERT INTO note (body) VALUES ('hello')");
    await db.close();
    // Reopened with one more step, a function on the transaction: only it runs.
    db = await cairn.open('migrated', {
      migrations: [...steps, {
        version: 5,
        up: async (tx) => {
          await tx.run('INSERT INTO ran VALUES (?)', [5]);
          await tx.run("UPDATE note SET tag = 'old'");
        },
      }],
    });
    out.second = [(await db.get('PRAGMA user_version')).user_version, await db.query('SELECT step FROM ran ORDER BY step'),
      await db.query('SELECT body, tag FROM note')];
    await db.close();
    // A database ahead of the list (opened by an older version of the app) is left as it is.
    db = await cairn.open('migrated', { migrations: steps });
    out.ahead = (await db.get('PRAGMA user_version')).user_version;
    await db.close();
    const mem = await cairn.open(':memory:', { migrations: steps });
    out.memory = (await mem.get('PRAGMA user_version')).user_version;
    await mem.close();
    return out;
  });
  assert.deepEqual(r.first, [2, [{ step: 2 }]]);
  assert.deepEqual(r.second, [5, [{ step: 2 }, { step: 5 }], [{ body: 'hello', tag: 'old' }]]);
  assert.equal(r.ahead, 5);
  assert.equal(r.memory, 2);
});

test('a failing step is rolled back, open rejects with MIGRATION naming it, the database stays at the last good version', async () => {
  const r = await b.page.evaluate(async () => {
    const base = ['CREATE TABLE a (x INTEGER)'];
    const failSql = await attempt(() => cairn.open('failing', {
      migrations: [...base, 'CREATE TABLE b (y INTEGER); INSERT INTO b VALUES (1); INSERT INTO nowhere VALUES (1)'],
    }));
    const failFn = await attempt(() => cairn.open('failing', {
      migrations: [...base, { version: 7, up: async (tx) => { await tx.exec('CREATE TABLE c (z INTEGER)'); throw new Error('step 7 gave up'); } }],
    }));
    let caught = null;
    try {
      await cairn.open('failing', { migrations: [...base, { version: 7, up: () => Promise.reject(new TypeError('nope')) }] });
    } catch (e) {
      caught = { version: e.version, cause: e.cause?.name, isCairn: e instanceof cairn.CairnError };
    }
    // The failed open closed the database: it opens again at once, at version 1, without b or c.
    const db = await cairn.open('failing');
    const state = {
      version: (await db.get('PRAGMA user_version')).user_version,
      tables: (await db.query("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")).map((t) => t.name),
    };
    await db.close();
    const notArray = await attempt(() => cairn.open('bad', { migrations: 'CREATE TABLE t (x)' }));
    const notRising = await attempt(() => cairn.open('bad', { migrations: [{ version: 2, up: 'SELECT 1' }, { version: 2, up: 'SELECT 2' }] }));
    const noUp = await attempt(() => cairn.open('bad', { migrations: [{ version: 1 }] }));
    return { failSql, failFn, caught, state, notArray, notRising, noUp };
  });
  assert.equal(r.failSql.code, 'MIGRATION');
  assert.match(r.failSql.message, /^migration 2 failed, the database stays at version 1: .*nowhere/);
  assert.equal(r.failFn.code, 'MIGRATION');
  assert.match(r.failFn.message, /^migration 7 failed, the database stays at version 1: step 7 gave up$/);
  assert.deepEqual(r.caught, { version: 7, cause: 'TypeError', isCairn: true });
  assert.deepEqual(r.state, { version: 1, tables: ['a'] });
  for (const bad of [r.notArray, r.notRising, r.noUp]) assert.equal(bad.code, 'INVALID_INPUT', JSON.stringify(bad));
  assert.match(r.notRising.message, /version at index 1 must be an integer above 2/);
});

test('two tabs opening at once: one runs each step, the other waits for it and sees the result', async () => {
  const second = await b.context.newPage();
  try {
    await second.goto(`${b.server.url}/tests/browser/page.html`);
    await second.waitForFunction(() => window.cairnReady === true);
    // Each tab's steps log who ran them; a slow step keeps the other tab waiting on it.
    const openIn = (page, who) => page.evaluate(async (who) => {
      const migrations = [
        'CREATE TABLE ran (step INTEGER, who TEXT)',
        { version: 2, up: async (tx) => {
          await new Promise((r) => setTimeout(r, 300));
          await tx.run('INSERT INTO ran VALUES (2, ?)', [who]);
        } },
        { version: 3, up: (tx) => tx.run('INSERT INTO ran VALUES (3, ?)', [who]) },
      ];
      window.db = await cairn.open('two-tabs', { migrations });
      return { version: (await db.get('PRAGMA user_version')).user_version, ran: await db.query('SELECT step, who FROM ran ORDER BY step') };
    }, who);
    const [x, y] = await Promise.all([openIn(b.page, 'first'), openIn(second, 'second')]);
    assert.equal(x.version, 3);
    assert.equal(y.version, 3);
    assert.deepEqual(x.ran, y.ran);
    assert.deepEqual(x.ran.map((r) => r.step), [2, 3]);
    assert.equal(new Set(x.ran.map((r) => r.who)).size, 1, 'one tab ran every step');
    await second.evaluate(() => db.close());
    await b.page.evaluate(() => db.close());
  } finally {
    await second.close();
  }
  assert.deepEqual(b.errors, []);
});
