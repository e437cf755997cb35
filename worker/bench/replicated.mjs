// What a replicated write costs where a database lives: in a dedicated Worker over OPFS, in
// headless Chromium. The same inserts into a plain table and into a REPLICATED one, both in the
// sync build (cairn-sync.wasm), beside the plain build (cairn.wasm) with the plain table; each
// sample a new database; the sides take turns. Medians, and the replicated table's time over the
// plain table's in the same build.
//
//   node worker/bench/replicated.mjs [--rounds 7] [--workloads alone-full,alone-relaxed,multirow] [--out FILE]
//
// Needs the package built (`node scripts/build.mjs`). Writes bench-browser/results/replicated.json.
import { writeFileSync, mkdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { opt, runPage } from './page.mjs';

const out = await runPage('/worker/bench/replicated.html', {
  rounds: Number(opt('--rounds', 7)),
  workloads: opt('--workloads', undefined)?.split(','),
});
out.chromium = execFileSync(process.env.CHROMIUM ?? '/usr/bin/chromium', ['--version']).toString().trim();
out.date = new Date().toISOString();
const plain = 'sync build, plain table';
const repl = 'sync build, replicated table';
const base = 'plain build, plain table';
console.log(`${'workload'.padEnd(16)}${'side'.padEnd(32)}${'median ms'.padStart(10)}${'min'.padStart(9)}${'max'.padStart(9)}`);
for (const [w, { sides }] of Object.entries(out.workloads)) {
  for (const [s, v] of Object.entries(sides)) {
    console.log(`${w.padEnd(16)}${s.padEnd(32)}${v.median.toFixed(2).padStart(10)}${v.min.toFixed(2).padStart(9)}${v.max.toFixed(2).padStart(9)}`);
  }
  const ratio = sides[repl].median / sides[plain].median;
  const build = sides[plain].median / sides[base].median;
  out.workloads[w].ratio = ratio;
  out.workloads[w].syncBuild = build;
  console.log(`${w.padEnd(16)}replicated / plain table ${ratio.toFixed(2)}x; sync build / plain build (plain table) ${build.toFixed(2)}x`);
}
const file = opt('--out', 'bench-browser/results/replicated.json');
mkdirSync('bench-browser/results', { recursive: true });
writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
