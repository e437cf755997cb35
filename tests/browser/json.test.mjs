// JSON in a real Worker over real OPFS: documents stored, queried through the arrows, an index
// on a JSON expression used and kept through a reopen, json_each joined to its table, and
// malformed JSON refused with the code JSON.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

test('JSON documents, an index on a JSON field, json_each, errors', async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const out = {};
      let db = await cairn.open('json');
      await db.exec(`CREATE TABLE doc (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
                     CREATE INDEX doc_user ON doc (body ->> 'user');`);
      await db.transaction(async (tx) => {
        for (let i = 0; i < 200; i++) {
          await tx.run("INSERT INTO doc (body) VALUES (json_object('user', ?, 'n', ?, 'tags', json_array('a', ?)))", [`u${i % 10}`, i / 4, `t${i % 3}`]);
        }
      });
      out.plan = (await db.query("EXPLAIN SELECT id FROM doc WHERE body ->> 'user' = ?", ['u3'])).map((x) => x.plan);
      out.first = await db.get("SELECT body, body -> 'tags' AS tags, body ->> '$.n' AS n FROM doc WHERE id = 3");
      await db.close();
      db = await cairn.open('json');
      out.count = (await db.get("SELECT count(*) AS n FROM doc WHERE body ->> 'user' = 'u3'")).n;
      out.tags = await db.query("SELECT j.value AS tag, count(*) AS n FROM doc, json_each(doc.body, '$.tags') j GROUP BY j.value ORDER BY j.value");
      out.grouped = (await db.get("SELECT json_group_array(id) AS ids FROM doc WHERE id <= 3")).ids;
      out.check = await db.check();
      out.bad = await attempt(() => db.query("SELECT json_extract('{\"a\":', '$.a')"));
      out.path = await attempt(() => db.query("SELECT json_extract('{}', 'a')"));
      await db.close();
      return out;
    });
    assert.deepEqual(r.plan, ["SEARCH doc USING INDEX doc_user ((body ->> 'user')=?)"]);
    assert.deepEqual(r.first, { body: '{"user":"u2","n":0.5,"tags":["a","t2"]}', tags: '["a","t2"]', n: 0.5 });
    assert.equal(r.count, 20);
    assert.deepEqual(r.tags, [{ tag: 'a', n: 200 }, { tag: 't0', n: 67 }, { tag: 't1', n: 67 }, { tag: 't2', n: 66 }]);
    assert.equal(r.grouped, '[1,2,3]');
    assert.deepEqual(r.check, []);
    assert.deepEqual([r.bad.code, r.bad.message], ['JSON', 'malformed JSON']);
    assert.deepEqual([r.path.code, r.path.message], ['JSON', "bad JSON path: 'a'"]);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});
