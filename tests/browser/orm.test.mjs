// Kysely and Drizzle over cairn in Chromium, with the libraries themselves (the versions the
// repository's package.json pins): each one's migrator creates the schema, then typed inserts,
// selects with joins, updates, deletes, a transaction that throws and rolls back, and the tables
// listed by introspection. The app code (tests/browser/orm/) is bundled with esbuild, as an app
// would bundle it, importing `cairn-db/kysely` and `cairn-db/drizzle` through the package's
// exports (dist/); cairn itself is the page's /dist/cairn.js.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import esbuild from 'esbuild';
import { launch } from './harness.mjs';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const out = join(repo, 'build', 'orm-test');
let b;

before(async () => {
  mkdirSync(out, { recursive: true });
  await esbuild.build({
    entryPoints: ['kysely-app.js', 'drizzle-app.js'].map((f) => join(repo, 'tests/browser/orm', f)),
    bundle: true, format: 'esm', target: 'es2022', outdir: out, logLevel: 'error',
  });
  b = await launch();
});
after(async () => {
  await b?.close();
});

const runApp = (file) => b.page.evaluate(async (url) => (await import(url)).run(window.cairn), `/build/orm-test/${file}`);

test('Kysely: migrator, typed queries, joins, a rolled-back transaction, introspection', async () => {
  const r = await runApp('kysely-app.js');
  assert.deepEqual(r.migrated, ['001_people:Success', '002_pets:Success']);
  assert.equal(r.migrateError, null);
  assert.equal(r.again, 0, 'a second migrateToLatest has nothing to run');
  assert.equal(r.adaId, 1);
  assert.deepEqual(r.alan, { id: 2, name: 'Alan' });
  assert.equal(r.petsInserted, 3);
  assert.deepEqual(r.joined, [
    { owner: 'Alan', pet: 'Bombe', species: 'dog' },
    { owner: 'Alan', pet: 'Enigma', species: 'dog' },
    // Kysely writes NULL for a key a row of a multi-row insert lacks (SQLite's VALUES has no DEFAULT).
    { owner: 'Ada', pet: 'Lovelace', species: null },
  ]);
  assert.deepEqual(r.counts, [{ name: 'Ada', pets: 1 }, { name: 'Alan', pets: 2 }]);
  assert.equal(r.updated, 1);
  assert.equal(r.deleted, 1);
  assert.equal(r.seenInside, 1);
  assert.equal(r.thrown, 'changed my mind');
  assert.equal(r.constraint, 'CONSTRAINT_UNIQUE');
  assert.deepEqual([r.outside, r.undone], [0, 'undo'], 'a query outside the transaction ran inside it');
  assert.deepEqual(r.people, [{ name: 'Ada', born: 1815 }, { name: 'Alan', born: 1912 }]);
  assert.deepEqual(r.afterCommit, ['Ada', 'Alan', 'Barbara']);
  assert.deepEqual(r.tables, [
    // Types as written, as SQLite keeps them (Kysely writes them in lower case).
    { name: 'person', columns: ['id:integer:null:auto:', 'name:text:notnull::', 'born:integer:null::'] },
    { name: 'person_fts', columns: ['name::null::'] },
    { name: 'pet', columns: ['id:integer:null:auto:', 'owner_id:integer:notnull::', 'name:text:notnull::', 'species:text:null::default'] },
  ]);
  assert.deepEqual(r.raw, [{ n: 3 }]);
});

test('Drizzle: bundled migrations, typed queries, joins, a rolled-back transaction, introspection', async () => {
  const r = await runApp('drizzle-app.js');
  assert.equal(r.migrations, 2);
  assert.deepEqual(r.le, { id: 1, name: 'Ursula K. Le Guin' });
  assert.deepEqual(r.joined, [
    { author: 'Terry Pratchett', title: 'Small Gods', done: false },
    { author: 'Ursula K. Le Guin', title: 'The Dispossessed', done: true },
    { author: 'Ursula K. Le Guin', title: 'The Lathe of Heaven', done: false },
  ]);
  assert.deepEqual(r.perAuthor, [{ name: 'Terry Pratchett', n: 1 }, { name: 'Ursula K. Le Guin', n: 2 }]);
  assert.deepEqual(r.first, { id: 2, name: 'Terry Pratchett' });
  assert.equal(r.duplicate, 'CONSTRAINT_UNIQUE');
  assert.equal(r.updated, 1);
  assert.deepEqual(r.books, [{ title: 'The Dispossessed', done: true }, { title: 'Small Gods', done: true }]);
  assert.equal(r.seenInside, 0);
  assert.equal(r.thrown, 'roll it back');
  assert.deepEqual([r.outside, r.undone], [0, 'undo'], 'a query outside the transaction ran inside it');
  assert.deepEqual(r.afterRollback, { authors: ['Ursula K. Le Guin', 'Terry Pratchett'], books: 2 });
  assert.deepEqual(r.afterNested, ['Ursula K. Le Guin', 'Terry Pratchett', 'Iain M. Banks']);
  assert.deepEqual(r.tables, ['__drizzle_migrations', 'authors', 'books']);
  assert.deepEqual(r.columns, [
    ['id', 'integer', 1, 1], ['author_id', 'integer', 1, 0], ['title', 'text', 1, 0], ['done', 'integer', 1, 0],
  ]);
  assert.deepEqual(b.errors, []);
});
