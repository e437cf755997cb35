// docs/architecture.md names files and the functions and types in them; this checks that each
// exists. The notation (stated in the document itself):
//   `path/to/file`              the file (or folder, ending in /) exists
//   `path/to/file: a, B::c`     the file exists and defines each name; `Type::method` (Rust) and
//                               `Class.method` / `Class.#method` (JavaScript) name a method, and
//                               both must be defined in the file (a Rust type by its definition
//                               or an impl block there)
// A path is a code span that starts with one of the repository's top-level folders. A code span
// holding a Rust path (`a::b`) outside that notation is an error: it would go unchecked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const TOP = /^(crates|worker|scripts|docs|tests|bench-browser|www)\//;
const NAME = /^#?[A-Za-z_][A-Za-z0-9_]*$/;

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\#]/g, '\\$&');

/** The patterns that count as defining `name` in a file of this kind. */
function definitions(name, rust) {
  const n = escape(name);
  if (rust) {
    return [
      new RegExp(`\\b(fn|struct|enum|trait|type|mod|const|static|union)\\s+${n}\\b`),
      new RegExp(`macro_rules!\\s*${n}\\b`),
      // A type defined elsewhere, with an impl block in this file.
      new RegExp(`\\bimpl\\b[^{;\\n]*\\b${n}\\b`),
    ];
  }
  return [
    new RegExp(`\\b(function\\*?|class|const|let|var)\\s+${n}\\b`),
    // A method: at the start of a line, its parameters, then its body's brace.
    new RegExp(`^\\s*(static\\s+)?(async\\s+)?([gs]et\\s+)?${n}\\s*\\([^)\\n]*\\)\\s*\\{`, 'm'),
    // A property of an object literal (an op table's entry).
    new RegExp(`^\\s*${n}\\s*:`, 'm'),
  ];
}

/** Every reference in `doc`: { path, names, line }, and the code spans that break the notation. */
export function references(doc) {
  const refs = [];
  const bad = [];
  doc.split('\n').forEach((text, i) => {
    for (const m of text.matchAll(/`([^`]+)`/g)) {
      const span = m[1].trim();
      const colon = span.indexOf(': ');
      const path = colon < 0 ? span : span.slice(0, colon);
      if (TOP.test(path)) {
        const names = colon < 0 ? [] : span.slice(colon + 2).split(',').map((s) => s.trim());
        refs.push({ path, names, line: i + 1 });
      } else if (/\w::\w/.test(span)) {
        bad.push(`line ${i + 1}: \`${span}\` names code outside the notation; write it as \`path/to/file.rs: ${span}\``);
      }
    }
  });
  return { refs, bad };
}

/** What is wrong with one reference, as messages (none when it holds). */
export function check({ path, names, line }) {
  const full = join(root, path);
  if (!existsSync(full)) return [`line ${line}: ${path} does not exist`];
  if (path.endsWith('/')) return statSync(full).isDirectory() ? [] : [`line ${line}: ${path} is not a folder`];
  if (names.length === 0) return [];
  const rust = path.endsWith('.rs');
  const text = readFileSync(full, 'utf8');
  const out = [];
  for (const name of names) {
    const parts = name.split(rust ? '::' : '.');
    if (parts.length > 2 || parts.some((p) => !NAME.test(p))) {
      out.push(`line ${line}: \`${name}\` is not a name, nor Type${rust ? '::' : '.'}method`);
      continue;
    }
    for (const part of parts) {
      if (!definitions(part, rust).some((re) => re.test(text))) {
        out.push(`line ${line}: ${path} does not define ${part}${parts.length > 1 ? ` (of ${name})` : ''}`);
      }
    }
  }
  return out;
}

test('every file and name docs/architecture.md refers to exists', () => {
  const doc = readFileSync(join(root, 'docs/architecture.md'), 'utf8');
  const { refs, bad } = references(doc);
  assert.ok(refs.length >= 50, `only ${refs.length} references found: has the notation changed?`);
  const problems = [...bad, ...refs.flatMap(check)];
  assert.ok(problems.length === 0, `docs/architecture.md is out of step with the code:\n  ${problems.join('\n  ')}`);
});

test('the check finds a wrong name, a wrong file and a Rust path outside the notation', () => {
  assert.deepEqual(check({ path: 'crates/store/src/pager.rs', names: ['Pager::read'], line: 1 }), []);
  assert.deepEqual(check({ path: 'crates/store/src/pager.rs', names: ['Pager::reed'], line: 1 }), [
    'line 1: crates/store/src/pager.rs does not define reed (of Pager::reed)',
  ]);
  assert.deepEqual(check({ path: 'worker/client.js', names: ['EngineWorker.#nope'], line: 2 }), [
    'line 2: worker/client.js does not define #nope (of EngineWorker.#nope)',
  ]);
  assert.deepEqual(check({ path: 'crates/nowhere.rs', names: [], line: 3 }), ['line 3: crates/nowhere.rs does not exist']);
  // A call is not a definition.
  assert.deepEqual(check({ path: 'worker/client.js', names: ['queueMicrotask'], line: 4 }), [
    'line 4: worker/client.js does not define queueMicrotask',
  ]);
  assert.equal(references('see `Database::run` here').bad.length, 1);
});
