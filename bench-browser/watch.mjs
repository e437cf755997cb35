// Live queries in headless Chromium (cross-origin isolated, so timers are fine-grained): over a
// 10,000-row table, single-row commits, 100 watched queries. Figures for the notes, never
// assertions. Uses the repo's dist/ (npm run build at the root) through the browser tests'
// harness.
//
//   node bench-browser/watch.mjs [--commits 200] [--rounds 3] [--out bench-browser/results/watch.json]
//
// - one: 100 queries, each a range of 100 rows by key; each commit updates one row, so one
//   query's result changes (all 100 run again) and one watcher is called.
// - all: 100 queries that read one row (each distinct by a parameter it selects); each commit
//   updates that row, so all 100 results change and 100 watchers are called.
//   For both: the time from the commit's promise resolving to each watcher's callback.
// - commit: the median single-row commit with no watcher, and with 100 watchers on another
//   table (their queries never run again), in alternating rounds.
// Each through the shared-memory channel and by postMessage.
import { writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { launch } from '../tests/browser/harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { values: opts } = parseArgs({
  options: {
    commits: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '3' },
    out: { type: 'string', default: join(here, 'results/watch.json') },
  },
});

const b = await launch();
try {
  const r = {};
  // Statements through shared memory (the page is cross-origin isolated), then by postMessage.
  for (const channel of ['sharedMemory', 'postMessage']) r[channel] = await b.page.evaluate(async ({ commits, rounds, channel }) => {
    const ROWS = 10_000;
    const WATCHERS = 100;
    const db = await cairn.open(`bench-watch-${channel}`, { channel: channel === 'postMessage' ? 'postMessage' : 'auto' });
    await db.exec(`CREATE TABLE big (id INTEGER PRIMARY KEY, grp INTEGER, v INTEGER);
                   CREATE TABLE other (id INTEGER PRIMARY KEY, v INTEGER);
                   INSERT INTO other VALUES (1, 0)`);
    await db.transaction(async (tx) => {
      const ins = tx.prepare('INSERT INTO big VALUES (?, ?, ?)');
      for (let i = 1; i <= ROWS; i++) await ins.run([i, i % 100, i]);
    });
    const quantile = (xs, q) => {
      const s = [...xs].sort((x, y) => x - y);
      return s[Math.min(s.length - 1, Math.floor(q * s.length))];
    };
    const summary = (xs) => ({ n: xs.length, median: quantile(xs, 0.5), p99: quantile(xs, 0.99), max: Math.max(...xs) });

    // Watches `WATCHERS` queries (`sql` with `params(i)`), then makes `commits` commits of `write`
    // and records, for each callback, the time since the commit's promise resolved. `expect` is
    // how many callbacks a commit brings. Through the shared-memory channel the commit's reply
    // and the notices come by different paths, so a callback may run before the promise
    // resolves: counted as 0 (and counted in `beforeResolve`).
    async function latency(sql, params, write, expect) {
      let got = 0;
      let wake = null;
      const stamps = [];
      const stops = [];
      let started = 0;
      for (let i = 0; i < WATCHERS; i++) {
        let first = true;
        stops.push(db.watch(sql, params(i), () => {
          if (first) {
            first = false;
            started++;
            return;
          }
          stamps.push(performance.now());
          if (++got === expect) wake?.();
        }));
      }
      await until('the watchers to start', () => started === WATCHERS, 60_000);
      const warm = 20;
      const all = [];
      const first = [];
      const last = [];
      let before = 0;
      for (let c = 0; c < commits + warm; c++) {
        got = 0;
        stamps.length = 0;
        const done = new Promise((res) => { wake = res; });
        await write(c);
        const t0 = performance.now();
        await done;
        if (c < warm) continue;
        const lat = stamps.map((t) => Math.max(0, t - t0));
        before += stamps.filter((t) => t < t0).length;
        all.push(...lat);
        first.push(Math.min(...lat));
        last.push(Math.max(...lat));
      }
      for (const s of stops) s();
      return { each: summary(all), firstOfCommit: summary(first), lastOfCommit: summary(last), beforeResolve: before };
    }

    const out = { rows: ROWS, watchers: WATCHERS, commits, channel: db.channel };
    out.one = await latency('SELECT count(*) AS n, sum(v) AS s FROM big WHERE id BETWEEN ? AND ?',
      (i) => [i * 100 + 1, i * 100 + 100], (c) => db.run('UPDATE big SET v = v + 1 WHERE id = ?', [1 + ((c * 7919) % ROWS)]), 1);
    out.all = await latency('SELECT v, ? AS k FROM big WHERE id = 1', (i) => [i], () => db.run('UPDATE big SET v = v + 1 WHERE id = 1'), WATCHERS);

    // Commit time, without watchers and with 100 on `other`, in alternating rounds.
    const commitTimes = async () => {
      const ts = [];
      for (let c = 0; c < commits; c++) {
        const t = performance.now();
        await db.run('UPDATE big SET v = v + 1 WHERE id = ?', [1 + ((c * 104729) % ROWS)]);
        ts.push(performance.now() - t);
      }
      return ts;
    };
    const base = [];
    const watched = [];
    const medians = { base: [], watched: [] };
    for (let round = 0; round < rounds; round++) {
      const b0 = await commitTimes();
      base.push(...b0);
      medians.base.push(quantile(b0, 0.5));
      const stops = [];
      let started = 0;
      for (let i = 0; i < WATCHERS; i++) stops.push(db.watch('SELECT v, ? AS k FROM other WHERE id = 1', [i], () => { started++; }));
      await until('the watchers on other', () => started === WATCHERS, 60_000);
      const w0 = await commitTimes();
      watched.push(...w0);
      medians.watched.push(quantile(w0, 0.5));
      for (const s of stops) s();
    }
    out.commit = { baseline: summary(base), withWatchersOnOtherTable: summary(watched), roundMedians: medians };
    out.commit.ratio = out.commit.withWatchersOnOtherTable.median / out.commit.baseline.median;
    await db.close();
    return out;
  }, { commits: Number(opts.commits), rounds: Number(opts.rounds), channel });
  const round = (x) => (typeof x === 'number' ? Math.round(x * 1000) / 1000 : x);
  const json = JSON.parse(JSON.stringify(r, (_, v) => round(v)));
  json.date = new Date().toISOString();
  json.chromium = b.context.browser?.()?.version?.() ?? null;
  json.command = `node ${relative(join(here, '..'), fileURLToPath(import.meta.url))} --commits ${opts.commits} --rounds ${opts.rounds}`;
  json.unit = 'ms';
  writeFileSync(opts.out, JSON.stringify(json, null, 2) + '\n');
  console.log(JSON.stringify(json, null, 2));
} finally {
  await b.close();
}
