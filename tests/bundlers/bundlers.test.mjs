// The packed package in apps built by Vite and by webpack 5 in production mode, with no
// configuration: each bundler must find the Worker scripts and the wasm files through the
// client's literal `new URL('./file', import.meta.url)` patterns, emit them and rewrite the URLs.
// Each build is served on its own and run in Chromium: a database opened, written, read, a
// statement that needs cairn-rest.wasm, the page reloaded and the rows read again; the same with
// `{ sync: true }`. The files each build emits are printed with their gzip sizes (docs/size.md).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { browse, emitted, installPackage, placeApp, printFiles, viteBuild, webpackBuild } from './apps.mjs';

let pkg;
before(() => {
  pkg = installPackage();
});
after(() => rmSync(pkg.dir, { recursive: true, force: true }));

// First visit: write, read, and what only the rest of the engine runs (EXPLAIN, check()).
async function firstVisit(page, name, sync) {
  return page.evaluate(async ({ name, sync }) => {
    const db = await cairn.open(name, { sync });
    await db.exec('CREATE TABLE IF NOT EXISTS note (id INTEGER PRIMARY KEY, body TEXT)');
    await db.run('INSERT INTO note (body) VALUES (?)', [`written in ${name}`]);
    const rows = await db.query('SELECT id, body FROM note');
    const plan = await db.query('EXPLAIN SELECT body FROM note WHERE id = 1');
    const check = await db.check();
    const { restLoaded } = await db.memory();
    await db.close();
    return { rows, plan: plan.length, check, restLoaded };
  }, { name, sync });
}

async function secondVisit(page, name, sync) {
  return page.evaluate(async ({ name, sync }) => {
    const db = await cairn.open(name, { sync, create: false });
    const rows = await db.query('SELECT id, body FROM note');
    await db.close();
    return rows;
  }, { name, sync });
}

async function runApp(out, label) {
  const b = await browse(out);
  try {
    await b.open('/');
    for (const sync of [false, true]) {
      const name = sync ? 'synced' : 'plain';
      const first = await firstVisit(b.page, name, sync);
      assert.deepEqual(first.rows, [{ id: 1, body: `written in ${name}` }], `${label}: rows`);
      assert.ok(first.plan > 0, `${label}: EXPLAIN gives a plan`);
      assert.deepEqual(first.check, [], `${label}: check() finds nothing wrong`);
      assert.equal(first.restLoaded, true, `${label}: the rest of the engine ran`);
    }
    await b.open('/');
    for (const sync of [false, true]) {
      const name = sync ? 'synced' : 'plain';
      assert.deepEqual(await secondVisit(b.page, name, sync), [{ id: 1, body: `written in ${name}` }], `${label}: read after reload`);
    }
    assert.deepEqual(b.problems, [], `${label}: every request answered, no page error`);
    // Every file the page and its Workers fetched is one the build emitted.
    const names = new Set(emitted(out).map((f) => `/${f.file}`));
    for (const url of b.requested) assert.ok(names.has(new URL(url).pathname.replace(/\/$/, '/index.html')), `${label}: fetched ${url}, not in the build`);
    return new Set(b.requested.map((u) => new URL(u).pathname));
  } finally {
    await b.close();
  }
}

// Each wasm file of the package emitted once, as it is (found by its bytes: bundlers rename it),
// and each Worker script once, in a file named after it (a bundler takes it in and bundles it
// again).
function assertEmitted(out, files, label) {
  const sums = new Map(files.map((f) => [sha(readFileSync(join(out, f.file))), f.file]));
  for (const wasm of ['cairn.wasm', 'cairn-rest.wasm', 'cairn-sync.wasm', 'cairn-sync-rest.wasm']) {
    assert.ok(sums.has(sha(readFileSync(join(pkg.dir, 'node_modules', 'cairn-db', 'dist', wasm)))), `${label}: ${wasm} emitted`);
  }
  for (const [stem, other] of [['cairn-worker', 'cairn-sync-worker'], ['cairn-sync-worker', null]]) {
    const hits = files.filter((f) => {
      const base = f.file.slice(f.file.lastIndexOf('/') + 1);
      return base.startsWith(stem) && base.endsWith('.js') && !(other && base.startsWith(other));
    });
    assert.equal(hits.length, 1, `${label}: ${stem}.js emitted once (${files.map((f) => f.file).join(', ')})`);
  }
  assert.equal(files.filter((f) => f.file.endsWith('.wasm')).length, 4, `${label}: four wasm files`);
}

const sha = (bytes) => createHash('sha256').update(bytes).digest('hex');

test('Vite builds the app with no configuration, and it runs', async () => {
  const app = placeApp(pkg.dir, 'vite-app', join(import.meta.dirname, 'app'));
  const out = await viteBuild(app);
  const files = emitted(out);
  printFiles('vite build', files);
  assertEmitted(out, files, 'vite');
  await runApp(out, 'vite');
});

test('webpack 5 builds the app in production mode with no configuration, and it runs', async () => {
  const app = placeApp(pkg.dir, 'webpack-app', join(import.meta.dirname, 'app'));
  const { out, warnings } = await webpackBuild(app);
  // Size hints are webpack's advice about large assets (the wasm); anything else is a finding.
  assert.deepEqual(warnings.filter((w) => !/asset size limit|entrypoint size limit|webpack performance recommendations/.test(w)), [], 'webpack warnings');
  const files = emitted(out);
  printFiles('webpack build', files);
  assertEmitted(out, files, 'webpack');
  await runApp(out, 'webpack');
});
