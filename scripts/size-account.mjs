// The per-function account of the shipped modules (docs/size.md, "The account"): what each
// function of cairn.wasm's code costs, by name and by crate, and whether it stays in cairn.wasm
// or goes to cairn-rest.wasm.
//
//   node scripts/size-account.mjs     after `node scripts/build.mjs`, which runs it too
//
// The shipped module has no names. The build keeps a second output of wasm-bindgen with the
// names (build/wasm/named/); this optimizes it with the build's wasm-opt options plus `-g`, which
// gives the same functions index for index, and `cairn-split account` reads the two side by side
// with the split's profile (kept.txt, regions.txt). Sizes are raw code bytes before the last
// wasm-opt over each part (which inlines the stubs and the cold regions back): a function the
// profile reached stays in cairn.wasm but for its cold regions, which go to the rest; a function
// it did not reach goes to the rest whole. Writes bench-browser/results/size-account.json (totals,
// by crate, the largest functions and the largest families of generic copies of each part) and
// build/wasm/account.tsv (every function).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OPT } from './opt.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const target = resolve(root, process.env.CARGO_TARGET_DIR ?? 'target');
const TOP = 60;

/** `name` without its hash, demangled when it is in Rust's legacy mangling. */
export function demangle(name) {
  let s = name;
  if (s.startsWith('_ZN')) {
    const parts = [];
    let i = 3;
    while (i < s.length && s[i] !== 'E') {
      let n = 0;
      while (s[i] >= '0' && s[i] <= '9') n = n * 10 + Number(s[i++]);
      if (n === 0) break;
      parts.push(s.slice(i, i + n));
      i += n;
    }
    s = parts.join('::');
    const esc = { SP: '@', BP: '*', RF: '&', LT: '<', GT: '>', LP: '(', RP: ')', C: ',' };
    s = s.replace(/\$([A-Z]+)\$/g, (m, k) => esc[k] ?? m).replace(/\$u([0-9a-f]+)\$/g, (_, h) => String.fromCodePoint(parseInt(h, 16)))
      .replace(/\.\./g, '::').replace(/::_(?=[$_a-zA-Z])/g, '::');
  }
  return s.replace(/::h[0-9a-f]{16}$/, '').replace(/\.llvm\.\d+$/, '');
}

/** The crate a function's code comes from: the first segment of its path; for `<T as Trait>`,
 * T's, or the trait's when T is a type parameter, a primitive or a slice. */
export function crateOf(name) {
  const first = (s) => /^[&*\s[(]*(?:(?:mut|const|dyn|impl)\s+)*([A-Za-z_]\w*)(?:\[[0-9a-f]+\])?::/.exec(s)?.[1];
  let c;
  if (name.startsWith('<')) {
    let depth = 0;
    let i = 0;
    for (; i < name.length; i++) {
      if (name[i] === '<') depth++;
      else if (name[i] === '>' && --depth === 0) break;
      else if (depth === 1 && name.startsWith(' as ', i)) break;
    }
    c = first(name.slice(1, i)) ?? (name.startsWith(' as ', i) ? first(name.slice(i + 4)) : undefined) ?? 'std';
  } else {
    c = first(name);
  }
  if (!c) return '(exports and compiler builtins)';
  return /^(core|alloc|std)$/.test(c) ? 'std' : c;
}

/** A generic function's family: its name with every generic argument list taken out. */
function family(name) {
  let out = '';
  let depth = 0;
  for (const ch of name) {
    if (ch === '<') depth++;
    if (depth === 0) out += ch;
    if (ch === '>' && depth > 0) depth--;
  }
  return out;
}

function part(rows, bytesOf) {
  const funcs = rows.map((r) => ({ name: r.name, crate: r.crate, bytes: bytesOf(r) })).filter((f) => f.bytes > 0);
  const total = funcs.reduce((t, f) => t + f.bytes, 0);
  const by = (key) => {
    const m = new Map();
    for (const f of funcs) {
      const k = key(f);
      const e = m.get(k) ?? { name: k, bytes: 0, functions: 0 };
      e.bytes += f.bytes;
      e.functions++;
      m.set(k, e);
    }
    return [...m.values()].sort((a, b) => b.bytes - a.bytes);
  };
  return {
    functions: funcs.length,
    bytes: total,
    crates: by((f) => f.crate).map(({ name, bytes, functions }) => ({ crate: name, bytes, functions })),
    largest: funcs.sort((a, b) => b.bytes - a.bytes).slice(0, TOP),
    // Families of two or more copies: each copy is the same generic code for another type.
    copies: by((f) => family(f.name)).filter((e) => e.functions > 1).slice(0, TOP)
      .map(({ name, bytes, functions }) => ({ family: name, bytes, copies: functions })),
  };
}

/** Accounts for build/wasm (cairn.wasm and cairn-rest.wasm); returns the report. */
export function account({ dir = 'build/wasm', name = 'cairn', quiet = false } = {}) {
  const at = (f) => join(root, dir, f);
  for (const f of ['named/cairn_wasm_bg.wasm', 'whole.wasm', 'kept.txt', 'regions.txt']) {
    if (!existsSync(at(f))) throw new Error(`${dir}/${f} is missing: run node scripts/build.mjs first`);
  }
  execFileSync(join(root, 'node_modules', '.bin', 'wasm-opt'), [...OPT, '--converge', '-g', at('named/cairn_wasm_bg.wasm'), '-o', at('named/whole.wasm')],
    { stdio: quiet ? 'ignore' : 'inherit' });
  execFileSync(join(target, 'release', 'cairn-split'), ['account', at('whole.wasm'), at('named/whole.wasm'), at('kept.txt'), at('regions.txt'), at('account.tsv')],
    { stdio: 'inherit' });
  const rows = readFileSync(at('account.tsv'), 'utf8').trim().split('\n').slice(1).map((line) => {
    const [index, bytes, kept, cold, raw] = line.split('\t');
    const fn = demangle(raw ?? '');
    return { index: Number(index), bytes: Number(bytes), kept: kept === '1', cold: Number(cold), name: fn || `(function ${index})`, crate: crateOf(fn) };
  });
  return {
    module: `${name}.wasm`,
    note: 'raw code bytes of each function before the last wasm-opt over each part; cold regions of kept functions count in the rest',
    primary: part(rows, (r) => (r.kept ? r.bytes - r.cold : 0)),
    rest: part(rows, (r) => (r.kept ? r.cold : r.bytes)),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const report = account();
  mkdirSync(join(root, 'bench-browser', 'results'), { recursive: true });
  writeFileSync(join(root, 'bench-browser/results/size-account.json'), JSON.stringify(report, null, 1) + '\n');
  for (const [what, p] of [['cairn.wasm', report.primary], ['cairn-rest.wasm', report.rest]]) {
    console.log(`\n${what}: ${p.functions} functions, ${p.bytes} bytes of code; by crate:`);
    for (const c of p.crates.slice(0, 8)) console.log(`  ${c.crate.padEnd(22)}${String(c.bytes).padStart(8)}  (${c.functions})`);
    console.log('  largest:');
    for (const f of p.largest.slice(0, 12)) console.log(`  ${String(f.bytes).padStart(8)}  ${f.name.slice(0, 100)}`);
  }
}
