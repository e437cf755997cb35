// The package as a user gets it: `npm pack`, installed into a fresh app, bundled with esbuild, the
// package's files served next to the bundle, no isolation headers. It must open a database and
// run statements with no other configuration.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startBrowser } from './harness.mjs';
import { startServer } from '../../scripts/serve.mjs';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

test('the packed package works in a fresh esbuild app without isolation headers', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-app-'));
  let context = null;
  let server = null;
  try {
    execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: repo, stdio: ['ignore', 'pipe', 'inherit'] });
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
    assert.ok(tarball, 'npm pack made no tarball');
    const app = join(dir, 'app');
    mkdirSync(join(app, 'public'), { recursive: true });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'fresh-app', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', join(dir, tarball)], { cwd: app, stdio: 'inherit' });
    writeFileSync(join(app, 'main.js'), `
      import { open, CairnError } from 'cairn-db';
      const db = await open('notes');
      await db.exec('CREATE TABLE IF NOT EXISTS note (id INTEGER PRIMARY KEY, body TEXT)');
      await db.run('INSERT INTO note (body) VALUES (?)', ['from a bundled app']);
      let code = null;
      try { await db.query('SELEC'); } catch (e) { code = e instanceof CairnError ? e.code : 'not a CairnError'; }
      window.result = { rows: await db.query('SELECT id, body FROM note'), code, channel: db.channel };
    `);
    writeFileSync(join(app, 'public', 'index.html'), '<!doctype html><meta charset="utf-8"><script type="module" src="./main.js"></script>');
    const esbuild = await import('esbuild');
    await esbuild.build({ entryPoints: [join(app, 'main.js')], bundle: true, format: 'esm', outfile: join(app, 'public', 'main.js'), absWorkingDir: app, logLevel: 'error' });
    // "Serving the package's files": the Worker script and the wasm (the engine and the rest of it,
    // which the syntax error below fetches), next to the bundle.
    for (const f of ['cairn-worker.js', 'cairn.wasm', 'cairn-rest.wasm']) copyFileSync(join(app, 'node_modules', 'cairn-db', 'dist', f), join(app, 'public', f));

    server = await startServer({ root: join(app, 'public'), isolated: false });
    const profile = join(dir, 'profile');
    let page;
    ({ context, page } = await startBrowser(profile));
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${server.url}/index.html`);
    await page.waitForFunction(() => window.result !== undefined, null, { timeout: 30_000 });
    const r = await page.evaluate(() => window.result);
    assert.deepEqual(r.rows, [{ id: 1, body: 'from a bundled app' }]);
    assert.equal(r.code, 'SYNTAX');
    assert.equal(r.channel, 'postMessage');
    assert.deepEqual(errors, []);
  } finally {
    await context?.close();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
