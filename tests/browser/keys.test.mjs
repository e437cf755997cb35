// The secret key stays on the device (docs/sync.md 10b): in Chromium over real OPFS, a synced
// database's export and its OPFS file are searched for its secret key, which is in the key file
// cairn-keys/<name> alone; the export imported under another name signs as a new author until
// importKey moves the identity; destroy takes the key file with the database, and import does not
// take a key file left under its name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

test('an export holds no secret key, and an imported copy signs as a new author until importKey', async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const ddl = `CREATE TABLE todo (id TEXT PRIMARY KEY, title TEXT NOT NULL,
                   likes INTEGER DEFAULT 0) REPLICATED (COUNTER likes)`;
      const hex = (u8) => Array.from(u8, (x) => x.toString(16).padStart(2, '0')).join('');
      // Whether `bytes` holds the 32 secret bytes of `key` (an exported key: "cairn-key", version,
      // secret, checksum) or the exported key whole.
      const holds = (bytes, key) => {
        const h = hex(bytes);
        return { secret: h.includes(hex(key.subarray(10, 42))), exported: h.includes(hex(key)) };
      };
      const root = await navigator.storage.getDirectory();
      const opfsFile = async (dir, name) => {
        try {
          const d = await root.getDirectoryHandle(dir);
          const f = await (await d.getFileHandle(name)).getFile();
          return new Uint8Array(await f.arrayBuffer());
        } catch (e) {
          return e.name;
        }
      };
      const out = {};
      const a = await cairn.open('keys-a', { sync: true });
      await a.exec(ddl);
      for (let i = 0; i < 10; i++) await a.run('INSERT INTO todo (id, title) VALUES (?, ?)', [`a${i}`, `row ${i}`]);
      await a.run("UPDATE todo SET likes = likes + 3 WHERE id = 'a1'");
      const aId = await a.sync.id();
      const key = await a.sync.exportKey();
      out.keyLength = key.length;
      const exported = await a.export();
      out.exportA = holds(exported, key);
      await a.close();
      // In OPFS: the database's file holds no secret, the key file holds the key.
      out.fileA = holds(await opfsFile('cairn', 'keys-a'), key);
      const keyFile = await opfsFile('cairn-keys', 'keys-a');
      out.keyFileA = hex(keyFile) === hex(key);
      out.control = holds(keyFile, key); // the search finds the key where it is

      // The export imported under another name: a database of its own, with the same rows, signing
      // as a new author; its writes go to a's scopes, which do not list it.
      await cairn.import('keys-b', exported);
      const c = await cairn.open('keys-b', { sync: true });
      const cId = await c.sync.id();
      out.copyId = { differs: cId !== aId, length: cId.length };
      out.copyRows = (await c.get('SELECT count(*) AS n, sum(likes) AS l FROM todo'));
      const refused = await attempt(() => c.run("INSERT INTO todo (id, title) VALUES ('c1', 'from the copy')"));
      out.copyWrite = { ...refused, namesBoth: String(refused.message).includes(cId) && String(refused.message).includes(aId) };
      out.exportCopy = holds(await c.export(), key);
      const copyKey = await c.sync.exportKey();
      out.exportCopyOwn = holds(await c.export(), copyKey);
      // importKey moves a's identity here: the same author, and still no secret in the export.
      await c.sync.importKey(key);
      out.afterImport = { same: (await c.sync.id()) === aId };
      await c.run("INSERT INTO todo (id, title) VALUES ('c1', 'from the copy')");
      out.exportAfterImport = holds(await c.export(), key);
      await c.close();
      out.fileAfterImport = holds(await opfsFile('cairn', 'keys-b'), key);
      const c2 = await cairn.open('keys-b', { sync: true });
      out.reopened = { same: (await c2.sync.id()) === aId, verify: await c2.sync.verify() };
      await c2.close();

      // destroy takes the key file with the database.
      await cairn.destroy('keys-b');
      out.afterDestroy = [await opfsFile('cairn', 'keys-b'), await opfsFile('cairn-keys', 'keys-b')];

      // A key file left under a name (a's key, written there by hand) is not taken by a database
      // imported under that name: the import removes it.
      const keysDir = await root.getDirectoryHandle('cairn-keys', { create: true });
      const w = await (await keysDir.getFileHandle('keys-c', { create: true })).createWritable();
      await w.write(key);
      await w.close();
      await cairn.import('keys-c', exported);
      const d = await cairn.open('keys-c', { sync: true });
      out.leftover = { differs: (await d.sync.id()) !== aId };
      await d.close();
      // And a database opened again where it was signs as before.
      const a2 = await cairn.open('keys-a', { sync: true });
      out.aAgain = (await a2.sync.id()) === aId;
      await a2.close();
      return out;
    });
    const none = { secret: false, exported: false };
    assert.equal(r.keyLength, 46);
    assert.deepEqual(r.exportA, none, 'the export of a fresh database');
    assert.deepEqual(r.fileA, none, 'the database file in OPFS');
    assert.equal(r.keyFileA, true, 'the key file holds the key');
    assert.deepEqual(r.control, { secret: true, exported: true });
    assert.deepEqual(r.copyId, { differs: true, length: 64 });
    assert.deepEqual(r.copyRows, { n: 10, l: 3 });
    assert.equal(r.copyWrite.ok, false);
    assert.equal(r.copyWrite.code, 'SYNC_REFUSED', r.copyWrite.message);
    assert.match(r.copyWrite.message, /UNAUTHORIZED.*authorize.*setOwner.*importKey/s);
    assert.equal(r.copyWrite.namesBoth, true, r.copyWrite.message);
    assert.deepEqual(r.exportCopy, none, 'the copy');
    assert.deepEqual(r.exportCopyOwn, none, "the copy's own key");
    assert.deepEqual(r.afterImport, { same: true });
    assert.deepEqual(r.exportAfterImport, none, 'after importKey');
    assert.deepEqual(r.fileAfterImport, none, 'the file after importKey');
    assert.deepEqual(r.reopened, { same: true, verify: [] });
    assert.deepEqual(r.afterDestroy, ['NotFoundError', 'NotFoundError']);
    assert.deepEqual(r.leftover, { differs: true });
    assert.equal(r.aAgain, true);
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
  }
});

test('a file of the previous layout, key inside, is imported and its key moved out of it', async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const hex = (u8) => Array.from(u8, (x) => x.toString(16).padStart(2, '0')).join('');
      const holds = (bytes, key) => {
        const h = hex(bytes);
        return { secret: h.includes(hex(key.subarray(10, 42))), exported: h.includes(hex(key)) };
      };
      const fetched = async (name) => new Uint8Array(await (await fetch(`fixtures/${name}`)).arrayBuffer());
      // Written by the previous version (sync layout 5): ten inserts sealed, an update pending,
      // the secret key in the file.
      const bytes = await fetched('layout5.cairn');
      const key = await fetched('layout5.key');
      const out = { before: holds(bytes, key) };
      await cairn.import('old', bytes);
      const d = await cairn.open('old', { sync: true });
      out.exported = hex(await d.sync.exportKey()) === hex(key);
      out.rows = await d.get('SELECT count(*) AS n, sum(likes) AS l FROM todo');
      out.pending = await d.sync.pending();
      out.verify = await d.sync.verify();
      out.after = holds(await d.export(), key);
      await d.close();
      const root = await navigator.storage.getDirectory();
      const read = async (dir, name) =>
        new Uint8Array(await (await (await (await root.getDirectoryHandle(dir)).getFileHandle(name)).getFile()).arrayBuffer());
      out.file = holds(await read('cairn', 'old'), key);
      out.keyFile = hex(await read('cairn-keys', 'old')) === hex(key);
      return out;
    });
    const none = { secret: false, exported: false };
    assert.deepEqual(r.before, { secret: true, exported: true }, 'the fixture keeps its key inside');
    assert.equal(r.exported, true, 'the same author');
    assert.deepEqual(r.rows, { n: 10, l: 3 });
    assert.equal(r.pending, 1);
    assert.deepEqual(r.verify, []);
    assert.deepEqual(r.after, none, 'the export after the migration');
    assert.deepEqual(r.file, none, 'the OPFS file after the migration');
    assert.equal(r.keyFile, true);
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
  }
});
