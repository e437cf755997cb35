import { open, importDatabase } from '/dist/cairn.js';

const $ = (sel) => document.querySelector(sel);
const el = (tag, props = {}, ...children) => {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...children);
  return e;
};

let db = null;

/** Splits a script into statements at top-level semicolons (not inside quotes or comments). */
export function splitStatements(sql) {
  const out = [];
  let start = 0;
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    if (c === "'" || c === '"' || c === '`') {
      const q = c;
      i++;
      while (i < sql.length && !(sql[i] === q && sql[i + 1] !== q)) i += sql[i] === q ? 2 : 1;
      i++;
    } else if (c === '-' && sql[i + 1] === '-') {
      while (i < sql.length && sql[i] !== '\n') i++;
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      i = end < 0 ? sql.length : end + 2;
    } else if (c === ';') {
      out.push({ text: sql.slice(start, i), at: start });
      start = ++i;
    } else i++;
  }
  out.push({ text: sql.slice(start), at: start });
  return out.filter((s) => s.text.trim() !== '');
}

function table(columns, rows) {
  const t = el('table', { className: 'rows' });
  t.append(el('thead', {}, el('tr', {}, ...columns.map((c) => el('th', { textContent: c })))));
  const body = el('tbody');
  for (const row of rows) {
    body.append(el('tr', {}, ...row.map((v) => {
      if (v === null) return el('td', { className: 'null', textContent: 'NULL' });
      if (v instanceof Uint8Array) return el('td', { textContent: `x'${[...v].map((b) => b.toString(16).padStart(2, '0')).join('')}'` });
      return el('td', { className: typeof v === 'number' || typeof v === 'bigint' ? 'num' : '', textContent: String(v) });
    })));
  }
  t.append(body);
  return t;
}

/** Where in the whole script an error in one statement points, as line and column. */
function position(script, stmt, err) {
  if (err.line === undefined) return '';
  const before = script.slice(0, stmt.at).split('\n');
  const line = before.length - 1 + err.line;
  const column = err.line === 1 ? before[before.length - 1].length + err.column : err.column;
  const lines = script.split('\n');
  return `line ${line}, column ${column}\n${lines[line - 1] ?? ''}\n${' '.repeat(Math.max(0, column - 1))}^`;
}

async function runScript() {
  const script = $('#sql').value;
  const out = $('#output');
  out.replaceChildren();
  for (const stmt of splitStatements(script)) {
    const box = el('div', { className: 'result' });
    out.append(box);
    const t0 = performance.now();
    try {
      const res = await db.query(stmt.text, [], { rowMode: 'array' });
      const ms = performance.now() - t0;
      const n = res.columns.length;
      const rows = [];
      for (let r = 0; r < res.rowCount; r++) rows.push(res.values.slice(r * n, r * n + n));
      box.append(el('div', { className: 'head', textContent: `${stmt.text.trim()}  ·  ${ms.toFixed(2)} ms` }));
      if (n > 0) {
        box.append(table(res.columns, rows));
        box.append(el('div', { className: 'muted', textContent: `${res.rowCount} row${res.rowCount === 1 ? '' : 's'}` }));
      } else box.append(el('div', { className: 'muted', textContent: `${res.changes} change${res.changes === 1 ? '' : 's'}` }));
    } catch (e) {
      box.classList.add('failed');
      box.append(el('div', { className: 'head', textContent: `${stmt.text.trim()}  ·  ${(performance.now() - t0).toFixed(2)} ms` }));
      box.append(el('pre', { className: 'error', textContent: `${e.code ?? 'ERROR'}: ${e.message}\n${position(script, stmt, e)}`.trim() }));
      break;
    }
  }
  await showSchema();
}

async function showSchema() {
  const tables = await db.schema();
  const box = $('#schema');
  if (tables.length === 0) {
    box.textContent = 'none yet';
    return;
  }
  box.replaceChildren(...tables.map((t) => el('div', { className: 'schema-table' },
    el('strong', { textContent: `${t.name}` }), el('span', { className: 'muted', textContent: ` ${t.type}` }),
    el('code', { textContent: t.sql }))));
  box.classList.remove('muted');
}

async function openDb() {
  if (db) await db.close();
  const name = new FormData($('#run')).get('db');
  db = await open(String(name));
  $('#status').textContent = `${name} · ${db.channel} · ${db.isOwner ? 'this tab owns it' : 'through the owning tab'}`;
  await showSchema();
}

$('#go').addEventListener('click', runScript);
$('#sql').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    runScript();
  }
});
$('#run').addEventListener('submit', (e) => e.preventDefault());
$('#open').addEventListener('click', openDb);
$('#check').addEventListener('click', async () => {
  const problems = await db.check();
  $('#output').replaceChildren(el('pre', { textContent: problems.length ? problems.join('\n') : 'check: no problems found' }));
});
$('#export').addEventListener('click', async () => {
  const bytes = await db.export();
  const a = el('a', { href: URL.createObjectURL(new Blob([bytes])), download: `${db.name}.cairn` });
  a.click();
  URL.revokeObjectURL(a.href);
});
$('#import').addEventListener('change', async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  const name = file.name.replace(/\.cairn$/, '');
  try {
    if (db) await db.close();
    db = null;
    // Read as a stream: the page never holds the whole file.
    await importDatabase(name, file);
    $('#run').elements.db.value = name;
    await openDb();
  } catch (err) {
    $('#output').replaceChildren(el('pre', { className: 'error', textContent: `${err.code}: ${err.message}` }));
  }
});

await openDb();
document.body.dataset.ready = 'true';
