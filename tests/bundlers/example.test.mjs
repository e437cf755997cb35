// examples/todo as a user builds it (Vite, or webpack 5; the packed package, no configuration),
// run in Chromium: to-dos added through the page survive a reload. Then offline: a service worker
// precaches every file the build emitted (the README's list: the page's scripts, both Worker
// scripts and the four wasm files), the server is stopped, and the app runs from the cache alone,
// statements that need cairn-rest.wasm included. And under Vite's dev server, as `npm run dev`
// runs it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { browse, emitted, installPackage, placeApp, printFiles, repo, viteBuild, webpackBuild } from './apps.mjs';

let pkg;
before(() => {
  pkg = installPackage();
});
after(() => rmSync(pkg.dir, { recursive: true, force: true }));

// A service worker that answers from its cache only: with it, a request that would need the
// network fails, whether or not the server is up.
const serviceWorker = (files) => `
const FILES = ${JSON.stringify(files)};
self.addEventListener('install', (e) => e.waitUntil(caches.open('app').then((c) => c.addAll(FILES)).then(() => self.skipWaiting())));
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
self.addEventListener('fetch', (e) => e.respondWith(caches.match(e.request, { ignoreSearch: true }).then((r) => r ?? Response.error())));
`;

async function addTodo(page, title) {
  const before = await page.locator('#list li').count();
  await page.fill('input[name=title]', title);
  await page.click('#add button');
  await page.waitForFunction((n) => document.querySelectorAll('#list li').length === n + 1, before);
}

const titles = (page) => page.locator('#list li span').allTextContents();

// Online, then from the service worker's cache with the server stopped.
async function runTodo(out, label) {
  writeFileSync(join(out, 'sw.js'), serviceWorker(['/', ...emitted(out).map((f) => `/${f.file}`)]));
  const b = await browse(out);
  try {
    await b.open('/', 'appReady');
    await addTodo(b.page, 'buy milk');
    await addTodo(b.page, 'write docs');
    await b.open('/', 'appReady');
    assert.deepEqual(await titles(b.page), ['buy milk', 'write docs'], `${label}: the to-dos survive a reload`);

    await b.page.evaluate(async () => {
      await navigator.serviceWorker.register('/sw.js');
      await navigator.serviceWorker.ready;
    });
    // The network cut: the server stops, and the service worker answers from its cache only.
    const closed = b.server.close();
    b.server.server.closeAllConnections();
    await closed;
    await b.page.reload();
    await b.page.waitForFunction(() => window.appReady === true, null, { timeout: 30_000 });
    assert.equal(await b.page.evaluate(() => navigator.serviceWorker.controller !== null), true, `${label}: served by the service worker`);
    assert.deepEqual(await titles(b.page), ['buy milk', 'write docs']);
    await addTodo(b.page, 'offline');
    const r = await b.page.evaluate(async () => {
      const { db } = window.app;
      const plan = await db.query('EXPLAIN SELECT title FROM todo WHERE id = 1');
      const check = await db.check();
      const all = await db.get("SELECT group_concat(title, '|') AS titles FROM todo");
      const bad = await db.query('SELEC').catch((e) => e.code);
      return { plan: plan.length, check, all, bad, mem: await db.memory() };
    });
    assert.ok(r.plan > 0, `${label}: EXPLAIN runs offline`);
    assert.deepEqual(r.check, []);
    assert.equal(r.all.titles, 'buy milk|write docs|offline');
    assert.equal(r.bad, 'SYNTAX', `${label}: an error message (built in the rest) offline`);
    assert.equal(r.mem.restLoaded, true);
    // Only the requests before the cut reached the server; none failed.
    assert.deepEqual(b.problems, []);
  } finally {
    await b.context.close();
  }
}

test('the to-do example builds with Vite, runs, and runs offline from a service worker cache', async () => {
  const out = await viteBuild(placeApp(pkg.dir, 'todo-vite', join(repo, 'examples', 'todo')));
  printFiles('examples/todo, vite build', emitted(out));
  await runTodo(out, 'vite');
});

test('the to-do example builds with webpack, runs, and runs offline from a service worker cache', async () => {
  const { out } = await webpackBuild(placeApp(pkg.dir, 'todo-webpack', join(repo, 'examples', 'todo')));
  printFiles('examples/todo, webpack build', emitted(out));
  await runTodo(out, 'webpack');
});

test("the to-do example runs under Vite's dev server (npm run dev)", async () => {
  const app = placeApp(pkg.dir, 'todo-dev', join(repo, 'examples', 'todo'));
  const { createServer } = await import('vite');
  // The dependency optimizer bundles cairn-db again for the dev server: the Worker and wasm URLs
  // must survive that too.
  const server = await createServer({ root: app, configFile: false, logLevel: 'warn', server: { host: '127.0.0.1', port: 0 } });
  await server.listen();
  const b = await browse(app);
  try {
    await b.page.goto(server.resolvedUrls.local[0]);
    await b.page.waitForFunction(() => window.appReady === true, null, { timeout: 30_000 });
    await addTodo(b.page, 'from the dev server');
    assert.deepEqual(await titles(b.page), ['from the dev server']);
    assert.ok(await b.page.evaluate(async () => (await window.app.db.query('EXPLAIN SELECT 1')).length > 0));
    assert.deepEqual(b.problems.filter((p) => !p.endsWith('/favicon.ico')), []);
  } finally {
    await b.close();
    await server.close();
  }
});
