// A full disk: with the origin's quota cut down (through the DevTools protocol), a commit that
// does not fit fails with QUOTA_EXCEEDED, the last commit stands, and the database stays usable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch, skipUnless } from './harness.mjs';

test('quota exhaustion fails the commit with a clear error and the database stays usable', {
  skip: skipUnless(['chromium'], 'the quota is cut through the Chrome DevTools protocol (Storage.overrideQuotaForOrigin)'),
}, async () => {
  const b = await launch();
  try {
    const cdp = await b.context.newCDPSession(b.page);
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: b.server.url, quotaSize: 3 * 1024 * 1024 });
    const r = await b.page.evaluate(async () => {
      const db = await cairn.open('full');
      await db.exec('CREATE TABLE big (id INTEGER PRIMARY KEY, data BLOB)');
      const chunk = new Uint8Array(256 * 1024).fill(7);
      let ok = 0;
      let failure = null;
      for (let i = 0; i < 100 && !failure; i++) {
        const res = await attempt(() => db.run('INSERT INTO big (data) VALUES (?)', [chunk]));
        if (res.ok) ok++;
        else failure = res;
      }
      const count = (await db.get('SELECT count(*) AS n FROM big')).n;
      // Make room, and write again.
      await db.run('DELETE FROM big WHERE id > 2');
      const after = await attempt(() => db.run('INSERT INTO big (data) VALUES (?)', [new Uint8Array(1000)]));
      return { ok, failure, count, after, check: await db.check() };
    });
    assert.ok(r.failure, 'the quota was never hit');
    assert.equal(r.failure.code, 'QUOTA_EXCEEDED', JSON.stringify(r.failure));
    assert.ok(r.ok >= 1, 'no write fitted before the quota');
    assert.equal(r.count, r.ok, 'the failed commit left rows behind, or lost committed ones');
    assert.equal(r.after.ok, true, `the database is not usable after the failure: ${JSON.stringify(r.after)}`);
    assert.deepEqual(r.check, []);
  } finally {
    await b.close();
  }
});
