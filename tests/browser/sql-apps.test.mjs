// What apps write beside JSON and window functions, run in the Worker (from cairn-rest.wasm,
// which the first such statement waits for): generated columns, dates and times, foreign keys
// with a cascade, CHECK, SAVEPOINT, each refusal with its code. The results are SQLite's
// (crates/sql/testscripts/diff/91_dates.sql, 95_foreign_keys.sql, 99_generated.sql).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

test('generated columns, dates, foreign keys, CHECK and savepoints in the Worker', async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const db = await cairn.open('sql-apps');
      const code = async (sql) => {
        try {
          await db.run(sql);
          return null;
        } catch (e) {
          return [e.code, e.message];
        }
      };
      const out = {};
      await db.exec(`CREATE TABLE item (id INTEGER PRIMARY KEY, price REAL NOT NULL, qty INTEGER NOT NULL,
        total REAL AS (price * qty), label TEXT GENERATED ALWAYS AS (upper(name) || ':' || qty) STORED,
        name TEXT, day TEXT AS (date(at, 'start of month', '+1 months', '-1 days')), at TEXT)`);
      await db.exec('CREATE INDEX item_total ON item (total)');
      await db.run('INSERT INTO item (price, qty, name, at) VALUES (2.5, 4, ?, ?), (10, 1, ?, ?)', ['pen', '2024-02-10 08:00', 'ink', '2023-12-31']);
      await db.run('UPDATE item SET qty = qty + 1 WHERE id = 1');
      out.items = await db.query('SELECT id, total, label, day FROM item ORDER BY id');
      out.plan = (await db.query('EXPLAIN SELECT id FROM item WHERE total = 12.5')).map((x) => Object.values(x)[0]);
      out.byTotal = await db.query('SELECT id FROM item WHERE total = 12.5');
      out.xinfo = (await db.query("SELECT name, hidden FROM pragma_table_xinfo('item') ORDER BY cid")).map((x) => [x.name, x.hidden]);
      out.insertGenerated = await code('INSERT INTO item (id, price, qty, total) VALUES (9, 1, 1, 1)');
      out.updateGenerated = await code('UPDATE item SET label = 1');
      out.storedAdd = await code('ALTER TABLE item ADD COLUMN twice REAL AS (total * 2) STORED');
      out.dates = await db.query(
        `SELECT strftime('%Y-%m-%d %H:%M', '2024-01-31 10:00', '+1 months') AS a, julianday('2000-01-01') AS j,
                unixepoch('2024-01-01') AS u, date('2024-03-05', 'weekday 0') AS w, date('bad') AS bad,
                time(1700000000, 'unixepoch') AS t`,
      );
      await db.exec('PRAGMA foreign_keys = ON');
      await db.exec(`CREATE TABLE author (id INTEGER PRIMARY KEY, name TEXT NOT NULL CHECK (length(name) > 0));
        CREATE TABLE book (id INTEGER PRIMARY KEY, author_id INTEGER REFERENCES author (id) ON DELETE CASCADE, title TEXT)`);
      await db.run("INSERT INTO author VALUES (1, 'ann'), (2, 'bob')");
      await db.run("INSERT INTO book VALUES (10, 1, 'a1'), (11, 1, 'a2'), (12, 2, 'b1')");
      out.orphan = await code("INSERT INTO book VALUES (13, 9, 'x')");
      out.check = await code("INSERT INTO author VALUES (3, '')");
      out.deleted = (await db.run('DELETE FROM author WHERE id = 1')).changes;
      out.books = (await db.query('SELECT id FROM book ORDER BY id')).map((x) => x.id);
      await db.exec("BEGIN; SAVEPOINT s; INSERT INTO author VALUES (5, 'eve'); ROLLBACK TO s; INSERT INTO author VALUES (6, 'fay'); RELEASE s; COMMIT");
      out.authors = (await db.query('SELECT id FROM author ORDER BY id')).map((x) => x.id);
      await db.close();
      return out;
    });
    assert.deepEqual(r.items, [
      { id: 1, total: 12.5, label: 'PEN:5', day: '2024-02-29' },
      { id: 2, total: 10, label: 'INK:1', day: '2023-12-31' },
    ]);
    assert.ok(r.plan.some((l) => l.includes('item_total')), r.plan.join('\n'));
    assert.deepEqual(r.byTotal, [{ id: 1 }]);
    assert.deepEqual(r.xinfo, [['id', 0], ['price', 0], ['qty', 0], ['total', 2], ['label', 3], ['name', 0], ['day', 2], ['at', 0]]);
    assert.deepEqual(r.insertGenerated, ['INVALID', 'cannot INSERT into generated column "total"']);
    assert.deepEqual(r.updateGenerated, ['INVALID', 'cannot UPDATE generated column "label"']);
    assert.deepEqual(r.storedAdd, ['INVALID', 'cannot add a STORED column']);
    assert.deepEqual(r.dates, [{ a: '2024-03-02 10:00', j: 2451544.5, u: 1704067200, w: '2024-03-10', bad: null, t: '22:13:20' }]);
    assert.deepEqual(r.orphan, ['CONSTRAINT_FOREIGN_KEY', 'FOREIGN KEY constraint failed']);
    assert.equal(r.check[0], 'CONSTRAINT_CHECK');
    assert.equal(r.deleted, 1);
    assert.deepEqual(r.books, [12]);
    assert.deepEqual(r.authors, [2, 6]);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});
