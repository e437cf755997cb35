// Bundles the page (src/page.js, one chunk per library adapter) and the Workers of SQLite WASM and
// PGlite (bench-browser's own) into build/, with the files those load. `bundleSizes()` measures
// what an app ships for each library: its adapter bundled alone, minified and tree-shaken, plus
// the wasm files it fetches.
import * as esbuild from 'esbuild';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const here = dirname(fileURLToPath(import.meta.url));
const nm = join(here, 'node_modules');
export const BUILD_DIR = process.env.LF_BUILD_DIR || join(here, 'build');

/** The npm packages behind each library, for the versions named in the results. */
export const PACKAGES = {
  yjs: ['yjs', 'y-indexeddb'],
  automerge: ['@automerge/automerge', '@automerge/automerge-repo', '@automerge/automerge-repo-storage-indexeddb', '@automerge/automerge-repo-network-messagechannel'],
  loro: ['loro-crdt'],
  tinybase: ['tinybase'],
  pouchdb: ['pouchdb'],
  rxdb: ['rxdb'],
  gun: ['gun'],
  sqlite: ['@sqlite.org/sqlite-wasm'],
  pglite: ['@electric-sql/pglite'],
};

export function versions() {
  const v = (p) => JSON.parse(readFileSync(join(nm, p, 'package.json'), 'utf8')).version;
  return Object.fromEntries(Object.entries(PACKAGES).map(([lib, ps]) => [lib, Object.fromEntries(ps.map((p) => [p, v(p)]))]));
}

// Automerge's "browser" entry imports its .wasm as an ES module, which esbuild does not bundle;
// its documented entry for other bundlers carries the wasm inline (base64).
const automergeBase64 = {
  name: 'automerge-base64',
  setup(b) {
    b.onResolve({ filter: /^@automerge\/automerge$/ }, () => ({ path: join(nm, '@automerge/automerge/dist/mjs/entrypoints/fullfat_base64.js') }));
  },
};

const NODE_BUILTINS = ['node:*', 'fs', 'path', 'zlib', 'stream', 'stream/promises', 'crypto', 'url', 'module', 'child_process', 'os', 'util', 'worker_threads'];

const common = {
  bundle: true, format: 'esm', platform: 'browser', target: 'es2022', minify: true,
  logLevel: 'error', absWorkingDir: here, nodePaths: [nm], plugins: [automergeBase64],
  define: { global: 'globalThis', 'process.env.NODE_ENV': '"production"' },
  external: ['/cairn/cairn.js'],
};

export async function build({ quiet = false } = {}) {
  const t0 = Date.now();
  rmSync(BUILD_DIR, { recursive: true, force: true });
  mkdirSync(BUILD_DIR, { recursive: true });
  const out = { ...common, splitting: true, outdir: BUILD_DIR, entryNames: '[name]', chunkNames: '[name]-[hash]' };
  await esbuild.build({ ...out, entryPoints: ['src/page.js'] });
  await esbuild.build({
    ...out, plugins: [], external: NODE_BUILTINS,
    entryPoints: ['../src/engines/sqlite-worker.js', '../src/engines/pglite-worker.js'],
    define: { ...common.define, 'globalThis.PGLITE_VERSION': JSON.stringify(versions().pglite['@electric-sql/pglite']) },
  });
  for (const [from, name] of ASSETS) copyFileSync(join(nm, from), join(BUILD_DIR, name));
  copyFileSync(join(here, 'src/index.html'), join(BUILD_DIR, 'index.html'));
  if (!quiet) console.log(`built ${BUILD_DIR} in ${Date.now() - t0} ms`);
}

const ASSETS = [
  ['@sqlite.org/sqlite-wasm/dist/sqlite3.wasm', 'sqlite3.wasm'],
  ['@electric-sql/pglite/dist/pglite.wasm', 'pglite.wasm'],
  ['@electric-sql/pglite/dist/pglite.data', 'pglite.data'],
  ['@electric-sql/pglite/dist/initdb.wasm', 'initdb.wasm'],
];

const sized = (bytes) => ({ min: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length });

/** Per library: the adapter bundled alone (records on the device, in memory and on disk, and
 * sync), plus the files it fetches at run time. cairn's are its dist files for a database that
 * syncs. */
export async function bundleSizes(cairnDist) {
  const out = {};
  const libs = ['cairn', 'yjs', 'automerge', 'loro', 'tinybase', 'pouchdb', 'rxdb', 'gun'];
  for (const lib of libs) {
    const r = await esbuild.build({ ...common, entryPoints: [`src/adapters/${lib}.js`], write: false, outdir: '/x' });
    const files = [{ name: `adapter bundle (${lib}.js)`, ...sized(Buffer.concat(r.outputFiles.map((f) => Buffer.from(f.contents)))) }];
    if (lib === 'cairn') {
      for (const f of ['cairn.js', 'cairn-sync-worker.js', 'cairn-sync.wasm', 'cairn-sync-rest.wasm']) {
        const p = join(cairnDist, f);
        if (existsSync(p) && statSync(p).isFile()) files.push({ name: f, ...sized(readFileSync(p)) });
      }
    }
    out[lib] = { files, min: files.reduce((a, f) => a + f.min, 0), gzip: files.reduce((a, f) => a + f.gzip, 0) };
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await build();
