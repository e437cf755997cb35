// Renders a bench-browser results JSON (bench-browser/results/*.json) as plain HTML and SVG.
// ?data=URL picks the file; the default is the committed 10,000-row run of the peers.
const COLORS = { cairn: '#d95f02', 'cairn-pm': '#e6ab02', sqlite: '#1b9e77', pglite: '#7570b3' };
// cairn over shared memory (the page is cross-origin isolated) and over postMessage (as in a page
// that is not), two engines of the run (bench-browser/run.mjs).
const NAMES = { cairn: 'cairn', 'cairn-pm': 'cairn, postMessage', sqlite: 'SQLite WASM', pglite: 'PGlite' };
const CAIRNS = ['cairn', 'cairn-pm'];
const GROUPS = [['create', 'Create'], ['read', 'Read'], ['update', 'Update'], ['delete', 'Delete'], ['schema', 'Schema'], ['app', 'Statements apps write']];
const SVG = 'http://www.w3.org/2000/svg';

const params = new URLSearchParams(location.search);
const dataUrl = params.get('data') || '../../bench-browser/results/all-10k.json';
const main = document.getElementById('report');

const el = (tag, attrs = {}, ...kids) => {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) (k === 'class' ? (n.className = v) : n.setAttribute(k, v));
  for (const k of kids) n.append(k);
  return n;
};
const svgEl = (tag, attrs = {}, text) => {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  if (text !== undefined) n.textContent = text;
  return n;
};
const color = (e) => COLORS[e] || '#999';
const name = (e) => NAMES[e] || e;
const fmtMs = (v) => (v == null ? '–' : v >= 1000 ? (v / 1000).toFixed(2) + ' s' : v >= 100 ? v.toFixed(0) + ' ms' : v >= 10 ? v.toFixed(1) + ' ms' : v.toFixed(2) + ' ms');
const fmtBytes = (b) => (b == null ? '–' : b >= 1 << 20 ? (b / (1 << 20)).toFixed(2) + ' MiB' : (b / 1024).toFixed(0) + ' KiB');
const med = (xs) => { const s = xs.filter((x) => x != null).sort((a, b) => a - b); const n = s.length; return n ? (n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2) : null; };

/**
 * One chart: a bar per engine, fastest first, on the chart's own linear scale from zero, on which the
 * slowest run reaches the full width; a faint bracket spans each engine's fastest to slowest run.
 */
function barChart(entries, fmt) {
  const W = 820, label = 110, value = 130, rowH = 24, pad = 6;
  const plotW = W - label - value;
  const ok = entries.filter((e) => e.median != null);
  const scaleMax = Math.max(...ok.map((e) => e.max ?? e.median), 0) || 1;
  const x = (v) => label + (v / scaleMax) * plotW;
  const sorted = [...ok].sort((a, b) => a.median - b.median).concat(entries.filter((e) => e.median == null));
  const H = sorted.length * rowH + pad * 2;
  const svg = svgEl('svg', { class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img' });
  svg.append(svgEl('line', { class: 'axis', x1: label, x2: label, y1: 0, y2: H }));
  sorted.forEach((e, i) => {
    const y = pad + i * rowH;
    svg.append(svgEl('text', { x: label - 8, y: y + rowH / 2 + 4, 'text-anchor': 'end', class: 'engine', fill: color(e.engine) }, name(e.engine)));
    if (e.median == null) {
      svg.append(svgEl('text', { x: label + 6, y: y + rowH / 2 + 4, class: 'dim' }, e.note || e.status || 'no result'));
      return;
    }
    const bw = Math.max(1, x(e.median) - label);
    svg.append(svgEl('rect', { x: label, y: y + 4, width: bw, height: rowH - 8, fill: color(e.engine), rx: 2 }));
    if (e.min != null && e.max != null && e.max > e.min) {
      const x0 = x(e.min), x1 = x(e.max), cy = y + rowH / 2;
      svg.append(svgEl('path', { class: 'bracket', d: `M${x0},${cy - 5}V${cy + 5}M${x0},${cy}H${x1}M${x1},${cy - 5}V${cy + 5}` }));
    }
    const tx = Math.max(x(e.max ?? e.median), x(e.median)) + 6;
    svg.append(svgEl('text', { x: tx, y: y + rowH / 2 + 4 }, fmt(e.median) + (e.extra ? '  ' + e.extra : '')));
  });
  return svg;
}

function entriesFor(data, workload) {
  const s = data.summary[workload] || {};
  return data.options.engines.filter((e) => s[e]).map((e) => ({ engine: e, ...s[e], extra: s[e].restRun ? `rest loaded in ${s[e].restRun} run${s[e].restRun > 1 ? 's' : ''}` : '' }));
}

function ratioLabel(data, workload) {
  const s = data.summary[workload] || {};
  const meds = Object.entries(s).filter(([, v]) => v.median != null);
  if (meds.length < 2) return '';
  const best = meds.reduce((a, b) => (b[1].median < a[1].median ? b : a));
  return best[0];
}

function legend(engines, data) {
  const l = el('p', { class: 'legend' });
  for (const e of engines) {
    const v = data.env.engineRuntime?.[e] ? ` (${data.env.engines?.[e] || ''}; ${data.env.engineRuntime[e]})` : data.env.engines?.[e] ? ` ${data.env.engines[e]}` : '';
    const sw = el('i'); sw.style.background = color(e);
    l.append(el('span', {}, sw, name(e) + v));
  }
  return l;
}

function render(data) {
  document.getElementById('status').remove();
  const engines = data.options.engines;
  const env = data.env;
  const date = data.createdAt.slice(0, 10);
  main.append(el('p', { class: 'meta' },
    `Measured on ${date} with headless ${env.chromium || 'Chromium'} on ${env.os}, ${env.cpu}, ${env.cores} logical CPUs, ${env.memGiB} GiB RAM. ` +
    `Each time is the median of ${data.options.samples} sample${data.options.samples > 1 ? 's' : ''} at ${data.options.rows.toLocaleString('en')} rows` +
    (data.options.smoke ? ' (smoke pass: one sample, few rows, workloads grouped per session; not a measurement).' : '.')));
  if (data.options.skipped && Object.keys(data.options.skipped).length) {
    main.append(el('p', { class: 'note' }, 'Not run: ' + Object.entries(data.options.skipped).map(([e, why]) => `${name(e)}, ${why}`).join('; ') + '.'));
  }
  if (!data.checks.ok) main.append(el('p', { class: 'warn' }, 'Engines disagreed on the checks of: ' + data.checks.mismatches.map((m) => m.workload).join(', ')));
  main.append(legend(engines, data));
  main.append(el('p', { class: 'note' }, 'Each workload is drawn to its own linear scale from zero, on which its slowest run reaches the full width. ' +
    'A bar is the median of an engine\'s runs; the faint bracket spans its fastest run to its slowest.'));

  // Download
  if (data.downloads && Object.keys(data.downloads).length) {
    main.append(el('h2', {}, 'Download'));
    main.append(el('p', {}, 'Every file a page fetched to open a database: JavaScript for the page and the Worker, WebAssembly, and PGlite\'s file system image; uncompressed, gzip -9 and Brotli -q 11.'));
    for (const [k, title] of [['raw', 'Uncompressed'], ['gzip', 'gzip -9'], ['brotli', 'Brotli -q 11']]) {
      main.append(el('h3', {}, title));
      main.append(barChart(Object.entries(data.downloads).map(([e, d]) => ({ engine: e, median: d.total[k] })), fmtBytes));
    }
    const t = el('table', {}, el('tr', {}, el('th', {}, 'file'), el('th', {}, 'raw'), el('th', {}, 'gzip -9'), el('th', {}, 'brotli -q 11')));
    for (const [e, d] of Object.entries(data.downloads)) {
      for (const f of d.files) t.append(el('tr', {}, el('td', {}, `${name(e)}: ${f.path}`), el('td', {}, fmtBytes(f.raw)), el('td', {}, fmtBytes(f.gzip)), el('td', {}, fmtBytes(f.brotli))));
    }
    const det = el('details', {}, el('summary', {}, 'Files fetched'), t);
    main.append(det);
  }

  // Workload groups
  const byGroup = new Map();
  for (const w of data.workloads) { if (!byGroup.has(w.group)) byGroup.set(w.group, []); byGroup.get(w.group).push(w); }
  const order = [['startup', 'Startup'], ...GROUPS, ...[...byGroup.keys()].filter((g) => g !== 'startup' && !GROUPS.some(([k]) => k === g)).map((g) => [g, g])];
  for (const [g, title] of order) {
    const ws = byGroup.get(g);
    if (!ws) continue;
    main.append(el('h2', {}, title));
    if (g === 'startup') main.append(el('p', {}, 'First open starts before the engine is fetched and ends when the first query on a new, empty database returns. Reopen runs in a new browser session on the same profile, with a warm HTTP cache: it loads the engine again, opens the populated database and counts its rows.'));
    for (const w of ws) {
      main.append(el('h3', {}, w.title));
      main.append(barChart(entriesFor(data, w.name), fmtMs));
    }
  }

  // Table of medians and ratios
  main.append(el('h2', {}, 'Medians and ratios'));
  const mine = CAIRNS.filter((e) => engines.includes(e));
  const hasCairn = mine.length > 0;
  main.append(el('p', {}, hasCairn ? 'Median (fastest–slowest run) per engine; the last columns are cairn\'s median over the fastest peer\'s (below 1: cairn is faster), over each channel. ' +
    '"rest N" marks an engine that first called into cairn-rest.wasm in the timed part of N runs.'
    : 'Median (fastest–slowest run) per engine; the last column is the slower engine\'s median over the fastest\'s.'));
  const head = el('tr', {}, el('th', {}, 'workload'), ...engines.map((e) => el('th', {}, name(e))),
    ...(hasCairn ? mine.map((e) => el('th', {}, `${name(e)} / best peer`)) : [el('th', {}, 'slowest / fastest')]));
  const table = el('table', {}, head);
  for (const w of data.workloads) {
    const s = data.summary[w.name] || {};
    const best = ratioLabel(data, w.name);
    const cells = engines.map((e) => {
      const v = s[e];
      if (!v) return el('td', {}, '–');
      if (v.median == null) return el('td', { class: 'slow', title: v.note || '' }, v.status);
      return el('td', { class: e === best ? 'best' : '' }, `${fmtMs(v.median)} (${fmtMs(v.min)}–${fmtMs(v.max)})${v.restRun ? ` rest ${v.restRun}` : ''}`);
    });
    const meds = engines.filter((e) => s[e]?.median != null);
    const peers = meds.filter((e) => !e.startsWith('cairn')).map((e) => s[e].median);
    const ratios = hasCairn
      ? mine.map((e) => (s[e]?.median != null && peers.length ? (s[e].median / Math.min(...peers)).toFixed(2) : '–'))
      : [meds.length > 1 ? (Math.max(...meds.map((e) => s[e].median)) / Math.min(...meds.map((e) => s[e].median))).toFixed(2) : '–'];
    table.append(el('tr', {}, el('td', {}, w.title), ...cells, ...ratios.map((r) => el('td', {}, r))));
  }
  main.append(table);

  // Memory
  main.append(el('h2', {}, 'Memory after each workload'));
  main.append(el('p', {}, 'WebAssembly memory of the engine (median over samples) and the page\'s JS heap (performance.memory); the Workers\' JS heaps are not reachable from Chromium\'s Worker scope.'));
  const mt = el('table', {}, el('tr', {}, el('th', {}, 'workload'), ...engines.flatMap((e) => [el('th', {}, `${name(e)} wasm`), el('th', {}, `${name(e)} page heap`)])));
  for (const w of data.workloads) {
    const cells = engines.flatMap((e) => {
      const ss = data.samples.filter((x) => x.workload === w.name && x.engine === e && x.memory);
      return [el('td', {}, fmtBytes(med(ss.map((x) => x.memory.wasmBytes)))), el('td', {}, fmtBytes(med(ss.map((x) => x.memory.pageHeap))))];
    });
    mt.append(el('tr', {}, el('td', {}, w.name), ...cells));
  }
  main.append(mt);

  // Method and probes
  const p = data.probes;
  main.append(el('h2', {}, 'How it was measured'));
  main.append(el('p', {}, 'Every sample launches Chromium with a fresh profile in a new temporary directory, removed afterwards, so each engine\'s OPFS is empty and its WebAssembly compiled afresh. ' +
    'Engines take turns within each round in an order that changes every round. Setup loads rows as multi-row INSERTs in one transaction and is not timed; only the workload is timed, with performance.now() in the page (cross-origin isolated, so the timer is precise). ' +
    'An untimed check (row counts, column sums, totals of the rows read) follows, and the runner fails if the engines disagree. A sample over 60 s is abandoned and reported.'));
  main.append(el('p', {}, `Probes: before each round the runner timed a short computation, ${p.cpuBaselineMs} ms at the start and ${p.cpuSlowestMs?.toFixed(1)} ms at its slowest; it waited ${(p.cpuWaitedMs / 1000).toFixed(0)} s in all for the CPU, and ${p.cpuRoundsNotRecovered} round(s) began before it had recovered. ` +
    `Before each sample it timed a 4 KiB write and fdatasync on the disk holding the profiles: usually ${p.flushBaselineMs} ms, ${p.flushSlowestMs?.toFixed(2)} ms at its slowest; it waited ${(p.flushWaitedMs / 1000).toFixed(1)} s in all, and ${p.flushSamplesNotRecovered} sample(s) began before the disk had recovered.` +
    (p.opfsBaselineMs != null ? ` In each sample's own page, before the timed part, a Worker timed a 4 KiB write and flush() on an OPFS sync access handle, the flush the engines pay at a commit: usually ${p.opfsBaselineMs} ms, ${p.opfsSlowestMs?.toFixed(2)} ms at its slowest; it waited ${(p.opfsWaitedMs / 1000).toFixed(1)} s in all, and ${p.opfsSamplesNotRecovered} sample(s) began before it had recovered.` : '')));
  main.append(el('p', { class: 'note' }, `Source: ${dataUrl}. Run took ${(data.durationMs / 60000).toFixed(1)} min. Engines: ` + Object.entries(env.engines || {}).map(([e, v]) => `${name(e)} ${v}`).join(', ') + '.'));
  document.body.dataset.rendered = 'true';
}

fetch(dataUrl).then((r) => { if (!r.ok) throw new Error(`${r.status} ${dataUrl}`); return r.json(); }).then(render, (err) => {
  document.getElementById('status').textContent = 'Could not load results: ' + err.message;
  document.body.dataset.rendered = 'error';
});
