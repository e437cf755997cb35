// The page of `node worker/bench/replicated.mjs` (what a replicated write costs in the browser)
// runs: each side writes its rows, each sample counted after its timed part, and every side has
// a time. Times nothing: the bench itself reports the medians.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

test('the replicated-write bench page writes every side its rows', async () => {
  const b = await launch();
  try {
    await b.page.goto(`${b.server.url}/worker/bench/replicated.html`);
    await b.page.waitForFunction(() => window.ready === true);
    const out = await b.page.evaluate(() =>
      window.run({ rounds: 1, workloads: ['alone-relaxed'] }).catch((e) => ({ error: `${e.code ?? ''} ${e.message}` })),
    );
    assert.equal(out.error, undefined, out.error);
    const sides = out.workloads['alone-relaxed'].sides;
    assert.deepEqual(Object.keys(sides), [
      'plain build, plain table',
      'sync build, plain table',
      'sync build, replicated table',
    ]);
    for (const [side, s] of Object.entries(sides)) {
      assert.equal(s.samples.length, 1, side);
      assert.ok(s.median > 0, `${side}: ${s.median}`);
    }
    assert.deepEqual(b.errors, [], 'the page threw');
  } finally {
    await b.close();
  }
});
