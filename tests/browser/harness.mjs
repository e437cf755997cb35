// Shared set-up for the browser tests: a server on 127.0.0.1 and a browser in a fresh profile
// directory, so OPFS starts empty. `CAIRN_BROWSER` picks the browser:
//   chromium (the default): Debian's Chromium driven by playwright-core;
//   firefox: Debian's firefox-esr driven by puppeteer-core over WebDriver BiDi.
// The tests speak Playwright's page API; on Firefox a thin adapter (below) gives a puppeteer page
// the same calls, so one test file runs on both.
import { after } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startServer } from '../../scripts/serve.mjs';

export const BROWSER = process.env.CAIRN_BROWSER ?? 'chromium';
if (!['chromium', 'firefox'].includes(BROWSER)) throw new Error(`CAIRN_BROWSER must be chromium or firefox, not ${BROWSER}`);
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const FIREFOX = process.env.FIREFOX ?? '/usr/bin/firefox-esr';
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
// Keep Firefox off the network on a closed machine (updates, telemetry, captive portal checks).
const FIREFOX_PREFS = {
  'app.update.enabled': false,
  'browser.safebrowsing.malware.enabled': false,
  'browser.safebrowsing.phishing.enabled': false,
  'network.captive-portal-service.enabled': false,
  'network.connectivity-service.enabled': false,
  'datareporting.policy.dataSubmissionEnabled': false,
  'toolkit.telemetry.enabled': false,
  'extensions.update.enabled': false,
};

/**
 * For a test that cannot run on the chosen browser: the reason as `node:test`'s `skip` option
 * (a string skips and is printed), or false. `only` names the browsers the test runs on.
 */
export function skipUnless(only, reason) {
  return only.includes(BROWSER) ? false : `${BROWSER}: ${reason}`;
}

/**
 * Starts the chosen browser on the profile directory `dir` and returns `{ context, page }`:
 * `context` has `newPage()`, `setOffline(on)` and `close()`, `page` Playwright's page calls that
 * the tests use. `server` (from startServer) feeds `page.on('request')` on Firefox.
 */
export async function startBrowser(dir, { server } = {}) {
  if (BROWSER === 'chromium') {
    const context = await chromium.launchPersistentContext(dir, { executablePath: CHROMIUM, headless: true, args: ARGS });
    const page = context.pages()[0] ?? (await context.newPage());
    return { context, page };
  }
  const { default: puppeteer } = await import('puppeteer-core');
  const browser = await puppeteer.launch({
    browser: 'firefox',
    protocol: 'webDriverBiDi',
    executablePath: FIREFOX,
    headless: true,
    userDataDir: dir,
    extraPrefsFirefox: FIREFOX_PREFS,
  });
  return firefoxContext(browser, browser, server, () => browser.close(), (await browser.pages())[0]);
}

// Pages of one puppeteer browser (or of one user context in it) with the calls of a Playwright
// context that the tests make.
async function firefoxContext(browser, within, server, close, first) {
  const pages = new Set();
  const wrap = async (p) => {
    const page = await firefoxPage(p, server);
    pages.add(page);
    return page;
  };
  const context = {
    browser,
    async newPage() {
      return wrap(await within.newPage());
    },
    pages: () => [...pages],
    async setOffline(on) {
      for (const page of pages) if (!page.isClosed()) await page.raw.setOfflineMode(on);
    },
    close,
  };
  const page = await wrap(first ?? (await within.newPage()));
  return { context, page };
}

// On Firefox, where starting the browser is most of a test's time, the tests of a file share one
// browser, each in a user context (a container) of its own: its own OPFS, Web Locks and
// BroadcastChannels, as a fresh profile would give, and its own server (so its own origin too).
// A test that restarts or kills the browser asks for one of its own (`ownBrowser`).
let shared = null;
// Registered on Firefox only: a hook makes node:test report on a script that is not a test.
if (BROWSER === 'firefox') {
  after(async () => {
    const b = await shared;
    shared = null;
    if (!b) return;
    await b.browser.close().catch(() => {});
    rmSync(b.dir, { recursive: true, force: true });
  });
}

async function sharedFirefox(server) {
  shared ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-profile-'));
    const { context } = await startBrowser(dir);
    return { browser: context.browser, dir };
  })();
  const { browser } = await shared;
  const user = await browser.createBrowserContext();
  return firefoxContext(browser, user, server, () => user.close());
}

/**
 * Starts a server and a browser with a new profile (on Firefox, unless `ownBrowser`, a new user
 * context of the file's shared browser). `profile` reuses a directory and `port` a port (a
 * restart: OPFS belongs to the origin, and the port is part of it). `build: 'test'` loads
 * the test build (dist/test/: the shipped one plus the storage layer's block files).
 */
export async function launch({ isolated = true, profile, port = 0, build, ownBrowser = false } = {}) {
  const server = await startServer({ isolated, port });
  const own = BROWSER === 'chromium' || ownBrowser || profile !== undefined;
  const dir = own ? profile ?? mkdtempSync(join(tmpdir(), 'cairn-profile-')) : null;
  const { context, page } = own ? await startBrowser(dir, { server }) : await sharedFirefox(server);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${server.url}/tests/browser/page.html${build ? `?build=${build}` : ''}`);
  await page.waitForFunction(() => window.cairnReady === true);
  return {
    page,
    context,
    server,
    profile: dir,
    errors,
    /** Closes the browser (on Firefox's shared browser, the test's user context); keeps the
     * profile when `keepProfile` (to start again on it). */
    async close({ keepProfile = false } = {}) {
      await context.close();
      await server.close();
      if (dir && !keepProfile) rmSync(dir, { recursive: true, force: true });
    },
  };
}

// A puppeteer page (over BiDi) with the Playwright calls the tests make. Values cross as tagged
// JSON (`codec`) because BiDi's own serialization drops typed arrays, which the tests return.
async function firefoxPage(p, server) {
  const listeners = [];
  // 'pageerror' as Playwright means it: an uncaught exception or unhandled rejection in the page.
  // BiDi's JavaScript log entries also carry Firefox's console reports of failed loads and
  // connections (a Worker script with the wrong type, a WebSocket refused), which a page sees as
  // events it handles, not as errors it threw.
  const onError = [];
  await p.exposeFunction('__cairnPageError', (text) => {
    for (const f of onError) f(new PageError(text));
  });
  await p.evaluateOnNewDocument(() => {
    const report = (e) => globalThis.__cairnPageError(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
    addEventListener('error', (e) => report(e.error ?? e.message));
    addEventListener('unhandledrejection', (e) => report(e.reason));
  });
  return {
    raw: p,
    async evaluate(fn, arg) {
      return decode(await p.evaluate(inPage, String(codec), String(fn), encode(arg)));
    },
    async waitForFunction(fn, arg, { timeout = 30_000 } = {}) {
      await p.waitForFunction(fn, { timeout, polling: 50 }, arg);
    },
    async goto(url) {
      await p.goto(url, { waitUntil: 'load' });
    },
    async reload() {
      await p.reload({ waitUntil: 'load' });
    },
    async close() {
      for (const [event, f] of listeners) server?.server.off(event, f);
      await p.close();
    },
    isClosed: () => p.isClosed(),
    async fill(selector, text) {
      await p.$eval(selector, (el, t) => {
        el.value = t;
        el.dispatchEvent(new Event('input', { bubbles: true }));
        el.dispatchEvent(new Event('change', { bubbles: true }));
      }, text);
    },
    click: (selector) => p.click(selector),
    waitForSelector: (selector) => p.waitForSelector(selector),
    textContent: (selector) => p.$eval(selector, (el) => el.textContent),
    $eval: (selector, fn, arg) => p.$eval(selector, fn, arg),
    $$eval: (selector, fn, arg) => p.$$eval(selector, fn, arg),
    screenshot: (opts) => p.screenshot(opts),
    on(event, f) {
      if (event === 'request') {
        // BiDi reports requests per tab, and a Worker's fetches are not a tab's: the server sees
        // them all. Only the requests of this server, which serves one test at a time.
        const g = (req) => f({ url: () => new URL(req.url, server.url).href });
        server?.server.on('request', g);
        listeners.push(['request', g]);
      } else if (event === 'pageerror') {
        onError.push(f);
      } else {
        p.on(event, f);
      }
    },
  };
}

// Prints as Playwright's page errors do: `Name: message`.
class PageError extends Error {
  toString() {
    return this.message;
  }
}

// Tagged JSON, for values BiDi's serialization loses: typed arrays (as Uint8Array), undefined,
// NaN, the infinities and -0, bigints, dates. Self-contained: its source also runs in the page.
function codec() {
  const T = '\u0000cairn';
  const encode = (value) => JSON.stringify({ v: value }, function (key, x) {
    const raw = this[key];
    if (raw === undefined) return { [T]: 'undefined' };
    if (typeof raw === 'number' && (!Number.isFinite(raw) || Object.is(raw, -0))) return { [T]: 'number', v: String(raw) };
    if (typeof raw === 'bigint') return { [T]: 'bigint', v: String(raw) };
    if (raw instanceof Date) return { [T]: 'date', v: raw.getTime() };
    if (ArrayBuffer.isView(raw)) return { [T]: 'u8', v: Array.from(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength)) };
    if (raw instanceof ArrayBuffer) return { [T]: 'u8', v: Array.from(new Uint8Array(raw)) };
    return x;
  });
  const revive = (v) => {
    if (Array.isArray(v)) return v.map(revive);
    if (v === null || typeof v !== 'object') return v;
    switch (v[T]) {
      case 'undefined': return undefined;
      case 'number': return Number(v.v);
      case 'bigint': return BigInt(v.v);
      case 'u8': return new Uint8Array(v.v);
      case 'date': return new Date(v.v);
    }
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, revive(x)]));
  };
  return { encode, decode: (json) => revive(JSON.parse(json)).v };
}
const { encode, decode } = codec();

// Runs a test's function (its source) in the page's global scope, as Playwright does, with its
// argument and result through the codec.
async function inPage(codecSrc, src, arg) {
  const { encode, decode } = (0, eval)(`(${codecSrc})`)();
  const fn = (0, eval)(`(${src})`);
  return encode(await fn(decode(arg)));
}
