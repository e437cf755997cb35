// Builds the browser package into dist/: the engine compiled to wasm (cargo, wasm-bindgen,
// wasm-opt) and the page and Worker scripts (esbuild), then prints and records the size of every
// file a page downloads to open a database.
//
//   node scripts/build.mjs [--dev | --js]
//
//   --dev  skips wasm-opt, the split and minification (faster, larger)
//   --js   bundles the scripts again over the modules and glue of the last full build (when only
//          worker/*.js changed): no cargo, no wasm-opt, no split
//
// Cargo builds into CARGO_TARGET_DIR when it is set, else target/.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { OPT } from './opt.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dev = process.argv.includes('--dev');
const jsOnly = process.argv.includes('--js');
const target = resolve(root, process.env.CARGO_TARGET_DIR ?? 'target');
const bin = (name) => join(root, 'node_modules', '.bin', name);

function run(cmd, args, env = {}) {
  try {
    execFileSync(cmd, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  } catch (e) {
    console.error(`build failed: ${cmd} ${args.join(' ')} (exit ${e.status})`);
    process.exit(1);
  }
}

// The glue gets the import namespace `cairn` of the split module (worker/split.js): the engine's
// call for the rest of itself. Every build's glue gets it, and loses what a Worker never runs:
// finalizers (the Worker frees its database with close(), and a Worker's memory goes with it),
// `Symbol.dispose` (no `using` here) and `initSync`'s warning for a bare module (the Worker
// passes `{ module }`): 143 bytes gzip off cairn-worker.js. Each patch fails the build when the
// glue no longer has what it replaces.
function patchGlue(file) {
  let glue = readFileSync(file, 'utf8');
  const patch = (from, to, what) => {
    if (!(typeof from === 'string' ? glue.includes(from) : from.test(glue))) {
      console.error(`build failed: ${file} has no ${what} to patch`);
      process.exit(1);
    }
    glue = glue.replace(from, to);
  };
  const at = '"./cairn_wasm_bg.js": import0,\n';
  patch(at, `${at}        cairn: splitImports,\n`, "import object to add the split module's imports to");
  patch(/const DatabaseFinalization = \(typeof FinalizationRegistry === 'undefined'\)\n.*\n.*\n/,
    'const DatabaseFinalization = { register: () => {}, unregister: () => {} };\n', 'DatabaseFinalization');
  patch('if (Symbol.dispose) Database.prototype[Symbol.dispose] = Database.prototype.free;\n', '', 'Symbol.dispose');
  patch("console.warn('using deprecated parameters for `initSync()`; pass a single object instead')", '', "initSync's warning");
  writeFileSync(file, `import { splitImports } from '../../worker/split.js';\n${glue}`);
}

// wasm-opt's options for every shipped module: scripts/opt.mjs.

mkdirSync(join(root, 'build', 'wasm'), { recursive: true });
mkdirSync(join(root, 'dist'), { recursive: true });

// Two modules from one crate: cairn.wasm (SQL over OPFS) and cairn-sync.wasm (the same plus
// replication), each with its own glue and Worker script (cairn-worker.js, cairn-sync-worker.js).
// A third, dist/test/, adds the storage layer's block files and conformance suite for the browser
// tests (the `testing` feature), with its own glue and Worker script; it is not shipped.
const env = { CARGO_BUILD_JOBS: process.env.CARGO_BUILD_JOBS ?? '2' };
mkdirSync(join(root, 'dist', 'test'), { recursive: true });
if (jsOnly) {
  // The glue is patched and its names shortened in place by the full build, with the modules.
  for (const f of ['build/wasm/cairn_wasm.js', 'build/wasm-sync/cairn_wasm.js', 'build/wasm-test/cairn_wasm.js', 'dist/cairn-rest.wasm']) {
    if (!existsSync(join(root, f))) {
      console.error(`build failed: --js needs a full build first (${f} is missing)`);
      process.exit(1);
    }
  }
}
for (const [features, out, dir] of jsOnly ? [] : [
  [[], 'dist/cairn.wasm', 'build/wasm'],
  [['--features', 'sync'], 'dist/cairn-sync.wasm', 'build/wasm-sync'],
  [['--features', 'testing'], 'dist/test/cairn.wasm', 'build/wasm-test'],
]) {
  mkdirSync(join(root, dir), { recursive: true });
  // With the linker's map of the module's memory: the split moves the constants that only the
  // rest uses to the rest, and the map says where each constant begins and ends. It is written
  // only when the module is linked: without it (a build directory removed), link again.
  const map = join(root, dir, 'link.map');
  if (!existsSync(map)) {
    for (const f of ['cairn_wasm.wasm', 'deps/cairn_wasm.wasm']) {
      rmSync(join(target, 'wasm32-unknown-unknown', 'release', f), { force: true });
    }
  }
  run('cargo', ['rustc', '-p', 'cairn-wasm', '--release', '--target', 'wasm32-unknown-unknown', ...features,
    '--', '-C', `link-arg=--Map=${map}`], env);
  run('wasm-bindgen', [
    join(target, 'wasm32-unknown-unknown', 'release', 'cairn_wasm.wasm'),
    '--target', 'web',
    '--out-dir', dir,
    '--remove-name-section',
    '--remove-producers-section',
    // Every browser with OPFS has TextEncoder.encodeInto: no fallback for it in the glue.
    '--encode-into', 'always',
  ]);
  patchGlue(join(root, dir, 'cairn_wasm.js'));
  // The same module with its function names, for the per-function account (scripts/size-account.mjs).
  if (!dev && out === 'dist/cairn.wasm') {
    run('wasm-bindgen', [join(target, 'wasm32-unknown-unknown', 'release', 'cairn_wasm.wasm'), '--target', 'web',
      '--out-dir', join(dir, 'named'), '--remove-producers-section', '--encode-into', 'always']);
  }
  if (dev) {
    copyFileSync(join(root, dir, 'cairn_wasm_bg.wasm'), join(root, out));
  } else {
    run(bin('wasm-opt'), [
      // --converge repeats -Oz until it no longer shrinks the module: 0.5 KiB gzip for a few
      // seconds of build.
      ...OPT, '--converge',
      `${dir}/cairn_wasm_bg.wasm`, '-o', out,
    ]);
  }
}
// cairn.wasm in two (docs/size.md, "The split module"): the functions that the common statements
// (the SQL of the tests and examples that an ordinary app runs, scripts/corpus.mjs, and the calls
// every page makes) run stay in cairn.wasm; the rest go to cairn-rest.wasm, which the Worker
// fetches the first time the engine calls one of them. They run in Node over an instrumented copy
// to find them; then the split module is checked against the whole one on those statements and on
// statements outside them.
if (!dev && !jsOnly) {
  run('cargo', ['build', '-q', '-p', 'cairn-split', '--release'], env);
  const tool = join(target, 'release', 'cairn-split');
  const split = await import('./split.mjs');
  // Each shipped module and the rest of it: the sync module's common part adds two replicas
  // writing to one list and syncing both ways.
  for (const [name, dir, sync] of [['cairn', 'build/wasm', false], ['cairn-sync', 'build/wasm-sync', true]]) {
    const at = (f) => join(root, dir, f);
    const [out, rest] = [join(root, 'dist', `${name}.wasm`), join(root, 'dist', `${name}-rest.wasm`)];
    copyFileSync(out, at('whole.wasm'));
    run(tool, ['instrument', at('whole.wasm'), at('instrumented.wasm')]);
    const hits = await split.profile(at('cairn_wasm.js'), at('instrumented.wasm'), { sync });
    writeFileSync(at('kept.txt'), hits.funcs.join('\n') + '\n');
    writeFileSync(at('regions.txt'), hits.regions.join('\n') + '\n');
    // The arms of the kept functions that the run never entered move out into functions of their
    // own, which the split then moves to the rest.
    run(tool, ['outline', at('whole.wasm'), at('kept.txt'), at('regions.txt'), at('outlined.wasm')]);
    run(tool, ['split', at('outlined.wasm'), at('kept.txt'), at('primary.wasm'), rest, at('link.map')]);
    // Once more over the primary module: the stubs are inlined into their callers (2.4 KB gzip).
    // --converge: 152 bytes gzip after the tails moved.
    run(bin('wasm-opt'), [...OPT, '--converge', at('primary.wasm'), '-o', out]);
    // And over the rest, a module of its own now: the cold regions outlined from one function
    // inline back into the moved function that calls them, the copies of the primary's small
    // functions fold into their callers, and the types it does not use go (docs/size.md, "The
    // rest, optimized").
    run(bin('wasm-opt'), [...OPT, rest, '-o', rest]);
    // Functions alike placed near each other, where gzip's 32 KiB window finds their repeats
    // (docs/size.md, "Function order"): cairn.wasm 2.8 KB gzip smaller, its rest 2.6 KB.
    run(tool, ['reorder', out, out]);
    run(tool, ['reorder', rest, rest]);
    // The rest calls the primary's functions through a table it fills, not by exported names.
    run(tool, ['table', out, rest]);
    try {
      const c = await split.check(at('cairn_wasm.js'), at('whole.wasm'), out, rest, { sync });
      console.log(`${name}.wasm split checked: ${c.common} common steps without the rest, ${c.rest} other steps (${c.errors} of them errors) alike with it`);
    } catch (e) {
      console.error(`build failed: the split ${name}.wasm does not behave as the whole one: ${e.message}`);
      process.exit(1);
    }
  }
}

// The per-function account of cairn.wasm and its rest (docs/size.md, "The account"): about
// 20 seconds, most of it wasm-opt over the named copy.
if (!dev && !jsOnly) {
  const { account } = await import('./size-account.mjs');
  try {
    const report = account({ quiet: true });
    writeFileSync(join(root, 'bench-browser/results/size-account.json'), JSON.stringify(report, null, 1) + '\n');
  } catch (e) {
    console.error(`build failed: the per-function account: ${e.message}`);
    process.exit(1);
  }
}

// Short names for the glue's imports and for the exports it calls, in each shipped module and
// the glue its Worker script bundles (scripts/names.mjs).
if (!jsOnly) try {
  const { shortImports, shortExports } = await import('./names.mjs');
  for (const [dir, wasm] of [['build/wasm', 'dist/cairn.wasm'], ['build/wasm-sync', 'dist/cairn-sync.wasm']]) {
    shortImports(join(root, dir, 'cairn_wasm.js'), [join(root, wasm)]);
    shortExports(join(root, dir, 'cairn_wasm.js'), [join(root, wasm)]);
  }
} catch (e) {
  console.error(`build failed: short import names: ${e.message}`);
  process.exit(1);
}

const esbuild = await import('esbuild');
const common = { bundle: true, format: 'esm', target: 'es2022', minify: !dev, legalComments: 'none', logLevel: 'warning' };
// The Worker registers the block-file ops only in the test build (CAIRN_TESTING); bundled with
// a shipped module's glue, esbuild rightly finds those imports undefined.
// Two Worker scripts: cairn-worker.js with cairn.wasm's glue and no sync code, and
// cairn-sync-worker.js with cairn-sync.wasm's glue and the sync transports (CAIRN_SYNC).
const glueOf = (dir) => ({
  name: `glue-${dir}`,
  setup(b) {
    b.onResolve({ filter: /\/build\/wasm\/cairn_wasm\.js$/ }, () => ({ path: join(root, dir, 'cairn_wasm.js') }));
  },
});
const worker = (out, dir, sync, testing = false) => esbuild.build({
  ...common,
  entryPoints: [join(root, 'worker/worker.js')],
  outfile: join(root, out),
  define: { CAIRN_SYNC: String(sync), CAIRN_TESTING: String(testing) },
  plugins: [glueOf(dir)],
  logOverride: { 'import-is-undefined': 'silent' },
});
await worker('dist/cairn-worker.js', 'build/wasm', false);
await worker('dist/cairn-sync-worker.js', 'build/wasm-sync', true);
// What the page needs only once it syncs or another tab owns its database (worker/extra.js)
// stays a file of its own, which cairn.js imports when it needs it; the test build's client
// carries it inline.
const extraFile = {
  name: 'extra-file',
  setup(b) {
    b.onResolve({ filter: /^\.\/extra\.js$/ }, () => ({ path: './cairn-extra.js', external: true }));
  },
};
await esbuild.build({ ...common, entryPoints: [join(root, 'worker/client.js')], outfile: join(root, 'dist/cairn.js'), plugins: [extraFile] });
await esbuild.build({ ...common, entryPoints: [join(root, 'worker/extra.js')], outfile: join(root, 'dist/cairn-extra.js') });
copyFileSync(join(root, 'worker/cairn.d.ts'), join(root, 'dist/cairn.d.ts'));
// `cairn-db/kysely` and `cairn-db/drizzle` import only their library (a peer dependency, which
// the app's bundler resolves) and take the database as an argument: shipped as written.
for (const f of ['kysely', 'drizzle']) for (const ext of ['.js', '.d.ts']) copyFileSync(join(root, `worker/${f}${ext}`), join(root, `dist/${f}${ext}`));
// Node.js (`cairn-db/node`): the page side bundled with a worker_threads thread in place of the
// Worker global (worker/node-thread.js), and the Worker's scripts with node:fs files in place of
// OPFS (worker/node-worker.js); both load the same cairn.wasm and cairn-rest.wasm (with sync,
// cairn-sync.wasm and cairn-sync-rest.wasm) from disk.
// Nothing there is downloaded: worker/extra.js is bundled in, not kept a file of its own.
const node = { ...common, platform: 'node', minify: false };
await esbuild.build({ ...node, entryPoints: [join(root, 'worker/node.js')], outfile: join(root, 'dist/node.js'),
  inject: [join(root, 'worker/node-thread.js')] });
// The sync thread (cairn-node-sync-worker.js) loads cairn-sync.wasm; `ws` (Node.js 20's
// WebSocket) stays an import of the package's optional dependency.
for (const [out, dir, sync] of [['dist/cairn-node-worker.js', 'build/wasm', false], ['dist/cairn-node-sync-worker.js', 'build/wasm-sync', true]]) {
  await esbuild.build({ ...node, entryPoints: [join(root, 'worker/node-worker.js')], outfile: join(root, out),
    define: { CAIRN_SYNC: String(sync), CAIRN_TESTING: 'false' }, plugins: [glueOf(dir)], external: ['ws'],
    logOverride: { 'import-is-undefined': 'silent' } });
}
copyFileSync(join(root, 'worker/node.d.ts'), join(root, 'dist/node.d.ts'));
// `cairn-db/react`: the hook alone, React left to the page's bundler.
await esbuild.build({ ...common, entryPoints: [join(root, 'worker/react.js')], outfile: join(root, 'dist/react.js'), external: ['react'] });
copyFileSync(join(root, 'worker/react.d.ts'), join(root, 'dist/react.d.ts'));
// terser after esbuild on the shipped scripts: its compressor folds what esbuild's minifier
// leaves (docs/size.md, "The scripts"), 102 bytes gzip off cairn.js and 199 off cairn-worker.js.
if (!dev) {
  const { minify } = await import('terser');
  for (const f of ['dist/cairn.js', 'dist/cairn-extra.js', 'dist/cairn-worker.js', 'dist/cairn-sync-worker.js']) {
    const out = await minify(readFileSync(join(root, f), 'utf8'), { module: true, ecma: 2022, compress: { passes: 2 }, mangle: true });
    writeFileSync(join(root, f), out.code);
  }
}
// The test build: the same scripts, the Worker bundled with the test module's glue (no sync).
await worker('dist/test/cairn-worker.js', 'build/wasm-test', false, true);
await esbuild.build({ ...common, entryPoints: [join(root, 'worker/testing.js')], outfile: join(root, 'dist/test/cairn.js') });

// The size of what a page fetches to open a database.
const files = ['dist/cairn.js', 'dist/cairn-worker.js', 'dist/cairn.wasm'];
// A file's sizes; `hint` gives brotli the file's length (as the table of what a page fetches has
// always been measured).
function sizeOf(file, hint = false) {
  const bytes = readFileSync(join(root, file));
  const params = { [zlib.constants.BROTLI_PARAM_QUALITY]: 11 };
  if (hint) params[zlib.constants.BROTLI_PARAM_SIZE_HINT] = bytes.length;
  return {
    file,
    raw: bytes.length,
    gzip: zlib.gzipSync(bytes, { level: 9 }).length,
    brotli: zlib.brotliCompressSync(bytes, { params }).length,
  };
}
const rows = files.map((f) => sizeOf(f, true));
const total = rows.reduce((t, r) => ({ file: 'total', raw: t.raw + r.raw, gzip: t.gzip + r.gzip, brotli: t.brotli + r.brotli }), {
  file: 'total', raw: 0, gzip: 0, brotli: 0,
});
const kb = (n) => (n / 1024).toFixed(1).padStart(9);
const line = (r, note = '') => console.log(`${r.file.padEnd(24)}${kb(r.raw)}${kb(r.gzip)}${kb(r.brotli)}${note && `   (${note})`}`);
console.log(`\n${'file'.padEnd(24)}${'raw KiB'.padStart(9)}${'gzip -9'.padStart(9)}${'br -q 11'.padStart(9)}`);
for (const r of [...rows, total]) line(r);
const extraRow = sizeOf('dist/cairn-extra.js');
line(extraRow, 'fetched when the page syncs, watches, uses records, imports, migrates, or another tab owns the database');
const syncWorkerRow = sizeOf('dist/cairn-sync-worker.js');
line(syncWorkerRow, 'instead of cairn-worker.js, with { sync: true }');
const syncRow = sizeOf('dist/cairn-sync.wasm');
line(syncRow, 'instead of cairn.wasm, with { sync: true }');
const restRow = dev ? null : sizeOf('dist/cairn-rest.wasm');
const syncRestRow = dev ? null : sizeOf('dist/cairn-sync-rest.wasm');
if (restRow) line(restRow, 'fetched in the background once the engine is loaded');
if (syncRestRow) line(syncRestRow, 'the same, for cairn-sync.wasm');
if (!dev) {
  mkdirSync(join(root, 'bench-browser', 'results'), { recursive: true });
  const report = { build: 'release', files: rows, total, extra: extraRow, syncWorker: syncWorkerRow, sync: syncRow, rest: restRow, syncRest: syncRestRow, wasmBytesBeforeOpt: statSync(join(root, 'build/wasm/cairn_wasm_bg.wasm')).size };
  writeFileSync(join(root, 'bench-browser/results/size.json'), JSON.stringify(report, null, 2) + '\n');
}
