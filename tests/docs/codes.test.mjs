// Every error code the engine, the Worker or the client can emit has a row in the table of
// docs/protocol.md ("Error codes"); every code the relay sends or exits with has one in
// docs/relay.md ("Error codes"). The codes are read from the sources by pattern, so the test
// follows files as they move between modules:
//   Rust (every .rs under crates/*/src): the string literals of a `fn code` or `fn as_str`
//     that returns `&'static str` (the match arms of each error enum), the first argument of
//     `Error::Sync("...", ..)` (the replication layer's own codes), and the first argument of
//     `error("...", ..)` (the wasm entry's codes);
//   JavaScript (every .js under worker/, but its benchmarks): every upper-case string literal,
//     minus the few that are not codes (IGNORED_JS).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const CODE = /^[A-Z][A-Z0-9_]{1,}$/;
// Upper-case literals in worker/ that are not error codes: SQL sent by the client, an HTTP method,
// Node.js's error numbers that the Node Worker maps to codes.
const IGNORED_JS = new Set(['BEGIN', 'COMMIT', 'ROLLBACK', 'GET', 'ENOENT', 'EISDIR', 'EEXIST', 'EPERM']);

function walk(dir, ext, skip = () => false) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (skip(path)) continue;
    if (statSync(path).isDirectory()) out.push(...walk(path, ext, skip));
    else if (name.endsWith(ext)) out.push(path);
  }
  return out;
}

/** The text from `open` (an index of `{`) to its matching `}`, skipping strings and comments. */
function block(src, open) {
  let depth = 0;
  for (let i = open; i < src.length; i++) {
    const c = src[i];
    if (c === '/' && src[i + 1] === '/') i = src.indexOf('\n', i);
    else if (c === '"') {
      for (i++; src[i] !== '"'; i++) if (src[i] === '\\') i++;
    } else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return src.slice(open, i + 1);
    if (i < 0) break;
  }
  throw new Error('unbalanced braces');
}

/** code -> [where it is emitted], for the Rust sources of the crates `which` accepts. */
export function rustCodes(which) {
  const codes = new Map();
  const add = (code, where) => {
    if (!CODE.test(code)) return;
    if (!codes.has(code)) codes.set(code, []);
    codes.get(code).push(where);
  };
  for (const crate of readdirSync(join(root, 'crates'))) {
    if (!which(crate)) continue;
    const src = join(root, 'crates', crate, 'src');
    try {
      statSync(src);
    } catch {
      continue;
    }
    for (const file of walk(src, '.rs')) {
      const text = readFileSync(file, 'utf8');
      const rel = relative(root, file);
      for (const m of text.matchAll(/fn (code|as_str)\s*\([^)]*\)\s*->\s*&'static str\s*\{/g)) {
        const body = block(text, m.index + m[0].length - 1);
        for (const s of body.matchAll(/"([^"\\]*)"/g)) add(s[1], `${rel}: fn ${m[1]}`);
      }
      for (const m of text.matchAll(/\bError::Sync\(\s*"([^"]*)"/g)) add(m[1], `${rel}: Error::Sync`);
      for (const m of text.matchAll(/\berror\(\s*"([^"]*)"/g)) add(m[1], `${rel}: error(..)`);
    }
  }
  return codes;
}

export function jsCodes() {
  const codes = new Map();
  const dir = join(root, 'worker');
  for (const file of walk(dir, '.js', (p) => relative(dir, p) === 'bench')) {
    const rel = relative(root, file);
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, i) => {
      const code = line.replace(/^\s*(\/\/|\*|\/\*).*$/, '');
      for (const m of code.matchAll(/(['"])([A-Z][A-Z0-9_]{2,})\1/g)) {
        if (IGNORED_JS.has(m[2])) continue;
        if (!codes.has(m[2])) codes.set(m[2], []);
        codes.get(m[2]).push(`${rel}:${i + 1}`);
      }
    });
  }
  return codes;
}

/** The codes in the first column of the tables under the `## ...Error codes` heading of `doc`. */
export function documented(doc) {
  const text = readFileSync(join(root, doc), 'utf8');
  const start = text.search(/^## (\d+\. )?Error codes/m);
  assert.ok(start >= 0, `${doc} has no "Error codes" section`);
  const rest = text.slice(start + 3);
  const next = rest.search(/^## /m);
  const section = next < 0 ? rest : rest.slice(0, next);
  const codes = new Set();
  for (const line of section.split('\n')) {
    if (!line.startsWith('|')) continue;
    const first = line.split('|')[1];
    for (const m of first.matchAll(/`([A-Z][A-Z0-9_]+)`/g)) codes.add(m[1]);
  }
  return codes;
}

function missing(emitted, table) {
  return [...emitted]
    .filter(([code]) => !table.has(code))
    .map(([code, where]) => `  ${code} (emitted at ${[...new Set(where)].join(', ')})`);
}

test('every code the engine, the Worker and the client emit is in docs/protocol.md', () => {
  const table = documented('docs/protocol.md');
  const rust = rustCodes((crate) => crate !== 'relay');
  const js = jsCodes();
  // Guards against a pattern that silently stops matching after a move.
  assert.ok(rust.size >= 40, `only ${rust.size} codes found in crates/*/src: has error.rs changed shape?`);
  assert.ok(js.size >= 10, `only ${js.size} codes found in worker/: has the Worker changed shape?`);
  const gaps = [...missing(rust, table), ...missing(js, table)];
  assert.ok(gaps.length === 0, `codes missing from the table in docs/protocol.md ("Error codes"):\n${gaps.join('\n')}`);
});

test('every code the relay emits is in docs/relay.md', () => {
  const table = documented('docs/relay.md');
  const relay = rustCodes((crate) => crate === 'relay');
  assert.ok(relay.size >= 8, `only ${relay.size} codes found in crates/relay/src`);
  const gaps = missing(relay, table);
  assert.ok(gaps.length === 0, `codes missing from the table in docs/relay.md ("Error codes"):\n${gaps.join('\n')}`);
});

test("the client's types list exactly the codes of docs/protocol.md (CairnErrorCode)", () => {
  const dts = readFileSync(join(root, 'worker/cairn.d.ts'), 'utf8');
  const m = dts.match(/export type CairnErrorCode =([^;]*);/);
  assert.ok(m, 'worker/cairn.d.ts has no `export type CairnErrorCode = ...;`');
  const union = new Set([...m[1].matchAll(/'([A-Z][A-Z0-9_]+)'/g)].map((x) => x[1]));
  const table = documented('docs/protocol.md');
  const absent = [...table].filter((c) => !union.has(c));
  const extra = [...union].filter((c) => !table.has(c));
  assert.deepEqual({ absent, extra }, { absent: [], extra: [] },
    'CairnErrorCode in worker/cairn.d.ts and the table in docs/protocol.md ("Error codes") differ');
});
