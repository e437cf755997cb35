// Measures the round trip of a request to cairn's Worker beside a bare postMessage ping to an
// empty Worker, in the same page: over postMessage and over the shared-memory channel.
//
//   node worker/bench/roundtrip.mjs [--no-sql] [--n 2000] [--rounds 7] [--out FILE]
import { writeFileSync, mkdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { opt, runPage } from './page.mjs';

const out = await runPage('/worker/bench/roundtrip.html', {
  n: Number(opt('--n', 2000)),
  rounds: Number(opt('--rounds', 7)),
  sql: !process.argv.includes('--no-sql'),
});
out.chromium = execFileSync(process.env.CHROMIUM ?? '/usr/bin/chromium', ['--version']).toString().trim();
out.date = new Date().toISOString();
const base = out.results['bare postMessage ping'].median;
console.log(`${'case'.padEnd(36)}${'median µs'.padStart(10)}${'min'.padStart(8)}${'max'.padStart(8)}${'× ping'.padStart(8)}`);
for (const [k, v] of Object.entries(out.results)) {
  console.log(`${k.padEnd(36)}${v.median.toFixed(1).padStart(10)}${v.min.toFixed(1).padStart(8)}${v.max.toFixed(1).padStart(8)}${(v.median / base).toFixed(2).padStart(8)}`);
}
const file = opt('--out', 'bench-browser/results/roundtrip.json');
mkdirSync('bench-browser/results', { recursive: true });
writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
