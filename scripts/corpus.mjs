// The corpus the build's split profile runs (scripts/split.mjs, docs/size.md "The profile"): SQL
// that users write, drawn from the repository's own tests and examples, never from the browser
// benchmark that judges the split (bench-browser/workloads).
//
// Sources, each a database of its own, statements in file order:
// - the differential corpus (crates/sql/testscripts/diff/*.sql, checked against SQLite),
// - the golden SQL scripts (crates/sql/testscripts/sql/*.txt, each case's input),
// - the to-do example (examples/todo/src/index.js) and the README's example, with their parameters.
// Of those, typical() keeps what an ordinary application runs (tables and indexes, the four
// writes, SELECT with its joins, subqueries, aggregates, ORDER BY / LIMIT, transactions);
// EXPLAIN, ALTER TABLE, PRAGMA and the schema tables, WITH and compound selects,
// savepoints, full-text search, the date, JSON, window and string-aggregate functions and the
// rarer ones are left to the rest of the engine. Statements that fail are left out too
// (split.mjs runs the corpus once to find them): the code that builds error messages belongs
// in the rest.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** Statements outside what an ordinary application runs: they go to cairn-rest.wasm. */
const RARE = [
  /^\s*(EXPLAIN|ALTER|PRAGMA|VACUUM|ANALYZE|REINDEX|ATTACH|DETACH)\b/i,
  /\bpragma_\w+\s*\(/i,
  /\bsqlite_(schema|master|temp_schema|temp_master|version)\b/i,
  /\bREPLICATED\b/i,
  /\bGLOB\b/i,
  // Compound selects and common table expressions, and the date and time functions: SQL that
  // apps write less often than the rest, left out to hold the opening download to its budget
  // (docs/size.md).
  /^\s*WITH\b/i,
  /\b(UNION|INTERSECT|EXCEPT)\b/i,
  /\b(date|time|datetime|julianday|strftime|unixepoch)\s*\(/i,
  // JSON and window functions likewise: apps that use them meet them once the rest is in, a
  // moment after open.
  /\bjson\w*\s*\(|->/i,
  /\bOVER\b|\bWINDOW\s+\w+\s+AS\b|\bFILTER\s*\(/i,
  // Full-text search, likewise.
  /\bVIRTUAL\s+TABLE\b|\bMATCH\b|\b(bm25|highlight|snippet)\s*\(/i,
  // Savepoints (nested transactions) and the string aggregates.
  /^\s*(SAVEPOINT|RELEASE)\b|^\s*ROLLBACK\s+(TRANSACTION\s+)?TO\b/i,
  /\b(group_concat|string_agg)\s*\(/i,
  // LIKE ... ESCAPE, NULLS FIRST / LAST and iif(): rarer spellings of what apps write.
  /\bESCAPE\b|\bNULLS\s+(FIRST|LAST)\b|\biif\s*\(/i,
  /\b(hex|unhex|quote|zeroblob|randomblob|random|printf|format|char|unicode|soundex|likelihood|likely|unlikely|typeof|total_changes|changes|last_insert_rowid|instr|ltrim|rtrim)\s*\(/i,
];

/** Whether `sql` is among the statements of an ordinary application (module comment). */
export const typical = (sql) => !RARE.some((re) => re.test(sql));

/** Statements of a script: each ends with ';' at the end of a line; `--` lines are comments
 * (the differential tests' own rule, crates/sql/tests/differential.rs). */
function statements(text) {
  const out = [];
  let cur = '';
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.trimStart().startsWith('--')) continue;
    cur += `${line}\n`;
    if (line.trimEnd().endsWith(';')) {
      out.push(cur.trim().replace(/;$/, ''));
      cur = '';
    }
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}

/** Statements of a golden script's case: split at each ';' outside quotes (a case may hold
 * several on one line, as crates/sql/tests/golden.rs's parser reads them). */
function splitAtSemicolons(text) {
  const out = [];
  let cur = '';
  let quote = null;
  for (const ch of text) {
    if (quote) {
      if (ch === quote) quote = null;
    } else if (ch === "'" || ch === '"') quote = ch;
    else if (ch === ';') {
      if (cur.trim()) out.push(cur.trim());
      cur = '';
      continue;
    }
    cur += ch;
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}

/** The SQL string literals of JavaScript source, with the array literal after each (its parameters). */
function callsIn(source) {
  const out = [];
  const re = /\.(exec|run|query|get|all|prepare)\(\s*(['`])([\s\S]*?)\2\s*(?:,\s*(\[[^\]]*\]))?/g;
  for (const m of source.matchAll(re)) {
    const sql = m[3].replace(/\s+/g, ' ').trim();
    if (!/^(CREATE|INSERT|UPDATE|DELETE|SELECT|WITH|BEGIN|COMMIT|ROLLBACK)\b/i.test(sql) || sql.includes('${')) continue;
    const holes = (sql.match(/\?/g) || []).length;
    let params = [];
    try {
      params = m[4] ? JSON.parse(m[4].replace(/'/g, '"')) : [];
    } catch {
      params = []; // not a literal (a variable's value): filled in below
    }
    for (let i = params.length; i < holes; i++) params.push(1);
    out.push({ sql, params: params.slice(0, holes), call: m[1] });
  }
  return out;
}

const plainStatements = (list) => list.map((sql) => ({ sql, params: [] }));

/** Every source of the corpus: [{ source, statements: [{ sql, params }] }], each a database. */
export function sources(root) {
  const out = [];
  const dir = (d, ext) => readdirSync(join(root, d)).filter((f) => f.endsWith(ext)).sort().map((f) => join(d, f));
  for (const f of dir('crates/sql/testscripts/diff', '.sql')) {
    out.push({ source: f, statements: plainStatements(statements(readFileSync(join(root, f), 'utf8'))) });
  }
  for (const f of dir('crates/sql/testscripts/sql', '.txt')) {
    const cases = readFileSync(join(root, f), 'utf8').split('\n===\n').map((c) => c.split('\n---\n')[0]);
    out.push({ source: f, statements: plainStatements(cases.flatMap(splitAtSemicolons)) });
  }
  const readme = readFileSync(join(root, 'README.md'), 'utf8').match(/```js\n[\s\S]*?```/g) || [];
  out.push({ source: 'README.md', statements: callsIn(readme.join('\n')) });
  out.push({ source: 'examples/todo/src/index.js', statements: callsIn(readFileSync(join(root, 'examples/todo/src/index.js'), 'utf8')) });
  return out;
}

const normal = (sql) => sql.replace(/\s+/g, ' ').replace(/\s*;\s*$/, '').trim().toLowerCase();

/** The statements of the browser benchmark's workloads, normalised: the corpus must hold none. */
export function benchStatements(root) {
  const dir = join(root, 'bench-browser/workloads');
  const exact = new Set();
  const shapes = [];
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.mjs'))) {
    const src = readFileSync(join(dir, f), 'utf8');
    for (const m of src.matchAll(/(['`])((?:SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|WITH)\b[\s\S]*?)\1/gi)) {
      const s = normal(m[2]);
      if (!s.includes('${')) exact.add(s);
      else shapes.push(new RegExp(`^${s.split(/\$\{[^}]*\}/).map((p) => p.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&')).join('.*')}$`));
    }
  }
  return (sql) => exact.has(normal(sql)) || shapes.some((re) => re.test(normal(sql)));
}

/** The corpus: the typical statements of every source, less any the benchmark holds. */
export function corpus(root) {
  const inBench = benchStatements(root);
  return sources(root).map(({ source, statements: list }) => ({
    source,
    statements: list.filter(({ sql }) => typical(sql) && !inBench(sql)),
  }));
}
