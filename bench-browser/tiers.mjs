// A diagnostic, not a benchmark: how long each run of a statement takes in a fresh page, run after
// run, so that the first run's extra cost (the rest module, V8's lazy compile, baseline code that
// has not tiered up) shows beside the later runs'. V8's flags can be passed to tell those apart
// (`--js-flags=--liftoff-only`, `--no-liftoff`); they are for diagnosis only, never for a result.
//
//   node bench-browser/tiers.mjs [--dist DIR] [--rows N] [--runs N] [--samples N]
//        [--js-flags FLAGS] [--channel postMessage] [--sql FILE] [--trace] [--out FILE.json]
//   node bench-browser/tiers.mjs --first-open [--dist DIR] [--samples N]
//   node bench-browser/tiers.mjs --commit [--dist DIR] [--samples N] [--channel postMessage]
//
// `--first-open` times the page's steps of a first open (import, open, first query) and, with a
// build whose Worker logs `T <step> <epoch ms>` to the console, the Worker's steps between them.
// `--commit` parts a single-row commit (1,000 prepared inserts, each its own transaction): the
// same inserts in a database in memory (the round trip and the engine), on OPFS with durability
// 'relaxed' (and the writes) and 'full' (and the flush), beside the Worker's own 4 KiB write +
// flush on an OPFS sync access handle, timed alone.
//
// The statements default to a list of this file's own (none of them is a benchmark workload);
// `--sql FILE` reads one statement a line instead. Each sample is a fresh browser profile.
// `--trace` adds, per sample, where V8 spent its compile time while the statements ran.
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { serve } from './server.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const { values: o } = parseArgs({
  options: {
    dist: { type: 'string' }, rows: { type: 'string' }, runs: { type: 'string' }, samples: { type: 'string' },
    'js-flags': { type: 'string' }, channel: { type: 'string' }, sql: { type: 'string' }, out: { type: 'string' },
    'first-open': { type: 'boolean' }, commit: { type: 'boolean' }, trace: { type: 'boolean' },
  },
});
const dist = resolve(o.dist ?? join(HERE, '..', 'dist'));
const rows = Number(o.rows ?? 10000);
const runs = Number(o.runs ?? 5);
const samples = Number(o.samples ?? 3);
const SQL = o.sql ? readFileSync(o.sql, 'utf8').split('\n').map((s) => s.trim()).filter((s) => s && !s.startsWith('--')) : [
  'SELECT count(*) FROM t1 WHERE a > 100',
  'SELECT g, count(*), sum(b) FROM t1 GROUP BY g',
  'SELECT count(DISTINCT g) FROM t1',
  'SELECT id, c FROM t1 ORDER BY c DESC LIMIT 5',
  'SELECT sum(CASE WHEN b % 3 = 0 THEN a ELSE -a END) FROM t1',
  'SELECT count(*) FROM t1 WHERE b IN (SELECT a FROM t1 WHERE g = 7)',
  'SELECT max(length(c)), min(c) FROM t1 WHERE c LIKE \'%seven%\'',
  'SELECT t1.g, count(*) FROM t1 JOIN t1 AS u ON u.id = t1.b WHERE t1.g < 10 GROUP BY t1.g',
  'SELECT id FROM t1 WHERE g = 42 ORDER BY b LIMIT 3 OFFSET 20',
  'SELECT total(a * 1.5), avg(b) FROM t1 WHERE id % 7 = 1',
];

const site = mkdtempSync(join(tmpdir(), 'cairn-tiers-site-'));
writeFileSync(join(site, 'index.html'), '<!doctype html><meta charset="utf-8"><title>tiers</title>');
const server = await serve({ '/cairn/': dist, '/src/': join(HERE, 'src'), '/': site }, { cache: false });
const args = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
if (o['js-flags']) args.push(`--js-flags=${o['js-flags']}`);

if (o['first-open']) {
  const steps = {};
  for (let s = 0; s < samples; s++) {
    const profile = mkdtempSync(join(tmpdir(), 'cairn-tiers-'));
    const context = await chromium.launchPersistentContext(profile, { executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args });
    try {
      const page = context.pages()[0] || (await context.newPage());
      const marks = [];
      page.on('console', (m) => {
        const [t, step, at] = m.text().split(' ');
        if (t === 'T') marks.push([step, Number(at)]);
      });
      const fetched = [];
      page.on('requestfinished', (r) => { if (r.url().includes('/cairn/')) fetched.push([r.url().split('/').pop(), r.timing()]); });
      await page.goto(server.url + '/index.html');
      const r = await page.evaluate(async (channel) => {
        const at = () => performance.timeOrigin + performance.now();
        const t = [['start', at()]];
        const mod = await import('/cairn/cairn.js');
        t.push(['imported', at()]);
        const db = await mod.open('first', channel ? { channel } : {});
        t.push(['openResolved', at()]);
        await db.query('SELECT 1 AS one', []);
        t.push(['firstQuery', at()]);
        await db.close();
        return t;
      }, o.channel ?? null);
      const all = [...r, ...marks].sort((a, b) => a[1] - b[1]);
      const t0 = r[0][1];
      console.log(all.map(([k, v]) => `${k} ${(v - t0).toFixed(1)}`).join(', '));
      for (const [k, v] of all) (steps[k] ??= []).push(v - t0);
      for (const [f, tm] of fetched) console.log(`  ${f}: request ${(tm.startTime - t0).toFixed(1)}, response end +${tm.responseEnd.toFixed(1)}`);
    } finally {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    }
  }
  const med = (xs) => { const v = [...xs].sort((a, b) => a - b); return v[(v.length - 1) >> 1]; };
  console.log(`\nmedian ms from the page's start, ${samples} samples`);
  for (const [k, v] of Object.entries(steps).sort((a, b) => med(a[1]) - med(b[1]))) console.log(`${med(v).toFixed(1).padStart(8)}  ${k}`);
  await server.close();
  process.exit(0);
}

if (o.commit) {
  const parts = {};
  for (let s = 0; s < samples; s++) {
    const profile = mkdtempSync(join(tmpdir(), 'cairn-tiers-'));
    const context = await chromium.launchPersistentContext(profile, { executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args });
    try {
      const page = context.pages()[0] || (await context.newPage());
      await page.goto(server.url + '/index.html');
      const r = await page.evaluate(async (channel) => {
        const mod = await import('/cairn/cairn.js');
        const { t1Rows, T1_SCHEMA } = await import('/src/data.js');
        const out = {};
        // The flush alone, in a Worker of its own, as the bench's probe times it.
        const probe = new Worker(URL.createObjectURL(new Blob([`onmessage = async () => {
          const root = await navigator.storage.getDirectory();
          const h = await (await root.getFileHandle('probe', { create: true })).createSyncAccessHandle();
          const b = new Uint8Array(4096).fill(7), ts = [];
          for (let i = 0; i < 200; i++) { const t = performance.now(); h.write(b, { at: (i % 8) * 4096 }); h.flush(); ts.push(performance.now() - t); }
          // The same, each write past the end: the file grows at every flush.
          const grow = [];
          for (let i = 0; i < 200; i++) { const t = performance.now(); h.write(b, { at: (8 + i) * 4096 }); h.flush(); grow.push(performance.now() - t); }
          h.close(); ts.sort((x, y) => x - y); grow.sort((x, y) => x - y); postMessage([ts[100], grow[100]]);
        }`], { type: 'text/javascript' })));
        [out.flush, out.flushGrowing] = await new Promise((res) => { probe.onmessage = (e) => res(e.data); probe.postMessage(0); });
        probe.terminate();
        for (const [name, opts] of [[':memory:', {}], ['relaxed', { durability: 'relaxed' }], ['full', {}]]) {
          const db = await mod.open(name, channel ? { ...opts, channel } : opts);
          await db.exec(T1_SCHEMA);
          const st = await db.prepare('INSERT INTO t1 VALUES (?,?,?,?,?)');
          const rows = t1Rows(1000, 2);
          for (const row of rows.slice(0, 50)) await st.run(row.map((v, i) => (i < 2 ? v + 100000 : v)));
          const t = performance.now();
          for (const row of rows) await st.run(row);
          out[name] = (performance.now() - t) / rows.length;
          await st.finalize();
          await db.close();
        }
        return out;
      }, o.channel ?? null);
      console.log(Object.entries(r).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(', '));
      for (const [k, v] of Object.entries(r)) (parts[k] ??= []).push(v);
    } finally {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    }
  }
  const med = (xs) => { const v = [...xs].sort((a, b) => a - b); return v[(v.length - 1) >> 1]; };
  console.log(`\nmedian ms per insert of ${samples} samples; flush: one 4 KiB write + flush alone, in place and growing the file`);
  for (const [k, v] of Object.entries(parts)) console.log(`${med(v).toFixed(3).padStart(8)}  ${k}`);
  await server.close();
  process.exit(0);
}

const all = [];
// --trace: V8's compile events while the statements run (Chrome's tracing, through the page's
// CDP session), summed by thread, and the functions compiled on first call that took longest,
// with their size in cairn.wasm.
let cdp = null;
let stopTrace = null;
async function traceOn(page) {
  cdp = await page.context().newCDPSession(page);
  const events = [];
  cdp.on('Tracing.dataCollected', (e) => events.push(...e.value));
  await page.exposeFunction('startTrace', () => cdp.send('Tracing.start', {
    traceConfig: { includedCategories: ['v8.wasm', 'disabled-by-default-v8.wasm.detailed', 'v8'] }, transferMode: 'ReportEvents',
  }));
  stopTrace = async () => {
    const done = new Promise((r) => cdp.once('Tracing.tracingComplete', r));
    await cdp.send('Tracing.end');
    await done;
    return events;
  };
}
function report(events) {
  const threads = {};
  for (const e of events) if (e.ph === 'M' && e.name === 'thread_name') threads[`${e.pid}:${e.tid}`] = e.args.name;
  const sum = {};
  for (const e of events) {
    if (e.ph !== 'X' || !e.dur || !/wasm|Compile/.test(e.name)) continue;
    const k = `${threads[`${e.pid}:${e.tid}`] ?? e.tid} ${e.name}`;
    sum[k] ??= { n: 0, ms: 0 };
    sum[k].n++;
    sum[k].ms += e.dur / 1000;
  }
  console.log('  ms, events, thread and event (compile work while the statements ran):');
  for (const [k, v] of Object.entries(sum).sort((a, b) => b[1].ms - a[1].ms).slice(0, 8)) console.log(`  ${v.ms.toFixed(1).padStart(7)} ${String(v.n).padStart(5)}  ${k}`);
  const sizes = functionSizes(readFileSync(join(dist, 'cairn.wasm')));
  const lazy = events.filter((e) => e.name === 'wasm.CompileLazy').sort((a, b) => b.dur - a.dur).slice(0, 6);
  console.log(`  slowest first-call compiles: ${lazy.map((e) => `function ${e.args.func_index} (${sizes.get(e.args.func_index)} B) ${(e.dur / 1000).toFixed(1)} ms`).join(', ')}`);
}
/** Body size of each function of a wasm module, by function index. */
function functionSizes(b) {
  let p = 8;
  const u = () => { let r = 0, s = 0, x; do { x = b[p++]; r += (x & 127) * 2 ** s; s += 7; } while (x & 128); return r; };
  let imported = 0;
  const out = new Map();
  while (p < b.length) {
    const id = b[p++];
    const end = u() + p;
    if (id === 2) {
      for (let n = u(); n > 0; n--) {
        for (let k = 0; k < 2; k++) { const len = u(); p += len; }
        const kind = b[p++];
        if (kind === 0) { imported++; u(); } else if (kind === 1) { p++; if (b[p++] & 1) { u(); } u(); } else if (kind === 2) { if (b[p++] & 1) { u(); } u(); } else if (kind === 3) p += 2; else { p++; u(); }
      }
    }
    if (id === 10) for (let n = u(), i = 0; i < n; i++) { const len = u(); out.set(imported + i, len); p += len; }
    p = end;
  }
  return out;
}

for (let s = 0; s < samples; s++) {
  const profile = mkdtempSync(join(tmpdir(), 'cairn-tiers-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args });
  try {
    const page = context.pages()[0] || (await context.newPage());
    if (o.trace) await traceOn(page);
    await page.goto(server.url + '/index.html');
    const r = await page.evaluate(async ({ SQL, rows, runs, channel, trace }) => {
      const t0 = performance.now();
      const mod = await import('/cairn/cairn.js');
      const { t1Rows, T1_SCHEMA } = await import('/src/data.js');
      const db = await mod.open('tiers', channel ? { channel } : {});
      const openMs = performance.now() - t0;
      await db.exec(T1_SCHEMA);
      const data = t1Rows(rows);
      await db.transaction(async (tx) => {
        for (let i = 0; i < data.length; i += 200) {
          const chunk = data.slice(i, i + 200);
          await tx.run('INSERT INTO t1 VALUES ' + chunk.map(() => '(?,?,?,?,?)').join(','), chunk.flat());
        }
      });
      const loadMs = performance.now() - t0 - openMs;
      const restAtStart = (await db.memory()).restReady;
      if (trace) await window.startTrace();
      const times = [];
      for (const sql of SQL) {
        const ts = [];
        for (let i = 0; i < runs; i++) {
          const a = performance.now();
          await db.query(sql, []);
          ts.push(+(performance.now() - a).toFixed(2));
        }
        times.push(ts);
      }
      const m = await db.memory();
      await db.close();
      return { openMs, loadMs, restAtStart, restLoaded: m.restLoaded, wasmBytes: m.wasmBytes, times };
    }, { SQL, rows, runs, channel: o.channel ?? null, trace: !!o.trace });
    if (o.trace) report(await stopTrace());
    all.push(r);
    console.log(`sample ${s}: open ${r.openMs.toFixed(1)} ms, load ${r.loadMs.toFixed(0)} ms, rest ready at the first statement ${r.restAtStart}, loaded ${r.restLoaded}`);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
await server.close();
rmSync(site, { recursive: true, force: true });

const med = (xs) => { const v = [...xs].sort((a, b) => a - b); return v[(v.length - 1) >> 1]; };
console.log(`\nms per run, median of ${samples} samples (${rows} rows${o['js-flags'] ? `, --js-flags=${o['js-flags']}` : ''})`);
SQL.forEach((sql, q) => {
  const cols = [];
  for (let i = 0; i < runs; i++) cols.push(med(all.map((r) => r.times[q][i])).toFixed(2).padStart(8));
  console.log(`${cols.join('')}  ${sql.slice(0, 70)}`);
});
if (o.out) {
  mkdirSync(dirname(resolve(o.out)), { recursive: true });
  writeFileSync(resolve(o.out), JSON.stringify({ rows, runs, jsFlags: o['js-flags'] ?? null, channel: o.channel ?? null, sql: SQL, samples: all }, null, 1));
}
