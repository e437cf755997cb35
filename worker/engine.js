// The engine host: loads the wasm engine (and the rest of it, in the background), opens the
// database over an OPFS file, and runs the requests that call the engine. It knows nothing of
// sessions, of which request may run when (worker/sessions.js), or of how requests arrive
// (worker/worker.js).
//
// An op gets the request's arguments and returns [result, transfer?]: `ops` answer at once,
// `asyncOps` wait on the platform. A statement's result stays where the engine encoded it until
// the reply is written (`Encoded`): the shared-memory channel copies it from there, postMessage
// gets the array `replyResult` builds.
import * as engine from '../build/wasm/cairn_wasm.js';
import { compile, fetchRest, restFrom, restLoaded, restLoadedBy, restReady, restFailure, takeMissing } from './split.js';
import { MODE_ROWS, MODE_RUN, paramBytes } from './protocol.js';
import { readResult } from './result.js';
import { MEMORY, memoryHandle } from './memory.js';

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

/** Loads the engine from `wasmUrl` (default: cairn.wasm beside this script); `restUrl` is where
 * the rest of it is fetched from, in the background from then on (`fetchRest`). */
export async function load(wasmUrl, restUrl) {
  // Resolved against the Worker's own URL, not `import.meta.url`: a bundler that takes the
  // Worker in would see a computed `new URL(..., import.meta.url)` and try to resolve it.
  const module = new URL(wasmUrl ?? 'cairn.wasm', self.location.href);
  ready ??= compile(module).then((m) => engine.initSync({ module: m }));
  try {
    wasm = await ready;
  } catch (e) {
    ready = null;
    throw new Error(`${module}: ${e && e.message ? e.message : e}`);
  }
  // Unless the page said where, the rest is beside the module, its name with -rest
  // (cairn-rest.wasm, cairn-sync-rest.wasm).
  const restName = module.pathname.slice(module.pathname.lastIndexOf('/') + 1).replace(/(\.wasm)?$/, '-rest.wasm');
  restFrom(wasm, new URL(restUrl ?? restName, module));
  globals = Object.values(wasm).filter((g) => g instanceof WebAssembly.Global);
  loaded = true;
  // The rest is fetched now, not once a database is open: a statement that needs it early finds
  // it there, and until it is there every call of the engine copies the engine's memory
  // (`saveState`). Not sooner: compiled beside the engine, it slows the engine's own compile,
  // which the first open waits for (bench-browser/tiers.mjs --first-open).
  void fetchRest();
}

// While the rest of the engine is not there, a call of the engine may trap for it half-way
// (worker/split.js). Before each such call the Worker saves what the call may change and puts it
// back after that trap: the engine's memory, its mutable globals (the stack pointer among them),
// and the statement cache here. The trapped call's writes to the file are those of a commit that
// failed before its superblock was flushed, which the format already survives (docs/file-format.md,
// "A commit that fails"). Once the rest is there, nothing is saved.
let globals = [];

/** What to put back if the next call of the engine traps for the rest: null once it is there. */
export function saveState() {
  if (restReady() || !wasm) return null;
  return {
    bytes: new Uint8Array(wasm.memory.buffer).slice(),
    globals: globals.map((g) => g.value),
    cache: new Map(stmtCache),
    lastSql,
    lastId,
  };
}

/** After a trap: whether it was for the rest, and if so the engine as `saved` had it. Memory the
 * call grew stays, unused. */
export function restoreState(saved) {
  // Read either way: a trap for the rest in a call that saved nothing stops the engine.
  const missing = takeMissing();
  if (!saved || !missing) return false;
  new Uint8Array(wasm.memory.buffer).set(saved.bytes);
  globals.forEach((g, i) => {
    if (g.value !== saved.globals[i]) g.value = saved.globals[i];
  });
  stmtCache = saved.cache;
  lastSql = saved.lastSql;
  lastId = saved.lastId;
  self.__cairnPanic = undefined;
  return true;
}

/** The error of a statement that needed the rest of the engine when it could not be had. */
export const restUnavailable = () => err('REST_UNAVAILABLE', `this needs the rest of the engine, which could not be fetched ` +
  `(${restFailure() ?? 'not yet there'}); the database is as it was before it. Serve that file, precache it for offline use, or pass restWasmUrl`);

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
  memory: () => [{ wasmBytes: wasm.memory.buffer.byteLength, restReady: restReady(), restLoaded: restLoaded(), restLoadedBy: restLoadedBy() }],
  check: () => [needDb().check()],
  schema: () => [needDb().schema()],
  // An export: the whole file as of the last commit is taken at once, then handed over in one
  // piece or, for a page that shows its progress, a piece at a time.
  exportBegin: () => {
    const bytes = needDb().exportBytes();
    outgoing.set(++lastExport, bytes);
    return [{ id: lastExport, total: bytes.length }];
  },
  exportChunk: (id, at, len) => {
    const bytes = outgoing.get(id);
    const piece = bytes.slice(at, at + len);
    if (at + len >= bytes.length) outgoing.delete(id);
    return [piece, [piece.buffer]];
  },
  // An import's pieces, in order (`importBegin` first, `importEnd` after).
  importChunk: (bytes) => {
    incoming.parts.push(new Uint8Array(bytes));
    incoming.size += bytes.byteLength;
    return [incoming.size];
  },
};

const outgoing = new Map(); // export id -> the file's bytes, until its last piece is taken
let lastExport = 0;
let incoming = null; // the import under way: { name, replace, parts, size }
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
    syncCompact: () => [needDb().syncCompact()],
    syncPurge: (table, key) => [needDb().syncPurge(String(table), paramBytes(Array.isArray(key) ? key : [key]))],
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
// An import is written whole here first, then moved over the database's name.
const STAGE = 'cairn-import';

// The first open's directory, asked for when the Worker starts (`prepareDirectory`): a new
// profile's storage takes tens of milliseconds to start and to make the directory, which then
// pass while the engine is fetched and compiled.
let earlyDir = null;

/** Starts making cairn's directory in the origin's OPFS, for the first open to take. */
export function prepareDirectory() {
  if (typeof navigator !== 'object' || typeof navigator.storage?.getDirectory !== 'function') return;
  earlyDir = navigator.storage.getDirectory().then((root) => root.getDirectoryHandle(DIR, { create: true }));
  // Its errors are the open's to report, by asking again.
  earlyDir.catch(() => {});
}

/** cairn's directory (or with `dirName`, its key directory) in the origin's OPFS, created on first
 * use. */
async function directory(dirName = DIR) {
  if (dirName === DIR && earlyDir) {
    const early = earlyDir;
    earlyDir = null; // taken once: a later open asks again, in case the directory was removed
    const dir = await early.catch(() => null);
    if (dir) return dir;
  }
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

/** Where databases live: OPFS in the browser. The Node.js Worker (worker/node-worker.js) puts
 * node:fs files in its place; the ops below call only these. */
export const storage = {
  /** The handles of the database `name` (and in the sync build, of its key file). */
  async open(name, create) {
    const handle = await syncHandle(name, create);
    // The sync build's key store: the key file, created empty, held while the database is open.
    if (!CAIRN_SYNC) return { handle };
    try {
      return { handle, keyHandle: await syncHandle(name, true, KEYS) };
    } catch (e) {
      handle.close();
      throw e;
    }
  },
  async exists(name) {
    engine.checkName(name);
    const dir = await directory();
    return dir.getFileHandle(name).then(() => true, () => false);
  },
  // Written and flushed under cairn-import/ first, then moved over the name: the file under it is
  // the old one or the whole new one. The database's key file is removed: an imported database
  // signs with a key of its own until `importKey` (docs/sync.md 10b).
  async write(name, data) {
    const stage = await directory(STAGE);
    try {
      const staged = await syncHandle(name, true, STAGE);
      staged.truncate(0);
      engine.Database.writeImport(staged, name, data);
      staged.close();
      // BUSY while a Worker holds the database.
      (await syncHandle(name, true)).close();
      await removeKey(name);
      const file = await stage.getFileHandle(name);
      const dir = await directory();
      await opfs(name, () => file.move(dir, name));
    } finally {
      await stage.removeEntry(name).catch(() => {});
    }
  },
  async remove(name) {
    engine.checkName(name);
    const dir = await directory();
    await opfs(name, () => dir.removeEntry(name));
    await removeKey(name);
  },
};

/** Refuses an import under `name` before any byte of it is taken: a bad name, and an existing
 * database unless `replace`. */
async function importable(name, replace) {
  if (name === MEMORY) throw err('INVALID_NAME', `${MEMORY} is a database in memory; it cannot be imported into`);
  if (!replace && (await storage.exists(name))) {
    throw err('ALREADY_EXISTS', `a database named ${JSON.stringify(name)} exists; destroy it first, or import with { replace: true }`);
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
    const { handle, keyHandle } = name === MEMORY
      ? { handle: memoryHandle(), keyHandle: CAIRN_SYNC ? memoryHandle() : undefined }
      : await storage.open(name, options.create !== false);
    try {
      db = engine.Database.open(handle, name, durability, options.cachePages ?? 0, keyHandle);
    } catch (e) {
      // The engine closes them too once it holds them; a second close does nothing.
      handle.close();
      keyHandle?.close();
      throw e;
    }
    // The rest of the engine, in the background: no statement need wait for it on the network.
    void fetchRest();
    return [null];
  },
  // Waits for the rest of the engine (open()'s `preloadRest: 'wait'`).
  loadRest: async () => {
    if (await fetchRest()) throw restUnavailable();
    return [null];
  },
  // An import in pieces (`importChunk`), which the page sends as it reads them: refused at once
  // for a name it cannot have, checked whole at `importEnd`.
  importBegin: async (name, options = {}) => {
    name = String(name);
    await importable(name, !!options.replace);
    incoming = { name, replace: !!options.replace, parts: [], size: 0 };
    return [null];
  },
  importEnd: async () => {
    // The check and the write run in the rest of the engine: it is waited for before the pieces
    // are taken, so that a retry after it arrives finds them.
    if (await fetchRest()) throw restUnavailable();
    const { name, replace, parts, size } = incoming;
    incoming = null;
    const data = new Uint8Array(size);
    let at = 0;
    for (const p of parts.splice(0)) {
      data.set(p, at);
      at += p.length;
    }
    // Checked in memory first: nothing is written unless they are a sound database, and an
    // existing one is replaced only with `replace` (else the caller destroys it first, so nothing
    // is lost). Until the check passes, the database under that name is untouched.
    engine.Database.checkImport(data);
    await importable(name, replace);
    await storage.write(name, data);
    return [null];
  },
  destroy: async (name) => {
    name = String(name);
    if (name !== MEMORY) await storage.remove(name);
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
