#!/usr/bin/env node
// The browser benchmark runner: cairn against SQLite WASM (opfs-sahpool) and PGlite (opfs-ahp),
// each in a dedicated Worker over OPFS, driven from one page in headless Chromium.
// Every sample runs in a fresh browser profile; see README.md for the method.
import { parseArgs } from 'node:util';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, openSync, writeSync, fdatasyncSync, closeSync, unlinkSync } from 'node:fs';
import { tmpdir, cpus, totalmem, release, platform } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { gzipSync, brotliCompressSync, constants as zc } from 'node:zlib';
import { chromium } from 'playwright-core';
import { build, BUILD_DIR, peerVersions } from './build.mjs';
import { serve } from './server.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '..');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const CHROME_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
// cairn runs twice: 'cairn' over the shared-memory channel (the page is cross-origin isolated) and
// 'cairn-pm' with its client forced to postMessage, the channel of a page that is not.
const ALL_ENGINES = ['cairn', 'cairn-pm', 'sqlite', 'pglite'];
const CAIRN_BUILDS = ['cairn', 'cairn-pm'];
let SAMPLE_LIMIT_MS = 60_000;

const HELP = `usage: node run.mjs [options]
  --engines LIST     comma-separated: cairn,cairn-pm,sqlite,pglite (default: all; cairn and
                     cairn-pm skipped if not built). cairn talks to its Worker over shared memory,
                     cairn-pm over postMessage (open()'s channel: 'postMessage')
  --workloads LIST   comma-separated workload names or groups (default: all)
  --samples N        samples per engine and workload (default 9)
  --rows N           rows in t1 (default 10000; counts scale with it)
  --out NAME         results/NAME.json (or a path ending in .json)
  --extra DIR        also load workload modules (*.mjs) from DIR
  --base DIR         also run the cairn build in DIR (say, main before a change) as the engine
                     cairn-base, in the same rounds as cairn: before and after side by side
  --smoke            one sample, every workload, every engine, 200 rows, short probe waits
  --cpu-wait S       cap of the CPU probe's wait before each round (default 30)
  --flush-wait S     cap of the flush probe's wait before each sample (default 10)
  --isolated         with --smoke: still one browser profile per sample (smoke groups the timed
                     workloads of an engine in one session and one database, to stay quick)
  --limit S          abandon a sample after S seconds (default 60)
  --ua-memory        also call performance.measureUserAgentSpecificMemory (slow)
  --list             list the workloads and exit
  --help`;

function parse(argv) {
  const { values } = parseArgs({
    args: argv, allowPositionals: false,
    options: {
      engines: { type: 'string' }, workloads: { type: 'string' }, samples: { type: 'string' },
      rows: { type: 'string' }, out: { type: 'string' }, extra: { type: 'string' }, base: { type: 'string' },
      smoke: { type: 'boolean' }, 'cpu-wait': { type: 'string' }, 'flush-wait': { type: 'string' },
      'ua-memory': { type: 'boolean' }, isolated: { type: 'boolean' }, limit: { type: 'string' }, list: { type: 'boolean' }, help: { type: 'boolean' },
    },
  });
  const smoke = !!values.smoke;
  return {
    smoke,
    help: !!values.help, list: !!values.list,
    engines: values.engines ? values.engines.split(',').map((s) => s.trim()).filter(Boolean) : ALL_ENGINES,
    workloads: values.workloads ? values.workloads.split(',').map((s) => s.trim()).filter(Boolean) : null,
    samples: smoke ? 1 : Number(values.samples ?? 9),
    rows: Number(values.rows ?? (smoke ? 200 : 10000)),
    out: values.out ?? (smoke ? 'smoke' : `run-${new Date().toISOString().slice(0, 19).replace(/[:T]/g, '-')}`),
    extra: values.extra ? resolve(values.extra) : null,
    base: values.base ? resolve(values.base) : null,
    cpuWaitMs: 1000 * Number(values['cpu-wait'] ?? (smoke ? 0 : 30)),
    flushWaitMs: 1000 * Number(values['flush-wait'] ?? (smoke ? 1 : 10)),
    uaMemory: !!values['ua-memory'],
    grouped: smoke && !values.isolated,
    limitMs: 1000 * Number(values.limit ?? 60),
  };
}

// ---------- workloads ----------
async function loadWorkloads(extraDir) {
  const dirs = [[join(HERE, 'workloads'), '/workloads/']];
  if (extraDir) dirs.push([extraDir, '/extra/']);
  const out = [];
  for (const [dir, urlPrefix] of dirs) {
    for (const f of readdirSync(dir).filter((f) => f.endsWith('.mjs')).sort()) {
      const w = (await import(pathToFileURL(join(dir, f)).href)).default;
      if (!w || !w.name) throw new Error(`${dir}/${f}: default export needs a name`);
      if (out.some((o) => o.name === w.name)) throw new Error(`duplicate workload name ${w.name} (${dir}/${f})`);
      out.push({ name: w.name, group: w.group || 'other', title: w.title || w.name, kind: w.kind || 'timed', url: urlPrefix + f });
    }
  }
  return out;
}

// ---------- probes ----------
function cpuWork() {
  const t0 = performance.now();
  let x = 0;
  for (let i = 0; i < 3_000_000; i++) x = (x + Math.imul(i, 2654435761)) ^ (x >>> 3);
  const a = new Array(20000);
  for (let i = 0; i < a.length; i++) a[i] = (x + i * 7919) % 100003;
  a.sort((p, q) => p - q);
  return performance.now() - t0 + (a[0] < 0 ? 1 : 0);
}
const cpuProbe = () => Math.min(cpuWork(), cpuWork(), cpuWork());
function flushProbe(dir) {
  const f = join(dir, `.flush-probe-${process.pid}`);
  const buf = Buffer.alloc(4096, 7);
  const fd = openSync(f, 'w');
  try {
    const t0 = performance.now();
    writeSync(fd, buf, 0, buf.length, 0);
    fdatasyncSync(fd);
    return performance.now() - t0;
  } finally { closeSync(fd); unlinkSync(f); }
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const n = s.length; return n ? (n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2) : null; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(probe, ok, capMs, stepMs) {
  const t0 = Date.now();
  const readings = [];
  for (;;) {
    const v = probe();
    readings.push(+v.toFixed(3));
    if (ok(v)) return { readings, waitedMs: Date.now() - t0, recovered: true };
    if (Date.now() - t0 >= capMs) return { readings, waitedMs: Date.now() - t0, recovered: false };
    await sleep(stepMs);
  }
}

// ---------- browser ----------
async function launch(profileDir) {
  return chromium.launchPersistentContext(profileDir, { executablePath: CHROMIUM, headless: true, args: CHROME_ARGS });
}
async function openPage(context, baseUrl, logs) {
  const page = context.pages()[0] || (await context.newPage());
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') logs.push(`${m.type()}: ${m.text()}`.slice(0, 500)); });
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`.slice(0, 500)));
  await page.goto(baseUrl + '/index.html');
  await page.waitForFunction(() => !!window.bench, null, { timeout: 30_000 });
  return page;
}
function withTimeout(promise, ms) {
  let t;
  return Promise.race([promise, new Promise((_, rej) => { t = setTimeout(() => rej(Object.assign(new Error(`over ${ms / 1000} s`), { timeout: true })), ms); })])
    .finally(() => clearTimeout(t));
}
async function closeQuietly(context) {
  try { await withTimeout(context.close(), 15_000); } catch {}
}

// ---------- sizes ----------
// Brotli -q 11 of PGlite's 9 MB wasm takes a minute: keep sizes by content hash between runs.
const SIZE_CACHE_FILE = join(HERE, '.cache', 'sizes.json');
let sizeCache = null;
function sizes(file) {
  if (!sizeCache) { try { sizeCache = new Map(Object.entries(JSON.parse(readFileSync(SIZE_CACHE_FILE, 'utf8')))); } catch { sizeCache = new Map(); } }
  const buf = readFileSync(file);
  const key = createHash('sha256').update(buf).digest('hex');
  if (!sizeCache.has(key)) {
    sizeCache.set(key, {
      raw: buf.length,
      gzip: gzipSync(buf, { level: 9 }).length,
      brotli: brotliCompressSync(buf, { params: { [zc.BROTLI_PARAM_QUALITY]: 11, [zc.BROTLI_PARAM_SIZE_HINT]: buf.length } }).length,
    });
    mkdirSync(dirname(SIZE_CACHE_FILE), { recursive: true });
    writeFileSync(SIZE_CACHE_FILE, JSON.stringify(Object.fromEntries(sizeCache)));
  }
  return sizeCache.get(key);
}
const HARNESS_PATHS = new Set(['/', '/index.html', '/harness.js', '/favicon.ico', '/probe-worker.js']);
// cairn's Worker fetches the rest of its engine in the background once the engine is loaded: it
// is listed apart, not in what opening costs.
const BACKGROUND = /-rest\.wasm$/;
function downloadsFrom(log) {
  const seen = new Map();
  const background = new Map();
  for (const e of log) {
    if (e.status !== 200 || HARNESS_PATHS.has(e.path) || e.path.startsWith('/workloads/') || e.path.startsWith('/extra/')) continue;
    const into = BACKGROUND.test(e.path) ? background : seen;
    if (!into.has(e.path)) into.set(e.path, { path: e.path, ...sizes(e.file) });
  }
  const files = [...seen.values()];
  const total = files.reduce((t, f) => ({ raw: t.raw + f.raw, gzip: t.gzip + f.gzip, brotli: t.brotli + f.brotli }), { raw: 0, gzip: 0, brotli: 0 });
  return { files, total, background: [...background.values()] };
}

// ---------- engines ----------
function cairnBuild() {
  const dir = process.env.CAIRN_DIST ? resolve(process.env.CAIRN_DIST) : join(REPO, 'dist');
  const entry = join(dir, 'cairn.js');
  return { dir, entry, present: existsSync(entry) };
}
/** What the page passes to an engine's adapter: where a cairn build is served. */
const engineOptions = (engine) => (engine === 'cairn-pm' ? { entry: '/cairn/cairn.js', channel: 'postMessage' }
  : engine.startsWith('cairn') ? { entry: `/${engine}/cairn.js` } : {});
function permutations(xs) {
  if (xs.length <= 1) return [xs];
  return xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]));
}

// ---------- one sample ----------
async function runSample({ engine, workload, opts, server, profilesRoot, round }) {
  const profileDir = mkdtempSync(join(profilesRoot, `${engine}-${workload.name}-`));
  const logs = [];
  const pageOpts = { rows: opts.rows, uaMemory: opts.uaMemory, dbName: 'bench', engineOptions: engineOptions(engine) };
  const t0 = Date.now();
  let result, downloads = null, opfs = null;
  let context = null;
  const limit = (p) => withTimeout(p, SAMPLE_LIMIT_MS); // the limit covers the engine's work, not launches and probes
  try {
    server.log.length = 0;
    if (workload.kind === 'reopen') {
      context = await launch(profileDir);
      let page = await openPage(context, server.url, logs);
      const prep = await limit(page.evaluate(([e, o]) => window.bench.reopenPrepare(e, o), [engine, pageOpts]));
      await context.close(); context = null;
      if (!prep.ok) result = prep;
      else {
        context = await launch(profileDir); // same profile: warm HTTP cache, the database in OPFS
        server.log.length = 0;
        page = await openPage(context, server.url, logs);
        opfs = await opfsWait(page, opts);
        const r = await limit(page.evaluate(([e, o]) => window.bench.reopen(e, o), [engine, pageOpts]));
        // What the second session fetched again (it should be nothing but 304s or nothing at all).
        r.refetched = server.log.filter((x) => x.status === 200 && !HARNESS_PATHS.has(x.path)).map((x) => x.path);
        result = r;
      }
    } else {
      context = await launch(profileDir);
      const page = await openPage(context, server.url, logs);
      opfs = await opfsWait(page, opts);
      if (workload.kind === 'first-open') {
        server.log.length = 0;
        result = await limit(page.evaluate(([e, o]) => window.bench.firstOpen(e, o), [engine, pageOpts]));
        downloads = server.log.slice(); // sizes are computed after the run, outside the time limit
      } else {
        result = await limit(page.evaluate(([e, w, o]) => window.bench.sample(e, w, o), [engine, workload.url, pageOpts]));
      }
    }
  } catch (err) {
    result = err.timeout ? { ok: false, timeout: true, error: `abandoned: sample ran ${err.message}` } : { ok: false, phase: 'harness', error: String(err.message || err).split('\n')[0] };
  } finally {
    if (context) await closeQuietly(context);
    rmSync(profileDir, { recursive: true, force: true });
  }
  const s = toSample(engine, workload, round, result, t0, logs, downloads);
  s.opfsProbe = opfs;
  return s;
}

/** Before a sample, in its own page: time 4 KiB write + flush() in OPFS until it is at its usual latency (capped). */
async function opfsWait(page, opts) {
  if (opts.opfsBaseMs == null) return null;
  const t0 = Date.now();
  const readings = [];
  for (;;) {
    const r = await withTimeout(page.evaluate((n) => window.bench.opfsProbe(n), 3), 30_000).catch((e) => ({ error: e.message }));
    if (r.error) return { error: r.error, readings, waitedMs: Date.now() - t0 };
    const v = median(r.readings);
    readings.push(+v.toFixed(3));
    const ok = v <= Math.max(opts.opfsBaseMs * 1.5, opts.opfsBaseMs + 0.5);
    if (ok || Date.now() - t0 >= opts.flushWaitMs) return { readings, waitedMs: Date.now() - t0, recovered: ok };
    await sleep(200);
  }
}
async function opfsBaseline(server, profilesRoot) {
  const dir = mkdtempSync(join(profilesRoot, 'probe-'));
  const context = await launch(dir);
  try {
    const page = await openPage(context, server.url, []);
    const r = await page.evaluate((n) => window.bench.opfsProbe(n), 15);
    if (r.error) throw new Error(r.error);
    return { medianMs: +median(r.readings.slice(1)).toFixed(3), readings: r.readings.map((v) => +v.toFixed(3)) };
  } finally {
    await closeQuietly(context);
    rmSync(dir, { recursive: true, force: true });
  }
}

function toSample(engine, workload, round, result, t0, logs, downloads = null, grouped = false) {
  const status = result.ok ? 'ok' : result.timeout ? 'timeout' : ['setup', 'run', 'check'].includes(result.phase) ? 'unsupported' : 'error';
  return {
    workload: workload.name, engine, round, status, ...(grouped ? { grouped: true } : {}),
    ms: result.ok ? +result.ms.toFixed(3) : null,
    check: result.ok ? result.check : null,
    memory: result.memory || null,
    version: result.version || null,
    ...(result.channel ? { channel: result.channel } : {}),
    ...(result.rest ? { rest: result.rest } : {}),
    error: result.ok ? undefined : result.error, phase: result.phase,
    wallMs: Date.now() - t0,
    downloads,
    ...(result.refetched ? { refetched: result.refetched } : {}),
    logs: result.ok ? undefined : logs.slice(-10),
  };
}

// Grouped mode (the smoke default): every timed workload of one engine in one browser session and one
// database, tables dropped in between. A timed-out workload ends the session; the rest go on in a new one.
async function runGroup({ engine, workloads, opts, server, profilesRoot, round }) {
  const out = [];
  const remaining = workloads.slice();
  const pageOpts = { rows: opts.rows, uaMemory: opts.uaMemory, dbName: 'bench', engineOptions: engineOptions(engine) };
  const asError = (err) => (err.timeout ? { ok: false, timeout: true, error: `abandoned: sample ran ${err.message}` } : { ok: false, phase: 'harness', error: String(err.message || err).split('\n')[0] });
  while (remaining.length) {
    const profileDir = mkdtempSync(join(profilesRoot, `${engine}-group-`));
    const logs = [];
    let context = null;
    try {
      context = await launch(profileDir);
      const page = await openPage(context, server.url, logs);
      const t0 = Date.now();
      const o = await withTimeout(page.evaluate(([e, o]) => window.bench.groupOpen(e, o), [engine, pageOpts]), SAMPLE_LIMIT_MS);
      if (!o.ok) { for (const w of remaining.splice(0)) out.push(toSample(engine, w, round, o, t0, logs, null, true)); break; }
      while (remaining.length) {
        const w = remaining.shift();
        const opfs = await opfsWait(page, opts);
        const t1 = Date.now();
        let r;
        try {
          r = await withTimeout(page.evaluate(([u, o]) => window.bench.groupSample(u, o), [w.url, pageOpts]), SAMPLE_LIMIT_MS);
        } catch (err) {
          out.push(toSample(engine, w, round, asError(err), t1, logs, null, true));
          break;
        }
        out.push(Object.assign(toSample(engine, w, round, r, t1, logs, null, true), { opfsProbe: opfs }));
      }
      await withTimeout(page.evaluate(() => window.bench.groupClose()), 10_000).catch(() => {});
    } catch (err) {
      for (const w of remaining.splice(0)) out.push(toSample(engine, w, round, asError(err), Date.now(), logs, null, true));
    } finally {
      if (context) await closeQuietly(context);
      rmSync(profileDir, { recursive: true, force: true });
    }
  }
  return out;
}

// ---------- summary ----------
function summarize(workloads, engines, samples) {
  const summary = {};
  for (const w of workloads) {
    summary[w.name] = {};
    for (const e of engines) {
      const ss = samples.filter((s) => s.workload === w.name && s.engine === e);
      if (!ss.length) continue;
      const ok = ss.filter((s) => s.status === 'ok').map((s) => s.ms);
      const bad = ss.find((s) => s.status !== 'ok');
      // cairn: in how many samples the engine first called into its rest module in the timed part.
      const restRun = ss.filter((s) => s.rest?.loaded === 'run').length;
      summary[w.name][e] = {
        ...(ss.some((s) => s.rest) ? { restRun } : {}),
        n: ok.length, median: ok.length ? +median(ok).toFixed(3) : null,
        min: ok.length ? Math.min(...ok) : null, max: ok.length ? Math.max(...ok) : null,
        status: ok.length ? 'ok' : bad.status, ...(bad ? { note: `${bad.status}: ${bad.error}`.slice(0, 300) } : {}),
      };
    }
  }
  return summary;
}
function compareChecks(workloads, samples) {
  const mismatches = [];
  for (const w of workloads) {
    const by = new Map();
    for (const s of samples.filter((s) => s.workload === w.name && s.status === 'ok')) {
      const k = JSON.stringify(s.check);
      if (!by.has(k)) by.set(k, new Set());
      by.get(k).add(s.engine);
    }
    if (by.size > 1) mismatches.push({ workload: w.name, checks: [...by].map(([check, es]) => ({ check: JSON.parse(check), engines: [...es] })) });
  }
  return mismatches;
}
const fmtMs = (v) => (v == null ? '-' : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const kb = (b) => (b / 1024).toFixed(0) + ' KiB';
function printTable(workloads, engines, summary) {
  const base = engines.includes('cairn') && engines.includes('cairn-base');
  const mine = CAIRN_BUILDS.filter((e) => engines.includes(e));
  const head = ['workload', ...engines.map((e) => `${e} ms`), ...mine.map((e) => `${e}/best peer`), ...(base ? ['cairn/base'] : [])];
  const rows = [head];
  let marked = false;
  for (const w of workloads) {
    const s = summary[w.name];
    const cells = engines.map((e) => {
      if (!s[e]) return '-';
      if (s[e].status !== 'ok') return s[e].status;
      if (!s[e].restRun) return fmtMs(s[e].median);
      marked = true;
      return `${fmtMs(s[e].median)} r${s[e].restRun}`;
    });
    const peers = engines.filter((e) => !e.startsWith('cairn') && s[e]?.median != null).map((e) => s[e].median);
    for (const e of mine) cells.push(s[e]?.median != null && peers.length ? (s[e].median / Math.min(...peers)).toFixed(2) : '-');
    if (base) cells.push(s.cairn?.median != null && s['cairn-base']?.median != null ? (s.cairn.median / s['cairn-base'].median).toFixed(3) : '-');
    rows.push([w.name, ...cells]);
  }
  const widths = head.map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  for (const r of rows) console.log(r.map((c, i) => (i ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i]))).join('  '));
  if (marked) console.log('rN: in N samples the engine first called into cairn-rest.wasm during the timed part');
}
function printSizes(downloads) {
  const es = Object.keys(downloads);
  if (!es.length) return;
  console.log('\ndownload to open a database (every file fetched):');
  for (const e of es) {
    const t = downloads[e].total;
    const later = downloads[e].background ?? [];
    const note = later.length ? `; then in the background ${later.map((f) => `${f.path} ${kb(f.gzip)} gzip`).join(', ')}` : '';
    console.log(`  ${e.padEnd(7)} raw ${kb(t.raw).padStart(10)}  gzip -9 ${kb(t.gzip).padStart(10)}  brotli -q 11 ${kb(t.brotli).padStart(10)}  (${downloads[e].files.length} files${note})`);
  }
}

// ---------- main ----------
export async function main(argv = process.argv.slice(2)) {
  const opts = parse(argv);
  if (opts.help) { console.log(HELP); return 0; }
  SAMPLE_LIMIT_MS = opts.limitMs;
  const allWorkloads = await loadWorkloads(opts.extra);
  if (opts.list) { for (const w of allWorkloads) console.log(`${w.group.padEnd(8)} ${w.name.padEnd(20)} ${w.title}`); return 0; }
  const workloads = opts.workloads ? allWorkloads.filter((w) => opts.workloads.includes(w.name) || opts.workloads.includes(w.group)) : allWorkloads;
  const unknown = (opts.workloads || []).filter((n) => !allWorkloads.some((w) => w.name === n || w.group === n));
  if (unknown.length) { console.error(`unknown workloads: ${unknown.join(', ')} (see --list)`); return 2; }
  const badEngines = opts.engines.filter((e) => !ALL_ENGINES.includes(e));
  if (badEngines.length) { console.error(`unknown engines: ${badEngines.join(', ')}`); return 2; }

  const cairn = cairnBuild();
  let engines = opts.engines;
  const skipped = {};
  for (const e of CAIRN_BUILDS.filter((x) => engines.includes(x) && !cairn.present)) {
    skipped[e] = `no build at ${cairn.entry} (run \`npm run build\` at the repo root)`;
    console.log(`${e}: skipped, ${skipped[e]}`);
    engines = engines.filter((x) => x !== e);
  }
  if (!engines.length) { console.error('no engine to run'); return 2; }
  if (opts.base) {
    if (!existsSync(join(opts.base, 'cairn.js'))) { console.error(`--base: no build at ${join(opts.base, 'cairn.js')}`); return 2; }
    engines = [...engines, 'cairn-base'];
  }
  if (!existsSync(CHROMIUM)) { console.error(`no Chromium at ${CHROMIUM} (apt-get install -y chromium)`); return 2; }

  await build({ quiet: true });
  const mounts = { '/': BUILD_DIR, '/workloads/': join(HERE, 'workloads') };
  if (opts.extra) mounts['/extra/'] = opts.extra;
  if (cairn.present) mounts['/cairn/'] = cairn.dir;
  if (opts.base) mounts['/cairn-base/'] = opts.base;
  const server = await serve(mounts);
  const profilesRoot = mkdtempSync(join(tmpdir(), 'cairn-bench-'));

  const versions = { ...peerVersions() };
  if (opts.base) versions['cairn-base'] = 'the build given by --base';
  if (cairn.present) { try { versions.cairn = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).version; } catch { versions.cairn = 'unknown'; } }
  if (cairn.present) versions['cairn-pm'] = `${versions.cairn}, channel: 'postMessage'`;
  const env = {
    chromium: (() => { try { return execFileSync(CHROMIUM, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim(); } catch { return null; } })(),
    cpu: cpus()[0]?.model, cores: cpus().length, memGiB: +(totalmem() / 2 ** 30).toFixed(1),
    os: `${platform()} ${release()}`, node: process.version, engines: versions, engineRuntime: {},
    chromiumArgs: CHROME_ARGS, sampleLimitMs: SAMPLE_LIMIT_MS,
  };

  // Baselines: the machine's usual speed, before anything runs.
  const cpuBase = Math.min(...Array.from({ length: 5 }, cpuProbe));
  const flushReadings = Array.from({ length: 11 }, () => flushProbe(profilesRoot));
  const flushBase = median(flushReadings);
  const flushOk = (v) => v <= Math.max(flushBase * 1.5, flushBase + 0.5);
  let opfsBase = null;
  try { opfsBase = await opfsBaseline(server, profilesRoot); } catch (e) { console.log(`opfs probe unavailable: ${e.message}`); }
  opts.opfsBaseMs = opfsBase ? opfsBase.medianMs : null;
  const probes = { cpuBaselineMs: +cpuBase.toFixed(3), flushBaselineMs: +flushBase.toFixed(3), opfsBaselineMs: opts.opfsBaseMs, opfsBaselineReadings: opfsBase?.readings, rounds: [] };
  console.log(`cpu probe ${cpuBase.toFixed(1)} ms, disk flush probe ${flushBase.toFixed(2)} ms, OPFS flush probe ${opts.opfsBaseMs} ms; ${engines.join(', ')}; ${workloads.length} workloads x ${opts.samples} samples at ${opts.rows} rows`);

  const perms = permutations(engines);
  const samples = [];
  const giveUp = new Set(); // engine/workload pairs that timed out or failed: skip their remaining samples
  const t0 = Date.now();
  for (let round = 0; round < opts.samples; round++) {
    const cpu = await waitFor(cpuProbe, (v) => v <= cpuBase * 1.05, opts.cpuWaitMs, 1000);
    probes.rounds.push({ round, cpu });
    const order = perms[round % perms.length];
    const report = (s) => {
      samples.push(s);
      if (s.version && !env.engineRuntime[s.engine]) env.engineRuntime[s.engine] = s.version;
      const rest = s.rest?.loaded ? ` (rest loaded in ${s.rest.loaded})` : '';
      const tag = s.status === 'ok' ? `${fmtMs(s.ms)} ms${rest}` : `${s.status.toUpperCase()}: ${s.error}`;
      console.log(`[${round + 1}/${opts.samples}] ${s.workload.padEnd(20)} ${s.engine.padEnd(8)} ${tag}`);
      if (s.status !== 'ok') giveUp.add(`${s.engine}/${s.workload}`);
    };
    if (opts.grouped) {
      for (const engine of order) {
        for (const workload of workloads.filter((w) => w.kind !== 'timed')) {
          const flush = await waitFor(() => flushProbe(profilesRoot), flushOk, opts.flushWaitMs, 200);
          const s = await runSample({ engine, workload, opts, server, profilesRoot, round });
          s.probe = { flushMs: flush.readings.at(-1), flushWaitedMs: flush.waitedMs, flushRecovered: flush.recovered };
          report(s);
        }
        const timed = workloads.filter((w) => w.kind === 'timed' && !giveUp.has(`${engine}/${w.name}`));
        if (!timed.length) continue;
        const flush = await waitFor(() => flushProbe(profilesRoot), flushOk, opts.flushWaitMs, 200);
        for (const s of await runGroup({ engine, workloads: timed, opts, server, profilesRoot, round })) {
          s.probe = { flushMs: flush.readings.at(-1), flushWaitedMs: flush.waitedMs, flushRecovered: flush.recovered };
          report(s);
        }
      }
      continue;
    }
    for (const workload of workloads) {
      for (const engine of order) {
        const key = `${engine}/${workload.name}`;
        if (giveUp.has(key)) continue;
        const flush = await waitFor(() => flushProbe(profilesRoot), flushOk, opts.flushWaitMs, 200);
        const s = await runSample({ engine, workload, opts, server, profilesRoot, round });
        s.probe = { flushMs: flush.readings.at(-1), flushWaitedMs: flush.waitedMs, flushRecovered: flush.recovered };
        report(s);
      }
    }
  }
  await server.close();
  rmSync(profilesRoot, { recursive: true, force: true });

  const downloads = {};
  for (const e of engines) { const s = samples.find((x) => x.engine === e && x.downloads); if (s) downloads[e] = downloadsFrom(s.downloads); }
  for (const s of samples) delete s.downloads;
  const summary = summarize(workloads, engines, samples);
  const mismatches = compareChecks(workloads, samples);
  const cpuWaited = probes.rounds.reduce((t, r) => t + r.cpu.waitedMs, 0);
  const flushWaited = samples.reduce((t, s) => t + (s.probe?.flushWaitedMs || 0), 0);
  probes.cpuWaitedMs = cpuWaited;
  probes.cpuRoundsNotRecovered = probes.rounds.filter((r) => !r.cpu.recovered).length;
  probes.cpuSlowestMs = Math.max(...probes.rounds.flatMap((r) => r.cpu.readings));
  probes.flushWaitedMs = flushWaited;
  probes.flushSamplesNotRecovered = samples.filter((s) => s.probe && !s.probe.flushRecovered).length;
  probes.flushSlowestMs = Math.max(...samples.map((s) => s.probe?.flushMs ?? 0));
  const opfsSamples = samples.filter((s) => s.opfsProbe && s.opfsProbe.readings?.length);
  probes.opfsWaitedMs = opfsSamples.reduce((t, s) => t + s.opfsProbe.waitedMs, 0);
  probes.opfsSamplesNotRecovered = opfsSamples.filter((s) => !s.opfsProbe.recovered).length;
  probes.opfsSlowestMs = opfsSamples.length ? Math.max(...opfsSamples.map((s) => s.opfsProbe.readings.at(-1))) : null;

  const report = {
    name: basename(opts.out).replace(/\.json$/, ''), createdAt: new Date().toISOString(),
    options: { engines, skipped, workloads: workloads.map((w) => w.name), samples: opts.samples, rows: opts.rows, smoke: opts.smoke, grouped: opts.grouped, extra: opts.extra, base: !!opts.base },
    env, probes, workloads: workloads.map(({ url, ...w }) => w), downloads, summary,
    checks: { ok: mismatches.length === 0, mismatches }, samples, durationMs: Date.now() - t0,
  };
  const outFile = opts.out.endsWith('.json') ? resolve(opts.out) : join(HERE, 'results', `${opts.out}.json`);
  mkdirSync(dirname(outFile), { recursive: true });
  writeFileSync(outFile, JSON.stringify(report, null, 1) + '\n');

  console.log('\nmedian of ' + opts.samples + ' sample(s), ms:');
  printTable(workloads, engines, summary);
  printSizes(downloads);
  console.log(`\nprobes: cpu ${cpuBase.toFixed(1)} ms at start, ${probes.cpuSlowestMs.toFixed(1)} slowest, waited ${(cpuWaited / 1000).toFixed(0)} s, ${probes.cpuRoundsNotRecovered} round(s) began unrecovered; flush ${flushBase.toFixed(2)} ms usual, ${probes.flushSlowestMs.toFixed(2)} slowest, waited ${(flushWaited / 1000).toFixed(1)} s; OPFS flush ${opts.opfsBaseMs} ms usual, ${probes.opfsSlowestMs?.toFixed(2)} slowest, waited ${(probes.opfsWaitedMs / 1000).toFixed(1)} s, ${probes.opfsSamplesNotRecovered} sample(s) began unrecovered`);
  console.log(`wrote ${outFile} (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  if (mismatches.length) {
    console.error('\nFAIL: engines disagree on the checks of: ' + mismatches.map((m) => m.workload).join(', '));
    for (const m of mismatches) console.error('  ' + m.workload + ': ' + JSON.stringify(m.checks));
    return 1;
  }
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then((code) => { process.exitCode = code; }, (err) => { console.error(err); process.exitCode = 1; });
}
