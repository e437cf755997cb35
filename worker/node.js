// cairn in Node.js (`import { open } from 'cairn-db/node'`): the same engine (cairn.wasm) and the
// same API as in the browser, with each database's engine in a node:worker_threads thread and its
// data in a file (node:fs) instead of OPFS. A name is a file path (relative to the working
// directory), or ':memory:'. The page side is worker/client.js itself, bundled with the thread
// for a Worker (worker/node-thread.js); the thread runs worker/node-worker.js.
//
// With `{ sync: true }` the thread runs cairn-node-sync-worker.js over cairn-sync.wasm: the
// browser's sync Worker, its relay transport over the global WebSocket (Node.js 22) or the `ws`
// package's (Node.js 20), and the database's secret key in `<file>-key` beside it.
import { resolve } from 'node:path';
import { CairnError, open as openDb, importDatabase as importDb, destroy as destroyDb } from './client.js';

const MEMORY = ':memory:';

// Files this process holds open: an OPFS file is held by one Worker at a time, and so is a file
// here (another process is kept out by the file's lock, worker/node-worker.js).
const held = new Set();

/** The options for the client: the engine's files beside this script, on disk. */
function engineOptions(options) {
  return {
    ...options,
    workerUrl: undefined,
    syncWorkerUrl: undefined,
    wasmUrl: new URL('./cairn.wasm', import.meta.url),
    restWasmUrl: new URL('./cairn-rest.wasm', import.meta.url),
    syncWasmUrl: new URL('./cairn-sync.wasm', import.meta.url),
    syncRestWasmUrl: new URL('./cairn-sync-rest.wasm', import.meta.url),
    channel: 'postMessage',
  };
}

const pathOf = (name) => (String(name) === MEMORY ? MEMORY : resolve(String(name)));

function refuseHeld(path, what) {
  if (held.has(path)) throw new CairnError('BUSY', `${path} is open in this process; close it before you ${what}`);
}

/** Opens the database in the file `path` (or in memory, `':memory:'`), creating it unless
 * `create: false`. */
export async function open(path, options = {}) {
  const opts = engineOptions(options);
  const name = pathOf(path);
  if (name !== MEMORY) {
    refuseHeld(name, 'open it again');
    held.add(name);
  }
  let db;
  try {
    db = await openDb(name, opts);
  } catch (e) {
    held.delete(name);
    throw e;
  }
  const close = db.close.bind(db);
  db.close = async () => {
    await close();
    held.delete(name);
  };
  return db;
}

/** Creates (or opens) the database in the file `path`. */
export const create = (path, options = {}) => open(path, { ...options, create: true });

/** Writes `source` (bytes, a ReadableStream or a Node.js stream of them) as the database file
 * `path`; see the browser's `importDatabase`. */
export async function importDatabase(path, source, options = {}) {
  const opts = engineOptions(options);
  const name = pathOf(path);
  refuseHeld(name, 'import over it');
  return importDb(name, source, opts);
}
export { importDatabase as import };

/** Deletes the database file `path`. Fails with BUSY while this process has it open. */
export async function destroy(path, options = {}) {
  const opts = engineOptions(options);
  const name = pathOf(path);
  refuseHeld(name, 'destroy it');
  return destroyDb(name, opts);
}

export { CairnError };
