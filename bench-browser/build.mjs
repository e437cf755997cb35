// Bundles the harness page, the engines' page adapters (one chunk each) and the peers' Workers
// into build/, with the files the engines load next to them.
import * as esbuild from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const BUILD_DIR = join(here, 'build');

export function peerVersions() {
  const v = (p) => JSON.parse(readFileSync(join(here, 'node_modules', p, 'package.json'), 'utf8')).version;
  return { sqlite: v('@sqlite.org/sqlite-wasm'), pglite: v('@electric-sql/pglite') };
}

export async function build({ quiet = false } = {}) {
  const t0 = Date.now();
  rmSync(BUILD_DIR, { recursive: true, force: true });
  mkdirSync(BUILD_DIR, { recursive: true });
  const common = {
    bundle: true, splitting: true, format: 'esm', platform: 'browser', target: 'es2022',
    minify: true, outdir: BUILD_DIR, entryNames: '[name]', chunkNames: '[name]-[hash]',
    logLevel: 'error', absWorkingDir: here,
  };
  await esbuild.build({ ...common, entryPoints: ['src/harness.js'] });
  await esbuild.build({
    ...common,
    entryPoints: ['src/engines/sqlite-worker.js', 'src/engines/pglite-worker.js', 'src/probe-worker.js'],
    external: ['node:*', 'fs', 'path', 'zlib', 'stream', 'stream/promises', 'crypto', 'url', 'module', 'child_process', 'os', 'util', 'worker_threads'],
    define: { 'globalThis.PGLITE_VERSION': JSON.stringify(peerVersions().pglite) },
  });
  const nm = join(here, 'node_modules');
  for (const [from, name] of [
    ['@sqlite.org/sqlite-wasm/dist/sqlite3.wasm', 'sqlite3.wasm'],
    ['@electric-sql/pglite/dist/pglite.wasm', 'pglite.wasm'],
    ['@electric-sql/pglite/dist/pglite.data', 'pglite.data'],
    ['@electric-sql/pglite/dist/initdb.wasm', 'initdb.wasm'],
  ]) copyFileSync(join(nm, from), join(BUILD_DIR, name));
  copyFileSync(join(here, 'src/index.html'), join(BUILD_DIR, 'index.html'));
  if (!quiet) console.log(`built ${BUILD_DIR} in ${Date.now() - t0} ms`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await build();
