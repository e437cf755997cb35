// What the browser under test (CAIRN_BROWSER, harness.mjs) gives cairn, as docs/browsers.md
// records it: OPFS sync access handles in a Worker, shared memory when cross-origin isolated
// (and so cairn's shared-memory channel), Web Locks. And a browser that lacks an API cairn needs
// gets UNSUPPORTED_BROWSER naming it, not a hang.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BROWSER, launch } from './harness.mjs';

// The APIs, probed in a Worker of the page as cairn's Worker uses them.
async function probe(page) {
  return page.evaluate(async () => {
    const src = `onmessage = async () => {
      const out = { locks: 'locks' in navigator };
      const root = await navigator.storage.getDirectory();
      const f = await root.getFileHandle('probe', { create: true });
      const h = await f.createSyncAccessHandle();
      h.write(new Uint8Array([1, 2, 3]), { at: 0 });
      h.flush();
      out.sah = h.getSize();
      h.close();
      await root.removeEntry('probe');
      postMessage(out);
    };`;
    const w = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })));
    const inWorker = await new Promise((res, rej) => {
      w.onmessage = (e) => res(e.data);
      w.onerror = (e) => rej(new Error(`probe Worker: ${e.message}`));
      w.postMessage(0);
    });
    w.terminate();
    return { ...inWorker, isolated: crossOriginIsolated, sab: typeof SharedArrayBuffer === 'function', ua: navigator.userAgent };
  });
}

for (const isolated of [true, false]) {
  test(`${BROWSER}: sync access handles, Web Locks, and the channel ${isolated ? 'over shared memory (isolated)' : 'by postMessage (not isolated)'}`, async (t) => {
    const b = await launch({ isolated });
    try {
      const p = await probe(b.page);
      t.diagnostic(p.ua);
      assert.equal(p.sah, 3, 'a sync access handle wrote 3 bytes');
      assert.equal(p.locks, true);
      assert.equal(p.isolated, isolated);
      assert.equal(p.sab, isolated);
      const r = await b.page.evaluate(async () => {
        const db = await cairn.open('b');
        await db.exec('CREATE TABLE t (x)');
        await db.run('INSERT INTO t VALUES (?)', [new Uint8Array([7])]);
        const out = { channel: db.channel, rows: await db.query('SELECT x FROM t'), owner: db.isOwner };
        await db.close();
        return out;
      });
      assert.deepEqual(r, { channel: isolated ? 'sharedMemory' : 'postMessage', rows: [{ x: new Uint8Array([7]) }], owner: true });
      assert.deepEqual(b.errors, []);
    } finally {
      await b.close();
    }
  });
}

test(`${BROWSER}: a page without Worker or WebAssembly gets UNSUPPORTED_BROWSER naming it`, async () => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const out = {};
      for (const api of ['Worker', 'WebAssembly']) {
        const saved = Object.getOwnPropertyDescriptor(globalThis, api);
        delete globalThis[api];
        try {
          out[api] = await attempt(() => cairn.open(`no-${api}`));
        } finally {
          Object.defineProperty(globalThis, api, saved);
        }
      }
      // With them back, the same page opens.
      out.after = await attempt(async () => (await cairn.open('fine')).channel);
      return out;
    });
    for (const api of ['Worker', 'WebAssembly']) {
      assert.equal(r[api].code, 'UNSUPPORTED_BROWSER', JSON.stringify(r[api]));
      assert.match(r[api].message, new RegExp(`no ${api}\\b`));
    }
    assert.deepEqual(r.after, { ok: true, value: 'sharedMemory' });
  } finally {
    await b.close();
  }
});
