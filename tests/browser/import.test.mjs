// Imports and exports in pieces with progress, imports that must leave the old database as it
// was, ':memory:' databases, and files moving between the browser and Node.js (cairn-db/node).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch } from './harness.mjs';
import { open as openInNode } from '../../dist/node.js';

async function withPage(fn) {
  const b = await launch();
  try {
    await fn(b.page);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
}

test('import and export go in pieces, reporting progress in order up to the total', () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const src = await cairn.open(':memory:');
      await src.exec('CREATE TABLE b (id INTEGER PRIMARY KEY, blob BLOB)');
      await src.transaction(async (tx) => {
        for (let i = 0; i < 48; i++) await tx.run('INSERT INTO b (blob) VALUES (?)', [new Uint8Array(65536).fill(i)]);
      });
      const exported = [];
      const bytes = await src.export({ onProgress: (p) => exported.push(p) });
      await src.close();
      // The import goes in pieces, each its own message to the Worker (a step each): the page
      // never clones the whole file in one message.
      const imported = [];
      await cairn.importDatabase('big', bytes, { onProgress: (p) => imported.push(p) });
      // The same file as a stream of 100 000-byte pieces, its length given.
      const streamed = [];
      let at = 0;
      const stream = new ReadableStream({
        pull(c) {
          if (at >= bytes.length) return c.close();
          c.enqueue(bytes.slice(at, at + 100000));
          at += 100000;
        },
      });
      await cairn.importDatabase('big2', stream, { total: bytes.length, onProgress: (p) => streamed.push(p) });
      // A File: read as a stream, its size the total.
      const fromFile = [];
      await cairn.importDatabase('big3', new File([bytes], 'backup.cairn'), { onProgress: (p) => fromFile.push(p) });
      const counts = [];
      for (const name of ['big', 'big2', 'big3']) {
        const db = await cairn.open(name, { create: false });
        counts.push((await db.get('SELECT count(*) AS n, sum(length(blob)) AS s FROM b')));
        await db.close();
      }
      return { size: bytes.length, exported, imported, streamed, fromFile, counts };
    });
    assert.ok(r.size > 3 << 20, `${r.size} bytes`);
    for (const steps of [r.exported, r.imported, r.streamed, r.fromFile]) {
      assert.ok(steps.length >= 3, `${steps.length} steps`);
      // In order, each piece at most 1 MiB (one message each).
      for (let i = 1; i < steps.length; i++) {
        const piece = steps[i].done - steps[i - 1].done;
        assert.ok(piece > 0 && piece <= 1 << 20, JSON.stringify(steps));
      }
      assert.deepEqual(steps.at(-1), { done: r.size, total: r.size });
    }
    assert.deepEqual(r.counts, Array(3).fill({ n: 48, s: 48 * 65536 }));
  }));

test('a corrupt, foreign or cut import leaves the old database as it was', () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const db = await cairn.open('keep');
      await db.exec("CREATE TABLE keep (v TEXT); INSERT INTO keep VALUES ('old')");
      const before = await db.export();
      await db.close();
      const other = await cairn.open(':memory:');
      await other.exec("CREATE TABLE keep (v TEXT); INSERT INTO keep VALUES ('new')");
      const good = await other.export();
      await other.close();
      const damaged = good.slice();
      for (let at = 8192 + 100; at < damaged.length; at += 4096) damaged[at] ^= 0xff;
      const sqlite = new TextEncoder().encode('SQLite format 3\0'.padEnd(4096, '\0'));
      const cutStream = new ReadableStream({
        start(c) {
          c.enqueue(good.slice(0, 4096));
        },
        pull(c) {
          c.error(new Error('connection reset'));
        },
      });
      const out = {
        exists: await attempt(() => cairn.importDatabase('keep', good)),
        damaged: await attempt(() => cairn.importDatabase('keep', damaged, { replace: true })),
        foreign: await attempt(() => cairn.importDatabase('keep', sqlite, { replace: true })),
        cut: await attempt(() => cairn.importDatabase('keep', cutStream, { replace: true })),
        memory: await attempt(() => cairn.importDatabase(':memory:', good)),
      };
      const kept = await cairn.open('keep', { create: false });
      out.rows = await kept.query('SELECT v FROM keep');
      out.same = String(await kept.export()) === String(before);
      out.busy = await attempt(() => cairn.importDatabase('keep', good, { replace: true }));
      await kept.close();
      await cairn.importDatabase('keep', good, { replace: true });
      const replaced = await cairn.open('keep', { create: false });
      out.replaced = await replaced.query('SELECT v FROM keep');
      await replaced.close();
      return out;
    });
    assert.equal(r.exists.code, 'ALREADY_EXISTS');
    assert.equal(r.damaged.code, 'CORRUPT', JSON.stringify(r.damaged));
    assert.equal(r.foreign.code, 'NOT_A_DATABASE');
    assert.equal(r.cut.code, 'IMPORT_INCOMPLETE');
    assert.match(r.cut.message, /connection reset/);
    assert.equal(r.memory.code, 'INVALID_NAME');
    assert.deepEqual(r.rows, [{ v: 'old' }]);
    assert.ok(r.same, 'the old file is as it was');
    assert.equal(r.busy.code, 'BUSY');
    assert.deepEqual(r.replaced, [{ v: 'new' }]);
  }));

test("':memory:' databases in the browser: separate, in no file, no lock", () =>
  withPage(async (page) => {
    const r = await page.evaluate(async () => {
      const a = await cairn.open(':memory:');
      const b = await cairn.open(':memory:');
      await a.exec("CREATE TABLE m (v TEXT); INSERT INTO m VALUES ('a')");
      const out = {
        rows: await a.query('SELECT v FROM m'),
        other: await attempt(() => b.query('SELECT v FROM m')),
        owners: [a.isOwner, b.isOwner],
        check: await a.check(),
      };
      // The sync build's key store is in memory too.
      const s = await cairn.open(':memory:', { sync: true });
      out.syncId = await s.sync.id();
      await Promise.all([a.close(), b.close(), s.close()]);
      const again = await cairn.open(':memory:');
      out.fresh = await attempt(() => again.query('SELECT v FROM m'));
      await again.close();
      const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('cairn', { create: true });
      out.files = [];
      for await (const name of dir.keys()) out.files.push(name);
      const keys = await (await navigator.storage.getDirectory()).getDirectoryHandle('cairn-keys', { create: true });
      for await (const name of keys.keys()) out.files.push(name);
      out.destroy = await attempt(() => cairn.destroy(':memory:'));
      return out;
    });
    assert.deepEqual(r.rows, [{ v: 'a' }]);
    assert.equal(r.other.code, 'UNKNOWN_TABLE');
    assert.deepEqual(r.owners, [true, true]);
    assert.deepEqual(r.check, []);
    assert.match(r.syncId, /^[0-9a-f]{64}$/);
    assert.equal(r.fresh.code, 'UNKNOWN_TABLE', 'a closed memory database is gone');
    assert.deepEqual(r.files, [], 'no OPFS file');
    assert.ok(r.destroy.ok);
  }));

test('a file written in Node.js imports in the browser, and an export from the browser opens in Node.js', () =>
  withPage(async (page) => {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-node-browser-'));
    try {
      const file = join(dir, 'from-node.cairn');
      const db = await openInNode(file);
      await db.exec("CREATE TABLE n (id INTEGER PRIMARY KEY, who TEXT); INSERT INTO n (who) VALUES ('node')");
      await db.close();
      const back = await page.evaluate(async (bytes) => {
        await cairn.importDatabase('from-node', Uint8Array.from(bytes));
        const db = await cairn.open('from-node', { create: false });
        const rows = await db.query('SELECT who FROM n ORDER BY id');
        await db.run("INSERT INTO n (who) VALUES ('browser')");
        const out = Array.from(await db.export());
        await db.close();
        return { rows, out };
      }, Array.from(readFileSync(file)));
      assert.deepEqual(back.rows, [{ who: 'node' }]);
      const other = join(dir, 'from-browser.cairn');
      writeFileSync(other, Uint8Array.from(back.out));
      const again = await openInNode(other, { create: false });
      assert.deepEqual(await again.query('SELECT who FROM n ORDER BY id'), [{ who: 'node' }, { who: 'browser' }]);
      assert.deepEqual(await again.check(), []);
      await again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }));
