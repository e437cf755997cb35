// The local-first benchmark's runner: builds the page, serves it (cross-origin isolated, with
// the repo's dist/ at /cairn/), and drives headless Chromium through playwright-core.
// Every (library variant, scenario) pair, every cold start and every wide-node size runs in a
// fresh browser profile. Writes results/localfirst-NAME.json; exits 1 if a check fails.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { serve } from '../server.mjs';
import { BUILD_DIR, build, bundleSizes, versions } from './build.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const CHROME_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export const LIBS = ['cairn', 'yjs', 'automerge', 'loro', 'tinybase', 'pouchdb', 'rxdb', 'gun'];
export const SCENARIOS = ['insert', 'update', 'read', 'increment', 'batch', 'replicate'];
export const WIDE_LIBS = ['cairn', 'gun', 'sqlite', 'pglite'];
export const WIDE_SIZES = [10, 1000, 10000];
const PARTS = ['scenarios', 'cold', 'size', 'wide'];

const { values: opt } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    libs: { type: 'string' }, scenarios: { type: 'string' }, parts: { type: 'string' },
    'wide-libs': { type: 'string' }, 'wide-sizes': { type: 'string' },
    variants: { type: 'string' }, samples: { type: 'string' }, out: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (opt.help) {
  console.log(`node run.mjs [--smoke] [--libs ${LIBS.join(',')}] [--scenarios ${SCENARIOS.join(',')}]
  [--parts ${PARTS.join(',')}] [--variants memory,disk,full,relaxed] [--wide-libs ${WIDE_LIBS.join(',')}]
  [--wide-sizes ${WIDE_SIZES.join(',')}] [--samples 5] [--out NAME|PATH]`);
  process.exit(0);
}
const list = (s, all) => (s ? s.split(',').map((x) => x.trim()).filter(Boolean) : all);
const libs = list(opt.libs, LIBS);
const scenarios = list(opt.scenarios, SCENARIOS);
const parts = list(opt.parts, PARTS);
const wideLibs = list(opt['wide-libs'], WIDE_LIBS);

const wideSizes = opt['wide-sizes'] ? list(opt['wide-sizes']).map(Number) : null;
const variantFilter = opt.variants ? list(opt.variants) : null;
// Smoke: one short sample per pair on a small store, a library's scenarios in one page.
const params = opt.smoke
  ? { seed: 50, batch: 50, warmupMs: 0, samples: 1, sampleMs: 20, cap: 20 }
  : { seed: 1000, batch: 1000, warmupMs: 1000, samples: Number(opt.samples || 5), sampleMs: 1000, cap: 5000 };
const wideParams = opt.smoke ? { samples: 1, warmup: 0, n: 2 } : { samples: Number(opt.samples || 5), warmup: 1 };
const wideSizesDefault = opt.smoke ? [10] : WIDE_SIZES;
const outPath = opt.out
  ? (opt.out.includes('/') || opt.out.endsWith('.json') ? resolve(opt.out) : join(here, '..', 'results', `localfirst-${opt.out}.json`))
  : join(here, '..', 'results', `localfirst-${opt.smoke ? 'smoke' : 'all'}.json`);
const cairnDist = resolve(process.env.CAIRN_DIST || join(here, '..', '..', 'dist'));
const PAGE_TIMEOUT = 180_000;

async function withBrowser(profile, f) {
  const ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROME_ARGS });
  try {
    const page = ctx.pages()[0] || (await ctx.newPage());
    page.setDefaultTimeout(PAGE_TIMEOUT);
    const logs = [];
    page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
    return await f(page, ctx, logs);
  } finally { await ctx.close().catch(() => {}); }
}

async function inFreshProfile(f) {
  const profile = mkdtempSync(join(tmpdir(), 'cairn-lf-'));
  try { return await f(profile); } finally { rmSync(profile, { recursive: true, force: true }); }
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
/** Rates (per second) of each sample, their median and spread. */
function summarize(samples) {
  const rates = samples.map((s) => (s.ops * 1000) / s.ms);
  return { median: median(rates), min: Math.min(...rates), max: Math.max(...rates), rates };
}

async function main() {
  if (!existsSync(CHROMIUM)) { console.error(`no Chromium at ${CHROMIUM} (apt-get install -y chromium)`); return 2; }
  const haveCairn = existsSync(join(cairnDist, 'cairn.js'));
  if (!haveCairn) console.error(`no cairn build at ${cairnDist} (npm run build at the repo root): cairn is left out`);
  await build({ quiet: true });
  const server = await serve({ '/cairn/': cairnDist, '/': BUILD_DIR });
  const url = `${server.url}/index.html`;
  const goto = async (page) => { await page.goto(url); await page.waitForFunction(() => !!window.lf); };
  const failures = [];
  const result = {
    when: new Date().toISOString(), smoke: opt.smoke, params, wideParams,
    env: {
      chromium: (() => { try { return execFileSync(CHROMIUM, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim(); } catch { return null; } })(),
      cpu: cpus()[0]?.model, cores: cpus().length, node: process.version,
    },
    versions: versions(), info: {}, scenarios: [], cold: [], size: null, wide: [],
  };
  const runLibs = libs.filter((l) => l !== 'cairn' || haveCairn);
  try {
    // Adapter descriptions (variants, labels), read once in a page.
    await inFreshProfile((p) => withBrowser(p, async (page) => {
      await goto(page);
      for (const lib of new Set([...runLibs, ...wideLibs.filter((l) => l !== 'cairn' || haveCairn)])) result.info[lib] = await page.evaluate((l) => window.lf.info(l), lib);
    }));
    if (haveCairn) result.versions.cairn = { cairn: JSON.parse((await import('node:fs')).readFileSync(join(here, '..', '..', 'package.json'), 'utf8')).version };
    const variantsOf = (lib) => Object.entries(result.info[lib].variants).filter(([v]) => !variantFilter || variantFilter.includes(v));
    const record = (entry, r) => {
      if (!r.ok) { failures.push({ ...entry, ...r }); console.log(`  FAIL ${entry.lib}/${entry.variant ?? entry.size}/${entry.scenario ?? entry.op ?? 'cold'}: ${r.phase}: ${r.error.split('\n')[0]}`); }
    };

    if (parts.includes('scenarios') && opt.smoke) {
      // Smoke: every pair in one page, each on a store of its own.
      await inFreshProfile((p) => withBrowser(p, async (page) => {
        await goto(page);
        for (const lib of runLibs) {
          for (const [variant, v] of variantsOf(lib)) {
            const base = { lib, variant, storage: v.storage, label: v.label, notAwaited: v.notAwaited || null };
            const out = await page.evaluate(([l, va, ns, o]) => window.lf.group(l, va, ns, o), [lib, variant, scenarios, params]);
            for (const sc of scenarios) push(base, sc, out[sc]);
          }
        }
      }));
    } else if (parts.includes('scenarios')) {
      for (const lib of runLibs) {
        for (const [variant, v] of variantsOf(lib)) {
          const base = { lib, variant, storage: v.storage, label: v.label, notAwaited: v.notAwaited || null };
          for (const sc of scenarios) {
            const r = await inFreshProfile((p) => withBrowser(p, async (page) => {
              await goto(page);
              return page.evaluate(([l, va, n, o]) => window.lf.scenario(l, va, n, o), [lib, variant, sc, params]);
            }));
            push(base, sc, r);
          }
        }
      }
    }
    function push(base, scenario, r) {
      const entry = { ...base, scenario };
      record(entry, r);
      if (r.ok && r.unsupported) entry.unsupported = true;
      else if (r.ok) Object.assign(entry, { samples: r.samples, ...summarize(r.samples) });
      else Object.assign(entry, { error: r.error, phase: r.phase });
      result.scenarios.push(entry);
      const fmt = entry.unsupported ? '—' : entry.median ? `${Math.round(entry.median)}/s [${Math.round(entry.min)}-${Math.round(entry.max)}]` : 'error';
      console.log(`${base.lib.padEnd(9)} ${base.variant.padEnd(8)} ${scenario.padEnd(10)} ${fmt}`);
    }

    if (parts.includes('cold')) {
      for (const lib of opt.smoke ? runLibs.slice(0, 1) : runLibs) {
        for (const [variant, v] of variantsOf(lib)) {
          if (v.storage !== 'disk' || (opt.smoke && variant === 'relaxed')) continue;
          const r = await inFreshProfile(async (p) => {
            const prep = await withBrowser(p, async (page) => { await goto(page); return page.evaluate(([l, va, o]) => window.lf.coldPrepare(l, va, o), [lib, variant, params]); });
            if (!prep.ok) return prep;
            // A new browser session with the HTTP cache off: the library is fetched and compiled again.
            return withBrowser(p, async (page, ctx) => {
              const cdp = await ctx.newCDPSession(page);
              await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
              await goto(page);
              return page.evaluate(([l, va, o]) => window.lf.cold(l, va, o), [lib, variant, params]);
            });
          });
          const entry = { lib, variant, label: v.label };
          record(entry, r);
          entry.ms = r.ok ? r.ms : null;
          if (!r.ok) entry.error = r.error;
          result.cold.push(entry);
          console.log(`cold      ${lib.padEnd(9)} ${variant.padEnd(8)} ${r.ok ? r.ms.toFixed(1) + ' ms' : 'error'}`);
        }
      }
    }

    if (parts.includes('size') && !opt.smoke) {
      result.size = await bundleSizes(cairnDist);
      for (const [lib, s] of Object.entries(result.size)) console.log(`size      ${lib.padEnd(9)} ${s.min} B min, ${s.gzip} B min+gzip`);
    }

    if (parts.includes('wide')) {
      const one = async (page, lib, size) => {
        const r = await page.evaluate(([l, s, o]) => window.lf.wide(l, s, o), [lib, size, wideParams]);
        const entry = { lib, size, label: result.info[lib]?.lib };
        record({ lib, size, op: 'wide' }, r);
        if (r.ok) {
          entry.n = r.n; entry.layout = r.layout; entry.ops = {};
          for (const [op, samples] of Object.entries(r.ops)) entry.ops[op] = { samples, ...summarize(samples) };
          console.log(`wide      ${lib.padEnd(9)} ${String(size).padEnd(6)} ${Object.entries(entry.ops).map(([op, x]) => `${op} ${x.median.toFixed(1)}/s`).join('  ')}`);
        } else { entry.error = r.error; console.log(`wide      ${lib.padEnd(9)} ${size} error`); }
        result.wide.push(entry);
      };
      const wl = wideLibs.filter((l) => l !== 'cairn' || haveCairn);
      if (opt.smoke) {
        await inFreshProfile((p) => withBrowser(p, async (page) => {
          await goto(page);
          for (const lib of wl) for (const size of wideSizes || wideSizesDefault) await one(page, lib, size);
        }));
      } else {
        for (const lib of wl) {
          for (const size of wideSizes || wideSizesDefault) await inFreshProfile((p) => withBrowser(p, async (page) => { page.setDefaultTimeout(900_000); await goto(page); await one(page, lib, size); }));
        }
      }
    }
  } finally { await server.close(); }

  result.failures = failures;
  result.ratios = ratios(result);
  mkdirSync(dirname(outPath), { recursive: true });
  writeFileSync(outPath, JSON.stringify(result, null, 1) + '\n');
  console.log(`wrote ${outPath}`);
  if (!opt.smoke) for (const l of result.ratios.notFirst) console.log(`cairn not first: ${l}`);
  return failures.length ? 1 : 0;
}

/** Where cairn is first and where it is not: its best variant for each (storage, scenario) against
 * the fastest other library, and for cold start and wide nodes. */
function ratios(result) {
  const notFirst = [];
  const rows = [];
  for (const storage of ['memory', 'disk']) {
    for (const sc of SCENARIOS) {
      const xs = result.scenarios.filter((e) => e.storage === storage && e.scenario === sc && e.median);
      const cairn = xs.filter((e) => e.lib === 'cairn');
      const peers = xs.filter((e) => e.lib !== 'cairn');
      if (!cairn.length || !peers.length) continue;
      const best = peers.reduce((a, b) => (b.median > a.median ? b : a));
      for (const c of cairn) {
        const ratio = c.median / best.median;
        rows.push({ storage, scenario: sc, variant: c.variant, cairn: c.median, best: best.lib, bestVariant: best.variant, bestMedian: best.median, ratio });
        if (ratio < 1) notFirst.push(`${storage} ${sc} (${c.variant}): ${ratio.toFixed(2)}x of ${best.lib}`);
      }
    }
  }
  const cold = result.cold.filter((e) => e.ms != null);
  for (const c of cold.filter((e) => e.lib === 'cairn')) {
    const peers = cold.filter((e) => e.lib !== 'cairn');
    if (!peers.length) continue;
    const best = peers.reduce((a, b) => (b.ms < a.ms ? b : a));
    const ratio = best.ms / c.ms;
    rows.push({ storage: 'disk', scenario: 'cold', variant: c.variant, cairn: c.ms, best: best.lib, bestMedian: best.ms, ratio });
    if (ratio < 1) notFirst.push(`cold start (${c.variant}): ${ratio.toFixed(2)}x of ${best.lib}`);
  }
  for (const size of WIDE_SIZES) {
    const xs = result.wide.filter((e) => e.size === size && e.ops);
    const c = xs.find((e) => e.lib === 'cairn');
    if (!c) continue;
    for (const op of Object.keys(c.ops)) {
      const peers = xs.filter((e) => e.lib !== 'cairn');
      if (!peers.length) continue;
      const best = peers.reduce((a, b) => (b.ops[op].median > a.ops[op].median ? b : a));
      const ratio = c.ops[op].median / best.ops[op].median;
      rows.push({ storage: 'wide', scenario: `${op} ${size}`, cairn: c.ops[op].median, best: best.lib, bestMedian: best.ops[op].median, ratio });
      if (ratio < 1) notFirst.push(`wide ${size} ${op}: ${ratio.toFixed(2)}x of ${best.lib}`);
    }
  }
  return { rows, notFirst };
}

process.exitCode = await main();
