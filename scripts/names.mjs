// Short import names for the shipped modules (docs/size.md, "Import names").
//
// wasm-bindgen names each import the glue gives the engine `__wbg_<name>_<16 hex digits>` (or
// `__wbindgen_<name>_<hex>`), in the namespace "./cairn_wasm_bg.js": 66 names of about 36
// bytes, each written once in the module's import section and once in the glue, and the hex
// does not compress. shortImports() renames them to `a`, `b`, ... (and the namespace to `a`) in
// the glue and in every module that uses it, so the glue and the modules still agree.
// shortExports() does the same for what the glue calls (`wasm.database_executePrepared`, 43
// names, 81 calls): `_a`, `_b`, ... (an underscore first, apart from the names the split gives
// and `memory`, which the Worker reads).
import { readFileSync, writeFileSync } from 'node:fs';

const NAMESPACE = './cairn_wasm_bg.js';

/** `a` ... `z`, `A` ... `Z`, then `aa` ...: the `i`-th short name, a JavaScript identifier. */
function shortName(i) {
  const letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
  let s = '';
  do {
    s = letters[i % letters.length] + s;
    i = Math.floor(i / letters.length) - 1;
  } while (i >= 0);
  return s;
}

function leb(bytes, at) {
  let value = 0;
  let shift = 0;
  let b;
  do {
    b = bytes[at++];
    value += (b & 0x7f) * 2 ** shift;
    shift += 7;
  } while (b & 0x80);
  return [value, at];
}

function encodeLeb(n) {
  const out = [];
  do {
    let b = n & 0x7f;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return out;
}

const encodeName = (s) => {
  const b = Buffer.from(s, 'utf8');
  return [...encodeLeb(b.length), ...b];
};

/** Skips an import's description (after its kind byte); returns where the next import starts. */
function skipDesc(bytes, kind, at) {
  const limits = (at) => {
    const flags = bytes[at++];
    [, at] = leb(bytes, at);
    if (flags & 1) [, at] = leb(bytes, at);
    return at;
  };
  switch (kind) {
    case 0: return leb(bytes, at)[1]; // function: type index
    case 1: return limits(at + 1); // table: element type, limits
    case 2: return limits(at); // memory
    case 3: return at + 2; // global: value type, mutability
    case 4: return leb(bytes, at + 1)[1]; // tag: attribute, type index
    default: throw new Error(`import of unknown kind ${kind}`);
  }
}

/** `bytes` with each entry of its section `id` (a vector section) replaced: `entry(at)` reads
 * the entry at `at` and gives [its new bytes, where it ended]. */
function mapSection(bytes, id, entry) {
  const out = [bytes.subarray(0, 8)];
  let at = 8;
  while (at < bytes.length) {
    const [size, start] = leb(bytes, at + 1);
    const end = start + size;
    if (bytes[at] !== id) {
      out.push(bytes.subarray(at, end));
      at = end;
      continue;
    }
    let [count, p] = leb(bytes, start);
    const section = [...encodeLeb(count)];
    for (; count > 0; count--) {
      const [entryBytes, next] = entry(p);
      section.push(...entryBytes);
      p = next;
    }
    out.push(Uint8Array.from([id, ...encodeLeb(section.length), ...section]));
    at = end;
  }
  return Buffer.concat(out);
}

/** The name at `at`, and where it ends. */
function readName(bytes, at) {
  const [n, q] = leb(bytes, at);
  return [Buffer.from(bytes.subarray(q, q + n)).toString('utf8'), q + n];
}

/** `bytes` with its exports named in `names` (a Map) renamed. */
function renameExports(bytes, names) {
  return mapSection(bytes, 7, (at) => {
    const [name, p] = readName(bytes, at);
    const [, next] = leb(bytes, p + 1); // the kind, then the index
    return [[...encodeName(names.get(name) ?? name), ...bytes.subarray(p, next)], next];
  });
}

/** A call of the glue into the module's exports. */
const CALL = /\bwasm\.([A-Za-z_$][\w$]*)/g;

/** Renames the exports the glue calls, in `glueFile` and in each of `wasmFiles`; returns how many. */
export function shortExports(glueFile, wasmFiles) {
  const glue = readFileSync(glueFile, 'utf8');
  const called = new Set([...glue.matchAll(CALL)].map((m) => m[1]));
  called.delete('memory');
  const names = new Map([...called].sort().map((name, i) => [name, `_${shortName(i)}`]));
  for (const f of wasmFiles) {
    const exported = new Set(WebAssembly.Module.exports(new WebAssembly.Module(readFileSync(f))).map((e) => e.name));
    for (const name of called) if (!exported.has(name)) throw new Error(`the glue calls wasm.${name}, which ${f} does not export`);
    for (const short of names.values()) if (exported.has(short)) throw new Error(`${f} exports ${short} already`);
  }
  for (const f of wasmFiles) writeFileSync(f, renameExports(readFileSync(f), names));
  writeFileSync(glueFile, glue.replace(CALL, (all, name) => (names.has(name) ? `wasm.${names.get(name)}` : all)));
  return names.size;
}

/** `bytes` with the imports of `NAMESPACE` renamed by `names` (a Map); throws on a name it lacks. */
function renameInModule(bytes, names) {
  return mapSection(bytes, 2, (at) => {
    const [module, q] = readName(bytes, at);
    const [field, p] = readName(bytes, q);
    const descEnd = skipDesc(bytes, bytes[p], p + 1);
    let renamed = [module, field];
    if (module === NAMESPACE) {
      const short = names.get(field);
      if (short === undefined) throw new Error(`the module imports ${field}, which the glue does not give`);
      renamed = ['a', short];
    }
    return [[...encodeName(renamed[0]), ...encodeName(renamed[1]), ...bytes.subarray(p, descEnd)], descEnd];
  });
}

/** Renames the glue's imports in `glueFile` and in each of `wasmFiles`; returns how many. */
export function shortImports(glueFile, wasmFiles) {
  const glue = readFileSync(glueFile, 'utf8');
  const open = glue.indexOf('    const import0 = {\n');
  const close = glue.indexOf('\n    };\n', open);
  if (open < 0 || close < 0) throw new Error(`${glueFile}: no import0 object`);
  const block = glue.slice(open, close);
  const names = new Map();
  const renamed = block.replace(/^ {8}([A-Za-z_$][\w$]*): /gm, (all, key) => {
    if (key === '__proto__') return all;
    const short = shortName(names.size);
    names.set(key, short);
    return `        ${short}: `;
  });
  const namespace = `        "${NAMESPACE}": import0,\n`;
  if (!glue.includes(namespace)) throw new Error(`${glueFile}: no ${JSON.stringify(namespace.trim())}`);
  const out = (glue.slice(0, open) + renamed + glue.slice(close)).replace(namespace, '        a: import0,\n');
  for (const f of wasmFiles) writeFileSync(f, renameInModule(readFileSync(f), names));
  writeFileSync(glueFile, out);
  return names.size;
}
