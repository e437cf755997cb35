// Measures the round trip of a request to cairn's Worker beside a bare postMessage ping to an
// empty Worker, in the same page: over postMessage and over the shared-memory channel.
//
//   node worker/bench/roundtrip.mjs [--no-sql] [--n 2000] [--rounds 7] [--out FILE]
import { writeFileSync, mkdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { launch } from '../../tests/browser/harness.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const b = await launch();
try {
  await b.page.goto(`${b.server.url}/worker/bench/roundtrip.html`);
  await b.page.waitForFunction(() => window.ready === true);
  const out = await b.page.evaluate((o) => window.run(o).catch((e) => { throw new Error(`${e.code}: ${e.message}`); }), {
    n: Number(opt('--n', 2000)),
    rounds: Number(opt('--rounds', 7)),
    sql: !args.includes('--no-sql'),
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
} finally {
  await b.close();
}
