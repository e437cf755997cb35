// The local-first suite's smoke pass: every (library variant, scenario) pair once, on a store of
// 50 records, every pair's check, a cold start and the wide nodes of 10 properties. It proves
// the adapters and the checks work; it asserts nothing about time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const cairnEntry = process.env.CAIRN_DIST ? join(resolve(process.env.CAIRN_DIST), 'cairn.js') : join(here, '..', '..', 'dist', 'cairn.js');
// What a library has no way to do in the page ("—" in the tables); every other pair must run.
const NONE = new Set(['yjs/increment', 'tinybase/increment', 'pouchdb/increment', 'rxdb/increment', 'gun/increment', 'rxdb/replicate', 'gun/replicate']);

test('local-first smoke pass: every library, scenario and wide-node store', { timeout: 5 * 60_000 }, () => {
  assert.ok(existsSync(cairnEntry), `no cairn build at ${cairnEntry}: run npm run build at the repo root`);
  const dir = mkdtempSync(join(tmpdir(), 'cairn-lf-smoke-'));
  try {
    const out = join(dir, 'smoke.json');
    const r = spawnSync(process.execPath, [join(here, 'run.mjs'), '--smoke', '--out', out],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LF_BUILD_DIR: join(dir, 'build') } });
    process.stdout.write(r.stdout.split('\n').filter((l) => l && !l.startsWith('[') && !l.startsWith('<')).join('\n') + '\n');
    const report = JSON.parse(readFileSync(out, 'utf8'));
    assert.deepEqual(report.failures.map((f) => `${f.lib}/${f.variant ?? f.size}/${f.scenario ?? f.op}: ${f.error}`), []);
    assert.equal(r.status, 0, 'runner exit status');
    const libs = new Set(report.scenarios.map((e) => e.lib));
    assert.deepEqual([...libs].sort(), ['automerge', 'cairn', 'gun', 'loro', 'pouchdb', 'rxdb', 'tinybase', 'yjs']);
    assert.deepEqual(report.scenarios.filter((e) => e.lib === 'cairn').map((e) => e.variant).filter((v, i, a) => a.indexOf(v) === i), ['memory', 'full', 'relaxed']);
    for (const e of report.scenarios) {
      const key = `${e.lib}/${e.scenario}`;
      if (NONE.has(key)) assert.equal(e.unsupported, true, `${key} is "—"`);
      else assert.ok(e.samples && e.samples[0].ops > 0, `${key} (${e.variant}) ran: ${JSON.stringify(e).slice(0, 300)}`);
    }
    assert.equal(report.scenarios.length, (3 + 7 * 2) * 6, 'every pair');
    assert.ok(report.cold.length >= 1 && report.cold.every((c) => c.ms > 0), 'a cold start');
    assert.deepEqual(report.wide.map((w) => `${w.lib}/${w.size}`), ['cairn/10', 'gun/10', 'sqlite/10', 'pglite/10']);
    for (const w of report.wide) for (const op of ['write', 'read', 'rewrite', 'update']) assert.ok(w.ops[op].samples[0].ops > 0, `${w.lib} ${op}`);
  } finally { rmSync(dir, { recursive: true, force: true }); }
});
