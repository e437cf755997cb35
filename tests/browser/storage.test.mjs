// The OPFS block file, in a real Worker over real OPFS in headless Chromium.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

async function withBrowser(fn) {
  const b = await launch({ build: 'test' }); // the block files are in the test build only
  try {
    await fn(b.page);
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
}

test('the block-file conformance suite passes over OPFS', () =>
  withBrowser(async (page) => {
    const results = await page.evaluate(async () => {
      const w = await cairn.startWorker();
      const cases = await w.call('conformanceCases');
      const out = {};
      for (const c of cases) out[c] = await w.call('conformanceRun', [c, `conf-${c}`]);
      return out;
    });
    assert.ok(Object.keys(results).length >= 10, `only ${Object.keys(results).length} cases ran`);
    const failed = Object.entries(results).filter(([, why]) => why !== null);
    assert.deepEqual(failed, [], 'conformance cases failed over OPFS');
  }));

test('pages written and flushed read back, also from a new Worker after close', () =>
  withBrowser(async (page) => {
    const r = await page.evaluate(async () => {
      const pattern = (p) => Uint8Array.from({ length: 4096 }, (_, i) => (p * 31 + i * 7) % 251);
      const same4k = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
      const w1 = await cairn.startWorker();
      const f1 = await cairn.openFile(w1, 'pages.db');
      for (const p of [2, 0, 1, 3]) await f1.write(p * 4096, pattern(p));
      await f1.flush();
      const same = [];
      for (let p = 0; p < 4; p++) same.push(same4k(await f1.read(p * 4096, 4096), pattern(p)));
      const len1 = await f1.len();
      await f1.close();
      w1.terminate();

      const w2 = await cairn.startWorker();
      const f2 = await cairn.openFile(w2, 'pages.db', { create: false });
      const again = [];
      for (let p = 0; p < 4; p++) again.push(same4k(await f2.read(p * 4096, 4096), pattern(p)));
      return { same, again, len1, len2: await f2.len() };
    });
    assert.deepEqual(r.same, [true, true, true, true]);
    assert.deepEqual(r.again, [true, true, true, true], 'a new Worker read different bytes');
    assert.equal(r.len1, 4 * 4096);
    assert.equal(r.len2, 4 * 4096);
  }));

test('a Worker terminated while holding the file releases it, and the flushed bytes survive', () =>
  withBrowser(async (page) => {
    const r = await page.evaluate(async () => {
      const pattern = (p) => Uint8Array.from({ length: 4096 }, (_, i) => (p * 13 + i * 3) % 253);
      const same4k = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
      const w1 = await cairn.startWorker();
      const f1 = await cairn.openFile(w1, 'held.db');
      for (let p = 0; p < 16; p++) await f1.write(p * 4096, pattern(p));
      await f1.flush();
      // Killed with the handle open and a request in flight, as a crash would leave it.
      const inflight = attempt(() => f1.write(16 * 4096, pattern(16)));
      w1.terminate();
      const lost = await inflight;

      const w2 = await cairn.startWorker();
      const t0 = performance.now();
      const f2 = await cairn.openFile(w2, 'held.db', { create: false });
      const openMs = performance.now() - t0;
      const ok = [];
      for (let p = 0; p < 16; p++) ok.push(same4k(await f2.read(p * 4096, 4096), pattern(p)));
      return { ok, lost, openMs, len: await f2.len() };
    });
    assert.equal(r.lost.ok, false, 'a request in flight when the Worker died must fail, not hang');
    assert.equal(r.lost.code, 'TERMINATED');
    assert.ok(r.ok.every(Boolean), `flushed pages differ after the crash: ${r.ok}`);
    assert.ok(r.len >= 16 * 4096, `file shrank to ${r.len}`);
  }));

test('bad input gets an error with a code, and the Worker keeps working', () =>
  withBrowser(async (page) => {
    const r = await page.evaluate(async () => {
      const w = await cairn.startWorker();
      const out = {};
      for (const name of ['a/b', '..', '', 'x\\y']) out[`name ${JSON.stringify(name)}`] = await attempt(() => cairn.openFile(w, name));
      out.missing = await attempt(() => cairn.openFile(w, 'missing.db', { create: false }));
      const f = await cairn.openFile(w, 'bad.db');
      await f.write(0, new Uint8Array(100).fill(7));
      out.pastEnd = await attempt(() => f.read(50, 100));
      out.farPastEnd = await attempt(() => f.read(2 ** 52, 8));
      out.badOffset = await attempt(() => f.read(-1, 8));
      out.badHandle = await attempt(() => w.call('fileRead', [999, 0, 1]));
      out.unknownOp = await attempt(() => w.call('nonsense'));
      // The same file again, from this Worker and from another one, while the handle is held.
      out.sameWorker = await attempt(() => cairn.openFile(w, 'bad.db'));
      const w2 = await cairn.startWorker();
      out.otherWorker = await attempt(() => cairn.openFile(w2, 'bad.db'));
      // Both Workers still answer, and the file still reads.
      out.stillReads = Array.from(await f.read(0, 4));
      out.otherAlive = await attempt(() => w2.call('ping'));
      await f.close();
      out.afterClose = await attempt(() => f.read(0, 4));
      out.reopenAfterRelease = await attempt(async () => Array.from(await (await cairn.openFile(w2, 'bad.db')).read(96, 4)));
      return out;
    });
    for (const name of ['"a/b"', '".."', '""', '"x\\\\y"']) {
      assert.equal(r[`name ${name}`].code, 'INVALID_NAME', `name ${name}: ${JSON.stringify(r[`name ${name}`])}`);
    }
    assert.equal(r.missing.code, 'NOT_FOUND');
    assert.equal(r.pastEnd.code, 'OUT_OF_BOUNDS');
    assert.match(r.pastEnd.message, /past the end/);
    assert.equal(r.farPastEnd.code, 'OUT_OF_BOUNDS');
    assert.equal(r.badOffset.code, 'INVALID_INPUT');
    assert.equal(r.badHandle.code, 'INVALID_INPUT');
    assert.equal(r.unknownOp.code, 'UNKNOWN_OP');
    assert.equal(r.sameWorker.code, 'BUSY', JSON.stringify(r.sameWorker));
    assert.equal(r.otherWorker.code, 'BUSY', JSON.stringify(r.otherWorker));
    assert.match(r.otherWorker.message, /another Worker or tab/);
    assert.deepEqual(r.stillReads, [7, 7, 7, 7]);
    assert.equal(r.otherAlive.ok, true);
    assert.equal(r.afterClose.code, 'INVALID_INPUT', 'a closed file handle must be refused');
    assert.deepEqual(r.reopenAfterRelease, { ok: true, value: [7, 7, 7, 7] });
  }));

test('a panic in the engine is INTERNAL, stops the Worker, and releases its files', () =>
  withBrowser(async (page) => {
    const r = await page.evaluate(async () => {
      const w = await cairn.startWorker();
      const f = await cairn.openFile(w, 'panic.db');
      await f.write(0, new Uint8Array([1, 2, 3]));
      await f.flush();
      const panic = await attempt(() => w.call('debugPanic', ['boom from a test']));
      const after = await attempt(() => w.call('ping'));
      // The stopped Worker closed itself, so its handle is free for a new one.
      let reopened = null;
      for (let i = 0; i < 50 && !(reopened && reopened.ok); i++) {
        const w2 = await cairn.startWorker();
        reopened = await attempt(async () => Array.from(await (await cairn.openFile(w2, 'panic.db', { create: false })).read(0, 3)));
        if (!reopened.ok) { w2.terminate(); await new Promise((res) => setTimeout(res, 20)); }
      }
      return { panic, after, reopened };
    });
    assert.equal(r.panic.code, 'INTERNAL');
    assert.match(r.panic.message, /boom from a test/);
    assert.equal(r.after.code, 'INTERNAL', 'a stopped engine must refuse, not hang');
    assert.deepEqual(r.reopened, { ok: true, value: [1, 2, 3] });
  }));

test('a Worker script that cannot load fails with a code instead of hanging', () =>
  withBrowser(async (page) => {
    const r = await page.evaluate(() => attempt(() => cairn.startWorker({ workerUrl: '/dist/no-such-worker.js' })));
    assert.equal(r.ok, false);
    assert.equal(r.code, 'WORKER_ERROR');
  }));
