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
const cairnBuilt = existsSync(process.env.CAIRN_DIST ? join(resolve(process.env.CAIRN_DIST), 'client.js') : join(here, '..', 'dist', 'client.js'));
const engines = ['sqlite', 'pglite', ...(cairnBuilt ? ['cairn'] : [])];

test(`smoke pass: ${engines.join(', ')}`, { timeout: 10 * 60_000 }, () => {
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
        // The peers must run every workload; cairn may report one unsupported while its SQL grows.
        if (e !== 'cairn') assert.equal(s[0].status, 'ok', `${e} ${w.name}: ${s[0].error}`);
        else assert.ok(['ok', 'unsupported'].includes(s[0].status), `cairn ${w.name}: ${s[0].status} ${s[0].error}`);
      }
    }
    for (const e of ['sqlite', 'pglite']) assert.ok(report.downloads[e]?.total.raw > 0, `${e}: download sizes`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The cairn adapter path, against a stand-in client with cairn's interface (SQLite behind it), so the
// harness's cairn side is tested before cairn's own build exists.
test('cairn adapter against the stand-in client', { timeout: 5 * 60_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-mock-'));
  try {
    const out = join(dir, 'mock.json');
    const r = spawnSync(process.execPath, [join(here, 'run.mjs'), '--smoke', '--engines', 'cairn', '--out', out], {
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, CAIRN_DIST: join(here, 'test', 'fixtures', 'cairn-mock') },
    });
    assert.equal(r.status, 0, r.stderr);
    const report = JSON.parse(readFileSync(out, 'utf8'));
    for (const w of report.workloads) {
      const s = report.samples.find((x) => x.workload === w.name && x.engine === 'cairn');
      assert.equal(s?.status, 'ok', `cairn(mock) ${w.name}: ${s?.error}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
