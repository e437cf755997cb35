// The engine host: loads the wasm engine (and the rest of it, on first use), opens the database
// over an OPFS file, and runs the requests that call the engine. It knows nothing of sessions, of
// which request may run when (worker/sessions.js), or of how requests arrive (worker/worker.js).
//
// An op gets the request's arguments and returns [result, transfer?]: `ops` answer at once,
// `asyncOps` wait on the platform. A statement's result stays where the engine encoded it until
// the reply is written (`Encoded`): the shared-memory channel copies it from there, postMessage
// gets the array `replyResult` builds.
import * as engine from '../build/wasm/cairn_wasm.js';
import { restFrom, restLoaded, restLoadedBy } from './split.js';
import { MODE_ROWS, MODE_RUN, paramBytes } from './protocol.js';
import { readResult } from './result.js';

// True in the sync build (cairn-sync-worker.js) and in the test build (dist/test/), whose modules
// have the replica's and the storage layer's block files' exports (esbuild's `define`,
// scripts/build.mjs).
/* global CAIRN_SYNC, CAIRN_TESTING */

// The engine's panic hook calls this before the module traps (crates/wasm/src/bindings.rs).
self.__cairnPanicked = (message) => {
  self.__cairnPanic = message;
};

let ready = null;
export let loaded = false;
let wasm = null; // the instance's exports, once loaded
export let stopped = null; // the panic message, once the engine has trapped
export let db = null; // the open engine.Database
export let busyTimeout = 5000;

export const err = (code, message) => Object.assign(new Error(message), { code });

export function needDb() {
  if (!db) throw err('NOT_OPEN', 'no database is open in this Worker');
  return db;
}

/** The engine trapped: nothing more may call it. Returns the panic's message. */
export function stopEngine(e) {
  stopped = self.__cairnPanic ?? e.message;
  return stopped;
}

/** The engine's module, compiled as it downloads when the server says it is wasm (the glue's own
 * loader does the same, with more code for cases a Worker does not meet). */
async function compile(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  if (r.headers.get('Content-Type')?.startsWith('application/wasm')) return WebAssembly.compileStreaming(r);
  return WebAssembly.compile(await r.arrayBuffer());
}

/** Loads the engine from `wasmUrl` (default: cairn.wasm beside this script); `restUrl` is where
 * the rest of it is fetched from on first use. */
export async function load(wasmUrl, restUrl) {
  const module = new URL(wasmUrl ?? './cairn.wasm', import.meta.url);
  ready ??= compile(module).then((m) => engine.initSync({ module: m }));
  try {
    wasm = await ready;
  } catch (e) {
    ready = null;
    throw e;
  }
  // The rest of the engine, fetched on first use (worker/split.js): unless the page said where,
  // beside the module, its name with -rest (cairn-rest.wasm, cairn-sync-rest.wasm).
  const restName = module.pathname.slice(module.pathname.lastIndexOf('/') + 1).replace(/(\.wasm)?$/, '-rest.wasm');
  restFrom(wasm, new URL(restUrl ?? restName, module));
  loaded = true;
}

// Statements run by SQL text are prepared once and kept, up to CACHE of them, least recently used
// first out. The cache is a Map here rather than in the engine so that a cached statement's text
// never crosses into wasm (no UTF-8 copy, no hashing there): `execute` is `executePrepared` on the
// statement's id.
const CACHE = 64;
let stmtCache = new Map(); // SQL text -> prepared statement id, oldest first

let lastSql = null; // the text of the statement run last, and its id: a loop skips the Map
let lastId = 0;

function cachedStatement(d, sql) {
  if (sql === lastSql) return lastId;
  let id = stmtCache.get(sql);
  if (id === undefined) {
    id = d.prepare(sql);
    if (stmtCache.size >= CACHE) {
      const [oldSql, oldId] = stmtCache.entries().next().value;
      stmtCache.delete(oldSql);
      d.finalize(oldId);
      if (oldSql === lastSql) lastSql = null;
    }
  } else stmtCache.delete(sql);
  stmtCache.set(sql, id);
  lastSql = sql;
  lastId = id;
  return id;
}

/** Parameters already in the engine's encoding: the shared-memory channel's request holds them
 * so, and they go to the engine as they are. */
export class EncodedParams {
  constructor(bytes) {
    this.bytes = bytes;
  }
}

/** A statement's result where the engine encoded it (worker/result.js), until its next call. */
export class Encoded {
  constructor(ptr, mode) {
    this.ptr = ptr;
    this.mode = mode;
  }
}

/** The engine's memory, where an `Encoded` result is. */
export const wasmMemory = () => wasm.memory;

function execute(d, stmt, params, mode) {
  mode ??= MODE_ROWS;
  const bytes = params instanceof EncodedParams ? params.bytes : paramBytes(params);
  return [new Encoded(d.executePrepared(stmt, bytes, mode), mode)];
}

/** Makes a reply's `Encoded` result (`out.reply[2]`) the array the page gets by postMessage, and
 * lists the buffers of its typed arrays to transfer rather than copy (a small one is cheaper to
 * copy than to detach; only a result that came column by column has any). */
export function replyResult(out) {
  const r = out.reply[2];
  if (!(r instanceof Encoded)) return;
  const wire = readResult(wasm.memory, r.ptr, r.mode);
  out.reply[2] = wire;
  if (r.mode === MODE_RUN || wire[4 + wire[3]] === null) return;
  out.transfer = [];
  for (const v of wire) if (ArrayBuffer.isView(v) && v.byteLength >= 1024) out.transfer.push(v.buffer);
}

/** Closes the database and forgets its prepared statements. */
export function closeDb() {
  if (db) db.close();
  db = null;
  stmtCache = new Map();
  lastSql = null;
}

// Ops that answer at once. worker.js adds those that span the modules (`close`, `endSession`) and,
// in the sync build, the transports'.
export const ops = {
  ping: () => [null],
  exec: (sql) => [needDb().exec(String(sql))],
  execute: (sql, params, mode) => {
    const d = needDb();
    return execute(d, cachedStatement(d, String(sql)), params, mode);
  },
  prepare: (sql) => [needDb().prepare(String(sql))],
  executePrepared: (stmt, params, mode) => execute(needDb(), stmt, params, mode),
  finalize: (stmt) => [needDb().finalize(stmt)],
  inTransaction: () => [db ? db.inTransaction() : false],
  memory: () => [{ wasmBytes: wasm.memory.buffer.byteLength, restLoaded: restLoaded(), restLoadedBy: restLoadedBy() }],
  check: () => [needDb().check()],
  schema: () => [needDb().schema()],
  exportFile: () => {
    const bytes = needDb().exportBytes();
    return [bytes, [bytes.buffer]];
  },
};
// A panic on purpose, for the tests: in the test build and the sync build (their modules have it).
if (CAIRN_SYNC || CAIRN_TESTING) ops.debugPanic = (message) => [engine.debugPanic(String(message))];

// The replica (docs/sync.md): identity and writers. Its transports are worker/transports.js.
if (CAIRN_SYNC) {
  Object.assign(ops, {
    syncId: () => [needDb().syncId()],
    syncExportKey: () => {
      const k = needDb().syncExportKey();
      return [k, [k.buffer]];
    },
    syncImportKey: (bytes) => [needDb().syncImportKey(new Uint8Array(bytes))],
    syncSetOwner: (id) => [needDb().syncSetOwner(String(id))],
    syncAuthorize: (scope, writers) => [needDb().syncAuthorize(String(scope), Array.from(writers ?? [], String))],
    syncRevoke: (scope, writers) => [needDb().syncRevoke(String(scope), Array.from(writers ?? [], String))],
    syncDigest: () => [needDb().syncDigest()],
    syncPending: () => [needDb().syncPending()],
    syncVerify: () => [needDb().syncVerify()],
  });
}

// OPFS handles are taken here: it is the only asynchronous step of opening a database, and doing
// it in JavaScript leaves the engine without promise and closure glue. Errors are mapped by the
// engine (`opfsError`), to the same codes its own block files use.
const DIR = 'cairn';

async function opfs(name, step) {
  try {
    return await step();
  } catch (e) {
    throw engine.opfsError(e, name);
  }
}

// A replicated database's secret key is kept in a file of its own, never in the database's file
// (docs/sync.md 10b): `cairn-keys/<name>` beside `cairn/<name>`, in a directory of its own so that
// no database name can be a key file's. What reads the database (export) never reads it.
const KEYS = 'cairn-keys';

/** cairn's directory (or with `dirName`, its key directory) in the origin's OPFS, created on first
 * use. */
async function directory(dirName = DIR) {
  if (typeof navigator.storage?.getDirectory !== 'function') {
    throw err('UNSUPPORTED_BROWSER', 'this browser has no Origin Private File System (navigator.storage.getDirectory), which cairn stores its files in (docs/browsers.md)');
  }
  const root = await opfs('/', () => navigator.storage.getDirectory());
  return opfs(dirName, () => root.getDirectoryHandle(dirName, { create: true }));
}

/** The exclusive sync access handle of the file `name` (BUSY while another context holds it). */
async function syncHandle(name, create, dirName = DIR) {
  engine.checkName(name);
  const dir = await directory(dirName);
  const file = await opfs(name, () => dir.getFileHandle(name, { create }));
  try {
    if (typeof file.createSyncAccessHandle !== 'function') throw Object.assign(new Error('not a function'), { name: 'NotSupportedError' });
    return await file.createSyncAccessHandle();
  } catch (e) {
    // WebKitGTK and WPE have the method but refuse it: without synchronous writes and flushes
    // there is no durable commit, so cairn refuses to open rather than run without one. They
    // refuse a file with NotSupportedError the first time and InvalidStateError after, so an
    // InvalidStateError is checked on a scratch file of its own.
    const refused = e?.name === 'NotSupportedError' ? e : e?.name === 'InvalidStateError' ? await syncHandlesRefused(dir) : null;
    if (refused) {
      throw err('UNSUPPORTED_BROWSER', `this browser has no OPFS FileSystemSyncAccessHandle (createSyncAccessHandle: ${refused.message || refused.name}), which cairn needs to write its files (docs/browsers.md)`);
    }
    throw engine.opfsError(e, name);
  }
}

/** The NotSupportedError a new file's sync access handle is refused with in `dir`, or null. */
async function syncHandlesRefused(dir) {
  const scratch = `.cairn-probe-${Math.random().toString(36).slice(2)}`;
  try {
    (await (await dir.getFileHandle(scratch, { create: true })).createSyncAccessHandle()).close();
    return null;
  } catch (e) {
    return e?.name === 'NotSupportedError' ? e : null;
  } finally {
    await dir.removeEntry(scratch).catch(() => {});
  }
}

/** Removes the key file of the database `name`, if there is one. */
async function removeKey(name) {
  const dir = await directory(KEYS);
  try {
    await dir.removeEntry(name);
  } catch (e) {
    if (e?.name !== 'NotFoundError') throw engine.opfsError(e, `the key file of ${name}`);
  }
}

// Ops that wait on the platform.
export const asyncOps = {
  open: async (name, options = {}) => {
    if (db) throw err('ALREADY_OPEN', 'this Worker already has a database open');
    busyTimeout = options.busyTimeout ?? busyTimeout;
    name = String(name);
    const durability = String(options.durability ?? 'full');
    // Before the file is created: a refused open leaves nothing behind.
    if (durability !== 'full' && durability !== 'relaxed') {
      throw err('INVALID_INPUT', `durability must be "full" or "relaxed", not ${JSON.stringify(durability)}`);
    }
    const handle = await syncHandle(name, options.create !== false);
    // The sync build's key store: the key file, created empty, held while the database is open.
    let keyHandle;
    if (CAIRN_SYNC) {
      try {
        keyHandle = await syncHandle(name, true, KEYS);
      } catch (e) {
        handle.close();
        throw e;
      }
    }
    try {
      db = engine.Database.open(handle, name, durability, options.cachePages ?? 0, keyHandle);
    } catch (e) {
      // The engine closes them too once it holds them; a second close does nothing.
      handle.close();
      keyHandle?.close();
      throw e;
    }
    return [null];
  },
  // Checks the bytes in memory first: nothing is written unless they are a sound database, and
  // never over an existing one (the caller destroys it first, so nothing is lost). A key file left
  // under the name (no database has it) is removed: an imported database signs with a key of its
  // own until `importKey` (docs/sync.md 10b).
  importFile: async (name, bytes) => {
    name = String(name);
    const data = new Uint8Array(bytes);
    engine.Database.checkImport(data);
    engine.checkName(name);
    const dir = await directory();
    for await (const existing of dir.keys()) {
      if (existing === name) throw err('ALREADY_EXISTS', `a database named ${JSON.stringify(name)} exists; destroy it first to replace it`);
    }
    await removeKey(name);
    const handle = await syncHandle(name, true);
    try {
      engine.Database.writeImport(handle, name, data);
    } catch (e) {
      // A partial copy would be refused on open anyway; do not leave it behind.
      handle.close();
      await dir.removeEntry(name).catch(() => {});
      throw e;
    }
    handle.close();
    return [null];
  },
  destroy: async (name) => {
    name = String(name);
    engine.checkName(name);
    const dir = await directory();
    await opfs(name, () => dir.removeEntry(name));
    await removeKey(name);
    return [null];
  },
};

// The storage layer's block files and their conformance suite: only in the test build of the
// engine (the `testing` feature); elsewhere these ops are UNKNOWN_OP.
if (CAIRN_TESTING) {
  Object.assign(ops, {
    fileRead: (h, at, len) => {
      const bytes = engine.fileRead(h, at, len);
      return [bytes, [bytes.buffer]];
    },
    fileWrite: (h, at, bytes) => [engine.fileWrite(h, at, new Uint8Array(bytes))],
    fileLen: (h) => [engine.fileLen(h)],
    fileSetLen: (h, len) => [engine.fileSetLen(h, len)],
    fileFlush: (h) => [engine.fileFlush(h)],
    fileClose: (h) => [engine.fileClose(h)],
    conformanceCases: () => [engine.conformanceCases()],
  });
  Object.assign(asyncOps, {
    fileOpen: (name, create) => engine.fileOpen(String(name), !!create).then((h) => [h]),
    fileRemove: (name) => engine.fileRemove(String(name)).then(() => [null]),
    fileList: () => engine.fileList().then((names) => [names]),
    conformanceRun: (testCase, file) => engine.conformanceRun(testCase, file).then((r) => [r ?? null]),
  });
}
