// Full-text search in a real Worker over real OPFS: an fts5 table with its own content and one
// over an external content table, filled, queried (words, phrases, prefixes, typos, ranking,
// highlight, a filter on the content table), kept through a reopen and checked; a bad query
// refused with SYNTAX.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

test('fts5 tables: create, fill, query, reopen, check', async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const out = {};
      let db = await cairn.open('fts');
      await db.exec(`CREATE TABLE notes (id INTEGER PRIMARY KEY, folder TEXT, title TEXT, body TEXT);
                     CREATE VIRTUAL TABLE notes_fts USING fts5(title, body, content='notes', content_rowid='id');
                     CREATE VIRTUAL TABLE words USING fts5(w);`);
      const words = ['search', 'local', 'first', 'crème', 'brûlée', 'worker', 'index', 'query', 'bread', 'sync'];
      await db.transaction(async (tx) => {
        for (let i = 1; i <= 300; i++) {
          const body = [0, 1, 2, 3, 4].map((k) => words[(i * (k + 3)) % words.length]).join(' ');
          await tx.run('INSERT INTO notes (id, folder, title, body) VALUES (?, ?, ?, ?)', [i, i % 2 ? 'home' : 'work', `note ${i}`, body]);
        }
      });
      await db.run("INSERT INTO words (w) VALUES ('the quick brown fox'), ('Crème Brûlée')");
      out.one = (await db.get("SELECT count(*) AS n FROM notes_fts WHERE notes_fts MATCH 'bread'")).n;
      out.top = await db.query("SELECT rowid FROM notes_fts WHERE notes_fts MATCH 'bread OR sync' ORDER BY rank LIMIT 3");
      out.phrase = (await db.get(`SELECT count(*) AS n FROM notes_fts WHERE notes_fts MATCH '"index query"'`)).n;
      out.prefix = (await db.get("SELECT count(*) AS n FROM notes_fts WHERE notes_fts MATCH 'wor*'")).n;
      out.filtered = (await db.get(`SELECT count(*) AS n FROM notes_fts JOIN notes ON notes.id = notes_fts.rowid
                                    WHERE notes_fts MATCH 'bread' AND notes.folder = 'home'`)).n;
      out.typo = await db.query("SELECT rowid FROM words WHERE words MATCH 'quik~1'");
      out.accents = await db.query("SELECT highlight(words, 0, '[', ']') AS h FROM words WHERE words MATCH 'creme'");
      await db.run("DELETE FROM notes WHERE id <= 100");
      out.afterDelete = (await db.get("SELECT count(*) AS n FROM notes_fts WHERE notes_fts MATCH 'bread'")).n;
      out.bad = await attempt(() => db.query(`SELECT * FROM words WHERE words MATCH '"open'`));
      await db.close();
      db = await cairn.open('fts');
      out.reopened = (await db.get("SELECT count(*) AS n FROM notes_fts WHERE notes_fts MATCH 'bread'")).n;
      out.words = await db.query('SELECT w FROM words ORDER BY rowid');
      out.check = await db.check();
      await db.close();
      return out;
    });
    assert.equal(r.one, 180);
    assert.equal(r.top.length, 3);
    assert.equal(r.phrase, 30);
    assert.equal(r.prefix, 150);
    assert.equal(r.filtered, 60);
    assert.deepEqual(r.typo, [{ rowid: 1 }]);
    assert.deepEqual(r.accents, [{ h: '[Crème] Brûlée' }]);
    assert.equal(r.afterDelete, 120);
    assert.equal(r.bad.code, 'SYNTAX');
    assert.equal(r.reopened, 120);
    assert.deepEqual(r.words, [{ w: 'the quick brown fox' }, { w: 'Crème Brûlée' }]);
    assert.deepEqual(r.check, []);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});
