// The smoke pass: one sample of every workload for every engine at 200 rows. It proves the harness,
// the adapters and the checks work; it asserts nothing about time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(dirname(fileURLToPath(import.meta.url)));
// cairn is built by the repo's test command before this runs (`npm run build`); without the build
// the smoke pass fails rather than quietly leaving cairn out.
const cairnEntry = process.env.CAIRN_DIST ? join(resolve(process.env.CAIRN_DIST), 'cairn.js') : join(here, '..', 'dist', 'cairn.js');
const engines = ['sqlite', 'pglite', 'cairn', 'cairn-pm'];

test(`smoke pass: ${engines.join(', ')}`, { timeout: 10 * 60_000 }, () => {
  assert.ok(existsSync(cairnEntry), `no cairn build at ${cairnEntry}: run npm run build at the repo root`);
  const dir = mkdtempSync(join(tmpdir(), 'cairn-smoke-'));
  try {
    const out = join(dir, 'smoke.json');
    const r = spawnSync(process.execPath, [join(here, 'run.mjs'), '--smoke', '--engines', engines.join(','), '--out', out], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    process.stdout.write(r.stdout.split('\n').filter((l) => !l.startsWith('[')).join('\n'));
    process.stderr.write(r.stderr);
    const report = JSON.parse(readFileSync(out, 'utf8'));
    assert.equal(report.checks.ok, true, 'engines disagree: ' + JSON.stringify(report.checks.mismatches));
    assert.equal(r.status, 0, 'runner exit status');
    const names = readdirSync(join(here, 'workloads')).filter((f) => f.endsWith('.mjs')).length;
    assert.equal(report.workloads.length, names, 'every workload module ran');
    for (const w of report.workloads) {
      for (const e of engines) {
        const s = report.samples.filter((x) => x.workload === w.name && x.engine === e);
        assert.equal(s.length, 1, `${e} ${w.name}: one sample`);
        assert.equal(s[0].status, 'ok', `${e} ${w.name}: ${s[0].error}`);
        if (w.kind !== 'timed' || !e.startsWith('cairn')) continue;
        // Both of cairn's channels were the ones asked for, and each sample says whether and
        // where the engine first called into the rest of itself.
        assert.equal(s[0].channel, e === 'cairn' ? 'sharedMemory' : 'postMessage', `${e} ${w.name}: channel`);
        assert.ok(s[0].rest && [null, 'earlier', 'setup', 'run', 'check'].includes(s[0].rest.loaded), `${e} ${w.name}: rest ${JSON.stringify(s[0].rest)}`);
      }
    }
    for (const e of ['sqlite', 'pglite']) assert.ok(report.downloads[e]?.total.raw > 0, `${e}: download sizes`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The report page on the committed 10,000-row run: it renders a chart per workload (and the
// startup and size charts), a bar per engine in each, and a screenshot is taken of it.
test('the report page renders the committed run', { timeout: 2 * 60_000 }, async () => {
  const { shot } = await import('../report-shot.mjs');
  const dir = mkdtempSync(join(tmpdir(), 'cairn-report-shot-'));
  try {
    const png = join(dir, 'report.png');
    const results = join(here, 'results', 'all-10k.json');
    const run = JSON.parse(readFileSync(results, 'utf8'));
    const state = await shot(results, png);
    assert.equal(state.rendered, 'true');
    assert.ok(state.charts >= run.workloads.length, `${state.charts} charts for ${run.workloads.length} workloads`);
    assert.ok(state.bars >= 3 * run.workloads.length, `${state.bars} bars`);
    assert.ok(readFileSync(png).length > 10_000, 'a screenshot was written');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
