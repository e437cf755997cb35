// What the bundler tests share: the package as a user gets it (`npm pack`, installed into a fresh
// directory), builds with Vite and webpack 5 through their Node APIs and no configuration, the
// files a build emits with their gzip sizes, and a built app served and opened in Chromium.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { chromium } from 'playwright-core';
import { CHROMIUM } from '../browser/harness.mjs';
import { startServer } from '../../scripts/serve.mjs';

export const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** A fresh directory with the packed package installed in its node_modules: an app placed in a
 * folder under it imports 'cairn-db' as a user's app does. */
export function installPackage() {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-bundlers-'));
  execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: repo, stdio: ['ignore', 'pipe', 'inherit'] });
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
  if (!tarball) throw new Error('npm pack made no tarball');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'apps', private: true, type: 'module' }));
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', join(dir, tarball)], { cwd: dir, stdio: 'inherit' });
  return { dir, files: readdirSync(join(dir, 'node_modules', 'cairn-db')) };
}

/** Copies the folder `from` to `<dir>/<name>` and returns the copy's path. */
export function placeApp(dir, name, from) {
  const app = join(dir, name);
  mkdirSync(app, { recursive: true });
  // Its sources only: not what a local `npm install` or build left there.
  cpSync(from, app, { recursive: true, filter: (f) => !/[/\\](node_modules|dist)$/.test(f) });
  return app;
}

/** `vite build` of the app whose index.html is in `app`, with no configuration file; into `app/dist`. */
export async function viteBuild(app) {
  const { build } = await import('vite');
  await build({ root: app, configFile: false, logLevel: 'warn', build: { outDir: join(app, 'dist'), emptyOutDir: true } });
  return join(app, 'dist');
}

/** `webpack --mode production` of `app/src/index.js` into `app/dist/main.js` (webpack's defaults),
 * beside the app's index.html loading it. Rejects on an error, returns the warnings. */
export async function webpackBuild(app) {
  const { default: webpack } = await import('webpack');
  const stats = await new Promise((resolve, reject) => {
    // What `webpack --mode production` run in `app` does: its context and output path are the
    // working directory's, given here instead.
    const compiler = webpack({ mode: 'production', context: app, output: { path: join(app, 'dist') } });
    compiler.run((err, s) => compiler.close(() => (err ? reject(err) : resolve(s))));
  });
  const info = stats.toJson({ all: false, errors: true, warnings: true });
  if (stats.hasErrors()) throw new Error(`webpack: ${info.errors.map((e) => e.message).join('\n')}`);
  const html = readFileSync(join(app, 'index.html'), 'utf8');
  const entry = '<script type="module" src="./src/index.js"></script>';
  if (!html.includes(entry)) throw new Error(`${app}/index.html does not load ${entry}`);
  writeFileSync(join(app, 'dist', 'index.html'), html.replace(entry, '<script src="./main.js"></script>'));
  return { out: join(app, 'dist'), warnings: info.warnings.map((w) => w.message) };
}

/** Every file under `dir`: `{ file, raw, gzip }`, largest first. */
export function emitted(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else {
        const bytes = readFileSync(p);
        out.push({ file: relative(dir, p), raw: bytes.length, gzip: zlib.gzipSync(bytes, { level: 9 }).length });
      }
    }
  };
  walk(dir);
  return out.sort((a, b) => b.raw - a.raw);
}

/** Prints `files` as a table (the figures docs/size.md gives per bundler). */
export function printFiles(title, files) {
  console.log(`\n${title}\n${'file'.padEnd(40)}${'raw bytes'.padStart(10)}${'gzip -9'.padStart(10)}`);
  for (const f of files) console.log(`${f.file.padEnd(40)}${String(f.raw).padStart(10)}${String(f.gzip).padStart(10)}`);
  const sum = (k) => files.reduce((t, f) => t + f[k], 0);
  console.log(`${'total'.padEnd(40)}${String(sum('raw')).padStart(10)}${String(sum('gzip')).padStart(10)}`);
}

/** Serves `root` (no isolation headers) and opens Chromium on a fresh profile; `page.goto(path)`
 * through `open(path)`. Requests that fail or answer 400 and up, and page errors, are collected. */
export async function browse(root, { profile } = {}) {
  const server = await startServer({ root, isolated: false });
  const dir = profile ?? mkdtempSync(join(tmpdir(), 'cairn-profile-'));
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e}`));
  context.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  context.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`);
  });
  const requested = [];
  context.on('request', (r) => requested.push(r.url()));
  return {
    page, context, server, profile: dir, problems, requested,
    /** Goes to `path` and waits until the page sets `window[ready]`. */
    async open(path = '/', ready = 'cairnReady') {
      await page.goto(`${server.url}${path}`);
      await page.waitForFunction((flag) => window[flag] === true, ready, { timeout: 30_000 });
    },
    async close() {
      await context.close();
      await server.close();
    },
  };
}
