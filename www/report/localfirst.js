// Renders a local-first results JSON (bench-browser/results/localfirst-*.json): per scenario and
// storage a bar chart on a log scale (the libraries span orders of magnitude), tables, cold start,
// bundle sizes and wide nodes. ?data=URL picks the file.
const SVG = 'http://www.w3.org/2000/svg';
const COLORS = { cairn: '#d95f02', yjs: '#1b9e77', automerge: '#7570b3', loro: '#e7298a', tinybase: '#66a61e', pouchdb: '#e6ab02', rxdb: '#a6761d', gun: '#666', sqlite: '#1f78b4', pglite: '#6a3d9a' };
const SCENARIOS = [['insert', 'Insert a record', 'ops/s'], ['update', 'Update a field', 'ops/s'], ['read', 'Read a record', 'ops/s'],
  ['increment', 'Increment a counter', 'ops/s'], ['batch', 'Insert 1,000 at once', 'records/s'], ['replicate', 'Replicate the store', 'records/s']];
const params = new URLSearchParams(location.search);
const dataUrl = params.get('data') || '../../bench-browser/results/localfirst-all.json';
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
const fmt = (v) => (v == null ? '—' : v >= 1e6 ? (v / 1e6).toFixed(2) + 'M' : v >= 1e4 ? Math.round(v / 1e3) + 'k' : v >= 100 ? Math.round(v).toLocaleString('en') : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const fmtMs = (v) => (v == null ? '—' : v >= 1000 ? (v / 1000).toFixed(2) + ' s' : v >= 10 ? v.toFixed(0) + ' ms' : v.toFixed(1) + ' ms');
const fmtBytes = (b) => (b >= 1 << 20 ? (b / (1 << 20)).toFixed(2) + ' MiB' : (b / 1024).toFixed(0) + ' KiB');

/** Horizontal bars on a log scale, best first; rows: { key, name, sub, value, min, max }. */
function logChart(rows, { lowerIsBetter = false, show = fmt } = {}) {
  const ok = rows.filter((r) => r.value > 0).sort((a, b) => (lowerIsBetter ? a.value - b.value : b.value - a.value));
  const W = 820, label = 250, value = 90, rowH = 22;
  const lo = Math.min(...ok.map((r) => r.min || r.value)), hi = Math.max(...ok.map((r) => r.max || r.value));
  const l0 = Math.floor(Math.log10(lo)), l1 = Math.ceil(Math.log10(hi)) + (lo === hi ? 1 : 0);
  const x = (v) => label + ((Math.log10(v) - l0) / (l1 - l0 || 1)) * (W - label - value);
  const svg = svgEl('svg', { class: 'chart', width: W, height: ok.length * rowH + 18, viewBox: `0 0 ${W} ${ok.length * rowH + 18}` });
  for (let p = l0; p <= l1; p++) {
    svg.append(svgEl('line', { class: 'axis', x1: x(10 ** p), x2: x(10 ** p), y1: 0, y2: ok.length * rowH }));
    svg.append(svgEl('text', { x: x(10 ** p), y: ok.length * rowH + 13, 'text-anchor': 'middle', class: 'dim' }, fmt(10 ** p)));
  }
  ok.forEach((r, i) => {
    const y = i * rowH;
    svg.append(svgEl('text', { x: 0, y: y + 15, class: r.key === 'cairn' ? 'engine' : '' }, `${r.name} · ${r.sub}`.slice(0, 44)));
    svg.append(svgEl('rect', { x: label, y: y + 4, width: Math.max(1, x(r.value) - label), height: rowH - 8, fill: COLORS[r.key] || '#999' }));
    if (r.min && r.max) svg.append(svgEl('path', { class: 'bracket', d: `M${x(r.min)},${y + 6}v10M${x(r.min)},${y + 11}H${x(r.max)}M${x(r.max)},${y + 6}v10` }));
    svg.append(svgEl('text', { x: W - value + 6, y: y + 15 }, show(r.value)));
  });
  return svg;
}

function render(d) {
  document.getElementById('status').remove();
  const ver = (lib) => (d.versions[lib] ? Object.entries(d.versions[lib]).map(([p, v]) => `${p} ${v}`).join(', ') : '');
  const libName = (lib) => d.info[lib]?.lib || lib;
  main.append(el('p', { class: 'meta' }, `Measured ${d.when.slice(0, 10)} with ${d.env.chromium} on ${d.env.cpu}, ${d.env.cores} cores (a shared machine: read ratios, not absolutes). `
    + `${d.params.seed} records; ${d.params.warmupMs} ms warm-up, ${d.params.samples} samples of ${d.params.sampleMs} ms capped at ${d.params.cap} operations; median, and the spread of the samples.${d.smoke ? ' Smoke pass: not a measurement.' : ''}`));
  main.append(el('p', { class: 'meta' }, 'Versions: ' + Object.keys(d.versions).map((l) => `${libName(l)} (${ver(l)})`).join('; ') + '.'));
  const notFirst = d.ratios?.notFirst || [];
  if (notFirst.length) main.append(el('p', { class: 'note' }, 'Where cairn is not first: ' + notFirst.join('; ') + '.'));
  for (const storage of ['disk', 'memory']) {
    main.append(el('h2', {}, storage === 'disk' ? 'On disk (each library\'s own browser storage, every write awaited)' : 'In memory'));
    const table = el('table', {}, el('tr', {}, el('th', {}, 'Library'), ...SCENARIOS.map(([, t, u]) => el('th', {}, `${t} ${u}`))));
    const rowsOf = (sc) => d.scenarios.filter((e) => e.storage === storage && e.scenario === sc);
    const variants = [...new Set(d.scenarios.filter((e) => e.storage === storage).map((e) => `${e.lib}/${e.variant}`))];
    for (const v of variants) {
      const [lib, variant] = v.split('/');
      const first = d.scenarios.find((e) => e.lib === lib && e.variant === variant);
      const tr = el('tr', {}, el('td', {}, `${libName(lib)} · ${first.label}${first.notAwaited ? ' (not awaited)' : ''}`));
      for (const [sc] of SCENARIOS) {
        const e = rowsOf(sc).find((x) => x.lib === lib && x.variant === variant);
        const best = Math.max(...rowsOf(sc).map((x) => x.median || 0));
        tr.append(el('td', { class: e && e.median && e.median === best ? 'best' : '' }, e?.unsupported ? '—' : e?.median ? fmt(e.median) : 'error'));
      }
      table.append(tr);
    }
    main.append(table);
    for (const [sc, title, unit] of SCENARIOS) {
      const rows = rowsOf(sc).filter((e) => e.median).map((e) => ({ key: e.lib, name: libName(e.lib), sub: e.label, value: e.median, min: e.min, max: e.max }));
      if (!rows.length) continue;
      const none = rowsOf(sc).filter((e) => e.unsupported).map((e) => libName(e.lib));
      main.append(el('h3', {}, `${title}, ${storage === 'disk' ? 'on disk' : 'in memory'} (${unit}, log scale, higher is better)`), logChart(rows));
      if (none.length) main.append(el('p', { class: 'note' }, `Not shown ("—"): ${[...new Set(none)].join(', ')}.`));
    }
  }
  if (d.cold.length) {
    main.append(el('h2', {}, 'Cold start'), el('p', { class: 'note' }, 'A new browser session, HTTP cache off: load the library, open a store of 1,000 records on disk, read one (ms, log scale, lower is better).'));
    main.append(logChart(d.cold.filter((c) => c.ms).map((c) => ({ key: c.lib, name: libName(c.lib), sub: c.label, value: c.ms })), { lowerIsBetter: true, show: fmtMs }));
  }
  if (d.size) {
    main.append(el('h2', {}, 'Bundle size'), el('p', { class: 'note' }, 'What an app ships to keep records on the device and sync them: the adapter bundled alone by esbuild (minified, tree-shaken), wasm counted (inline or fetched). min+gzip, log scale, lower is better.'));
    main.append(logChart(Object.entries(d.size).map(([lib, s]) => ({ key: lib, name: libName(lib), sub: `${fmtBytes(s.min)} min`, value: s.gzip })), { lowerIsBetter: true, show: fmtBytes }));
  }
  if (d.wide.length) {
    main.append(el('h2', {}, 'Wide nodes'), el('p', { class: 'note' }, 'Nodes of 10, 1,000 and 10,000 properties on disk: write n nodes, read them, rewrite them whole, update one property on each (n = 1,000 / 100 / 10), one awaited operation at a time. Nodes/s, log scale, higher is better.'));
    for (const size of [...new Set(d.wide.map((w) => w.size))]) {
      for (const op of ['write', 'read', 'rewrite', 'update']) {
        const rows = d.wide.filter((w) => w.size === size && w.ops).map((w) => ({ key: w.lib, name: w.label || w.lib, sub: w.layout, value: w.ops[op].median, min: w.ops[op].min, max: w.ops[op].max }));
        if (rows.length) main.append(el('h3', {}, `${size} properties: ${op === 'update' ? 'update one property' : op}`), logChart(rows));
      }
    }
  }
  document.body.dataset.rendered = 'true';
}

fetch(dataUrl).then((r) => { if (!r.ok) throw new Error(`${r.status} ${dataUrl}`); return r.json(); }).then(render, (err) => {
  document.getElementById('status').textContent = 'Could not load results: ' + err.message;
  document.body.dataset.rendered = 'false';
});
