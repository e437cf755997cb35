// cairn's dedicated Worker: owns the wasm engine, the database it opened, and the OPFS handles.
//
// Requests arrive by postMessage, or through the shared-memory channel when the page is
// cross-origin isolated (docs/protocol.md). They are handled one at a time in arrival order.
// Statements carry a session: while one session has a transaction open, statements of other
// sessions wait until it ends (or fail with BUSY after the busy timeout), so a transaction never
// sees another's uncommitted writes and never has statements of another mixed into it.
import * as engine from '../build/wasm/cairn_wasm.js';
import { restFrom, restLoaded, restLoadedBy } from './split.js';
import {
  OK, ERR, RESEND, REPLY_BY_POST, MODE_ROWS, MODE_RUN, REQ, DONE, SERVED, HEADER, Writer, Reader, Full, paramBytes,
} from './protocol.js';
import { readResult } from './result.js';

// True in cairn-sync-worker.js, which carries cairn-sync.wasm's glue and the sync transports;
// false in cairn-worker.js, which answers every sync request with NO_SYNC (esbuild's `define`,
// scripts/build.mjs). A page that does not sync downloads none of that code.
/* global CAIRN_SYNC */

// The engine's panic hook calls this before the module traps (crates/wasm/src/bindings.rs).
self.__cairnPanicked = (message) => {
  self.__cairnPanic = message;
};

let ready = null;
let loaded = false;
let wasm = null; // the instance's exports, once loaded
let stopped = null; // the panic message, once the engine has trapped
let db = null; // the open engine.Database
let busyTimeout = 5000;
let txSession = null; // the session whose transaction is open
let parked = []; // [msg, timer]: requests waiting for txSession's transaction to end
let asyncBusy = 0; // async requests under way (the channel must not overtake them)

const err = (code, message) => Object.assign(new Error(message), { code });

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

function needDb() {
  if (!db) throw err('NOT_OPEN', 'no database is open in this Worker');
  return db;
}

/** Buffers of a result's typed arrays, to transfer rather than copy (a small one is cheaper to
 * copy than to detach). Only a result that came column by column has any. */
function buffers(wire, mode) {
  if (mode === MODE_RUN || wire[4 + wire[3]] === null) return undefined;
  const out = [];
  for (const v of wire) if (ArrayBuffer.isView(v) && v.byteLength >= 1024) out.push(v.buffer);
  return out;
}

/** Posts a reply; a transfer list only when there is something to transfer. */
function reply(out) {
  if (out.transfer?.length) self.postMessage(out.reply, out.transfer);
  else self.postMessage(out.reply);
}

// Ops that answer at once. Each gets the request's arguments and returns [result, transfer?].
const syncOps = {
  ping: () => [null],
  exec: (sql) => [needDb().exec(String(sql))],
  execute: (sql, params, mode) => {
    mode ??= MODE_ROWS;
    const d = needDb();
    const wire = readResult(wasm.memory, d.executePrepared(cachedStatement(d, String(sql)), paramBytes(params), mode), mode);
    return [wire, buffers(wire, mode)];
  },
  prepare: (sql) => [needDb().prepare(String(sql))],
  executePrepared: (stmt, params, mode) => {
    mode ??= MODE_ROWS;
    const wire = readResult(wasm.memory, needDb().executePrepared(stmt, paramBytes(params), mode), mode);
    return [wire, buffers(wire, mode)];
  },
  finalize: (stmt) => [needDb().finalize(stmt)],
  inTransaction: () => [db ? db.inTransaction() : false],
  memory: () => [{ wasmBytes: wasm.memory.buffer.byteLength, restLoaded: restLoaded(), restLoadedBy: restLoadedBy() }],
  check: () => [needDb().check()],
  schema: () => [needDb().schema()],
  exportFile: () => {
    const bytes = needDb().exportBytes();
    return [bytes, [bytes.buffer]];
  },
  close: () => {
    if (CAIRN_SYNC) for (const link of [...links.keys(), ...relays.keys(), ...buses.keys()]) detachPort(link);
    if (db) db.close();
    db = null;
    stmtCache = new Map();
    lastSql = null;
    txSession = null;
    return [null];
  },
  // Rolls back the session's transaction, if it has one (its page went away).
  // `session`, or every session of a tab (`<tab id>/`, the prefix of the sessions the owner runs
  // for it): a tab that went away may have opened its transaction in any of them.
  endSession: (session) => {
    const tab = typeof session === 'string' && session.endsWith('/');
    const ours = txSession === session || (tab && typeof txSession === 'string' && txSession.startsWith(session));
    if (db && ours && db.inTransaction()) db.exec('ROLLBACK');
    // The channels and relays the tab asked for go with it, unless another tab holds them too.
    if (CAIRN_SYNC && tab) for (const t of [...transports.values()]) releaseTransport(t.handle, session, true);
    return [null];
  },
};
// A panic on purpose, for the tests: in the test build and the sync build (their modules have it).
if (CAIRN_SYNC || CAIRN_TESTING) syncOps.debugPanic = (message) => [engine.debugPanic(String(message))];

// Sync (docs/sync.md): identity, writers, and transports that carry the protocol's bytes.
// Without sync there are no events and no links to let go of; everything else is NO_SYNC.
// (`admit` answers the other sync requests with NO_SYNC, by their prefix.)
if (!CAIRN_SYNC) Object.assign(syncOps, { syncEvents: () => [[]], syncDetach: () => [false] });
else Object.assign(syncOps, {
  syncId: () => [needDb().syncId()],
  syncExportKey: () => {
    const k = needDb().syncExportKey();
    return [k, [k.buffer]];
  },
  syncImportKey: (bytes) => [needDb().syncImportKey(new Uint8Array(bytes))],
  syncSetOwner: (id) => [needDb().syncSetOwner(String(id))],
  syncAuthorize: (scope, writers) => [needDb().syncAuthorize(String(scope), Array.from(writers ?? [], String))],
  syncDigest: () => [needDb().syncDigest()],
  syncPending: () => [needDb().syncPending()],
  syncVerify: () => [needDb().syncVerify()],
  syncEvents: () => [takeSyncEvents()],
  syncAttach: (port) => [attachPort(port)],
  syncRelay: (url) => [holdTransport(`relay ${url}`, () => attachRelay(String(url)))],
  syncBus: (name) => [holdTransport(`bus ${name}`, () => attachBus(String(name)))],
  syncDetach: (link) => [releaseTransport(link, tabOf(currentSession)) ?? detachPort(link)],
});

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

/** cairn's directory in the origin's OPFS, created on first use. */
async function directory() {
  const root = await opfs('/', () => navigator.storage.getDirectory());
  return opfs(DIR, () => root.getDirectoryHandle(DIR, { create: true }));
}

/** The exclusive sync access handle of the file `name` (BUSY while another context holds it). */
async function syncHandle(name, create) {
  engine.checkName(name);
  const dir = await directory();
  const file = await opfs(name, () => dir.getFileHandle(name, { create }));
  return opfs(name, () => file.createSyncAccessHandle());
}

// Ops that wait on the platform.
const asyncOps = {
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
    try {
      db = engine.Database.open(handle, name, durability, options.cachePages ?? 0);
    } catch (e) {
      handle.close(); // the engine closes it too once it holds it; a second close does nothing
      throw e;
    }
    if (CAIRN_SYNC) startSealTimer();
    return [null];
  },
  // Checks the bytes in memory first: nothing is written unless they are a sound database, and
  // never over an existing one (the caller destroys it first, so nothing is lost).
  importFile: async (name, bytes) => {
    name = String(name);
    const data = new Uint8Array(bytes);
    engine.Database.checkImport(data);
    engine.checkName(name);
    const dir = await directory();
    for await (const existing of dir.keys()) {
      if (existing === name) throw err('ALREADY_EXISTS', `a database named ${JSON.stringify(name)} exists; destroy it first to replace it`);
    }
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
    return [null];
  },
};

// The storage layer's block files and their conformance suite: only in the test build of the
// engine (the `testing` feature, dist/test/; CAIRN_TESTING, as CAIRN_SYNC); elsewhere these ops
// are UNKNOWN_OP.
/* global CAIRN_TESTING */
if (CAIRN_TESTING) {
  Object.assign(syncOps, {
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

// ---- sync transports: a MessagePort handed to this Worker carries one link's messages ----
const links = new Map(); // link id -> { port, timer }
let syncEvents = [];
const POLL_MS = 100;

function takeSyncEvents() {
  if (db && stopped === null) for (const e of db.syncEvents()) syncEvents.push(e);
  const out = syncEvents;
  syncEvents = [];
  return out;
}

/** A transport's step failed: an engine trap stops the engine; anything else is an event. */
// Records are signed in blocks: before they leave on a link (its poll seals), and otherwise once
// statements have been idle for SEAL_IDLE_MS, so a database with no peer holds signed history too.
const SEAL_IDLE_MS = 1000;
let lastStatement = 0;
let sealTimer = null;
function startSealTimer() {
  sealTimer ??= setInterval(() => {
    if (!db || stopped !== null || performance.now() - lastStatement < SEAL_IDLE_MS) return;
    try {
      db.syncSeal();
    } catch (e) {
      syncFailed(e);
    }
  }, SEAL_IDLE_MS / 4);
}

function syncFailed(e, kind = 'error') {
  if (e instanceof WebAssembly.RuntimeError) return stop(0, e);
  syncEvents.push([kind, (e && e.code) || 'INTERNAL', (e && e.message) || String(e)]);
}

function attachPort(port) {
  if (!(port instanceof MessagePort)) throw err('INVALID_INPUT', 'sync.connect takes a MessagePort');
  const d = needDb();
  const [link, hello] = d.syncConnect();
  const send = (msgs) => {
    for (const m of msgs) port.postMessage(m, [m.buffer]);
  };
  // Runs one step of the protocol; an error ends the link (and an engine trap stops the engine).
  const step = (f) => {
    if (db !== d || stopped !== null) return detachPort(link);
    try {
      send(f());
    } catch (e) {
      syncFailed(e);
    }
  };
  port.onmessage = (e) => step(() => d.syncReceive(link, new Uint8Array(e.data)));
  const timer = setInterval(() => step(() => d.syncPoll(link)), POLL_MS);
  links.set(link, { port, timer });
  port.postMessage(hello, [hello.buffer]);
  return link;
}

// A relay over WebSocket (docs/relay.md): answer the challenge, then carry sync messages. A cut
// connection is opened again after a pause, with a new link (HELLO resumes where vectors say).
let nextRelay = -1; // relay handles are negative, beside the positive link ids of ports
const relays = new Map(); // handle -> { ws, link, timer, closed }

function attachRelay(url) {
  const d = needDb();
  d.syncId(); // the key pair exists before the first challenge
  const handle = nextRelay--;
  const r = { ws: null, link: null, timer: null, closed: false, retry: null };
  relays.set(handle, r);
  const note = (code, message) => syncEvents.push(['relay', code, message]);
  const step = (f) => {
    if (db !== d || stopped !== null) return detachRelay(handle);
    try {
      for (const m of f()) r.ws.send(m);
    } catch (e) {
      syncFailed(e, 'relay');
    }
  };
  const open = () => {
    if (r.closed) return;
    const ws = new WebSocket(url);
    ws.binaryType = 'arraybuffer';
    r.ws = ws;
    ws.onmessage = (e) => {
      const bytes = new Uint8Array(e.data);
      if (bytes[0] === 0x43 && bytes[1] === 0x52) {
        const type = bytes[3];
        if (type === 1) step(() => [d.syncRelayAuth(bytes)]);
        else if (type === 3) {
          step(() => {
            const [link, hello] = d.syncConnect();
            r.link = link;
            r.timer = setInterval(() => step(() => d.syncPoll(link)), POLL_MS);
            return [hello];
          });
        } else if (type === 4) {
          const text = new TextDecoder();
          // u8 fatal, text code, text message (varint lengths; codes and messages are short).
          let at = 5;
          const str = () => {
            let n = 0, shift = 0, b;
            do { b = bytes[at++]; n |= (b & 0x7f) << shift; shift += 7; } while (b & 0x80);
            const s = text.decode(bytes.subarray(at, at + n));
            at += n;
            return s;
          };
          const code = str();
          note(code, str());
        }
        return;
      }
      if (r.link !== null) step(() => d.syncReceive(r.link, bytes));
    };
    ws.onclose = () => {
      clearInterval(r.timer);
      if (r.link !== null && db === d && stopped === null) d.syncDisconnect(r.link);
      r.link = null;
      if (!r.closed) r.retry = setTimeout(open, 1000);
    };
    ws.onerror = () => note('CONNECTION', `cannot reach the relay at ${url}`);
  };
  open();
  return handle;
}

// A BroadcastChannel: every database on it syncs with every other one (one link per pair).
// Messages are [from, to, bytes] between instances; to = '' announces (bytes 'hi' or 'bye').
const buses = new Map(); // handle -> { bc, peers: Map<instance, link>, timer }

// Channels and relays by what was asked for (`bus <name>`, `relay <url>`): the database joins one
// once however many tabs ask for it (a follower tab asks through the owner), and leaves it when the
// last tab that asked lets go of it or goes away (`endSession` with the tab's prefix).
const transports = new Map(); // key -> { key, handle, holders: Map<tab, count> }

/** The tab a session belongs to: `<tab id>/` for a follower's, '' for this tab's own. */
function tabOf(session) {
  const s = typeof session === 'string' ? session.indexOf('/') : -1;
  return s < 0 ? '' : session.slice(0, s + 1);
}

function holdTransport(key, attach) {
  let t = transports.get(key);
  if (!t || !(buses.has(t.handle) || relays.has(t.handle))) {
    t = { key, handle: attach(), holders: new Map() };
    transports.set(key, t);
  }
  const tab = tabOf(currentSession);
  t.holders.set(tab, (t.holders.get(tab) ?? 0) + 1);
  return t.handle;
}

/** Lets go of one hold (with `all`, every hold) of `tab` on the transport `handle`, and leaves
 * the channel or relay when no hold is left. Undefined when `handle` is no such transport. */
function releaseTransport(handle, tab, all = false) {
  const t = [...transports.values()].find((x) => x.handle === handle);
  if (!t) return undefined;
  const n = t.holders.get(tab) ?? 0;
  if (n === 0 && all) return false;
  // A hold of another tab's when this one has none (a handle passed between tabs).
  const from = n > 0 ? tab : t.holders.keys().next().value;
  const left = all ? 0 : (t.holders.get(from) ?? 1) - 1;
  if (left > 0) t.holders.set(from, left);
  else t.holders.delete(from);
  if (t.holders.size > 0) return true;
  transports.delete(t.key);
  return detachRelay(handle);
}

function attachBus(name) {
  const d = needDb();
  d.syncId();
  const handle = nextRelay--;
  const me = crypto.randomUUID();
  const bc = new BroadcastChannel(`cairn-sync:${name}`);
  const peers = new Map();
  const bus = { bc, peers, timer: null };
  buses.set(handle, bus);
  const send = (peer, msgs) => {
    for (const m of msgs) bc.postMessage([me, peer, m]);
  };
  const linkFor = (peer) => {
    let link = peers.get(peer);
    if (link === undefined) {
      const [l, hello] = d.syncConnect();
      link = l;
      peers.set(peer, link);
      send(peer, [hello]);
    }
    return link;
  };
  bc.onmessage = (e) => {
    if (db !== d || stopped !== null) return detachBus(handle);
    const [from, to, bytes] = e.data;
    try {
      if (to === '') {
        if (bytes === 'hi') linkFor(from);
        else if (bytes === 'bye' && peers.has(from)) {
          d.syncDisconnect(peers.get(from));
          peers.delete(from);
        }
      } else if (to === me) send(from, d.syncReceive(linkFor(from), bytes));
    } catch (err) {
      syncFailed(err);
    }
  };
  bus.timer = setInterval(() => {
    if (db !== d || stopped !== null) return detachBus(handle);
    for (const [peer, link] of peers) {
      try {
        send(peer, d.syncPoll(link));
      } catch (err) {
        syncFailed(err);
      }
    }
  }, POLL_MS);
  bc.postMessage([me, '', 'hi']);
  bus.me = me;
  return handle;
}

function detachBus(handle) {
  const bus = buses.get(handle);
  if (!bus) return false;
  buses.delete(handle);
  clearInterval(bus.timer);
  bus.bc.postMessage([bus.me, '', 'bye']);
  bus.bc.close();
  if (db && stopped === null) for (const link of bus.peers.values()) db.syncDisconnect(link);
  return true;
}

function detachRelay(handle) {
  if (buses.has(handle)) return detachBus(handle);
  const r = relays.get(handle);
  if (!r) return false;
  r.closed = true;
  clearInterval(r.timer);
  clearTimeout(r.retry);
  relays.delete(handle);
  if (r.link !== null && db && stopped === null) db.syncDisconnect(r.link);
  r.ws?.close();
  return true;
}

function detachPort(link) {
  if (link < 0) return detachRelay(link);
  const l = links.get(link);
  if (!l) return false;
  clearInterval(l.timer);
  l.port.onmessage = null;
  l.port.close();
  links.delete(link);
  if (db && stopped === null) db.syncDisconnect(link);
  return true;
}

/** Ops that do not read or write the database through a session, and so never wait for one. */
const sessionless = new Set(['ping', 'inTransaction', 'memory', 'endSession', 'finalize', 'fileOpen', 'fileRead', 'fileWrite',
  'fileLen', 'fileSetLen', 'fileFlush', 'fileClose', 'fileRemove', 'fileList', 'conformanceCases', 'conformanceRun',
  'debugPanic']);

const failure = (id, code, message, extra) => ({ reply: extra === undefined ? [id, ERR, code, message] : [id, ERR, code, message, extra] });

/** Whether `msg` may run now; otherwise the reply to send (an error), or 'park'. */
function admit(id, op, session) {
  if (stopped !== null) return failure(id, 'INTERNAL', `the engine stopped after an internal error: ${stopped}`);
  if (!(op in syncOps) && !(op in asyncOps)) {
    if (!CAIRN_SYNC && /^sync[A-Z]/.test(op)) {
      return failure(id, 'NO_SYNC', 'this build of cairn has no sync: open the database with { sync: true } (cairn-sync.wasm)');
    }
    return failure(id, 'UNKNOWN_OP', `unknown request ${JSON.stringify(op)}`);
  }
  if (!loaded) return failure(id, 'NOT_READY', 'the engine is not loaded: send init first');
  if (txSession !== null && txSession !== session && !sessionless.has(op)) return 'park';
  return null;
}

/** The engine trapped: report it, fail everything waiting, and stop so OPFS handles are released. */
function stop(id, e) {
  stopped = self.__cairnPanic ?? e.message;
  for (const [m, timer] of parked) {
    clearTimeout(timer);
    self.postMessage([m[0], ERR, 'INTERNAL', `internal error: ${stopped}`]);
  }
  parked = [];
  setTimeout(() => self.close(), 0);
  return failure(id, 'INTERNAL', `internal error: ${stopped}`);
}

function caught(id, e) {
  if (e instanceof WebAssembly.RuntimeError) return stop(id, e);
  return failure(id, (e && e.code) || 'INTERNAL', (e && e.message) || String(e), e && e.extra);
}

/** After every statement: which session (if any) now has a transaction open. */
function trackTransaction(session) {
  if (!db || stopped !== null) return;
  const open = db.inTransaction();
  if (open && txSession === null) txSession = session;
  else if (!open && txSession !== null) {
    txSession = null;
    const waiting = parked;
    parked = [];
    for (const [m, timer] of waiting) {
      clearTimeout(timer);
      enqueue(m);
    }
  }
}

/** The ops that can open or end a transaction. */
const statementOps = new Set(['exec', 'execute', 'executePrepared', 'endSession', 'close']);

let currentSession = null; // the session of the sync op running (for the transports' holders)

function runSync(id, op, session, args) {
  try {
    currentSession = session;
    const [result, transfer] = syncOps[op](...args);
    return { reply: [id, OK, result], transfer };
  } catch (e) {
    return caught(id, e);
  } finally {
    if (statementOps.has(op)) {
      trackTransaction(session);
      lastStatement = performance.now();
    }
  }
}

function park(msg) {
  const timer = setTimeout(() => {
    parked = parked.filter(([m]) => m !== msg);
    self.postMessage([msg[0], ERR, 'BUSY', `the database is busy: another transaction has been open for over ${busyTimeout} ms ` +
      '(inside transaction(), run statements on its tx argument, not on the database)']);
  }, busyTimeout);
  parked.push([msg, timer]);
}

/** The engine's module, compiled as it downloads when the server says it is wasm (the glue's own
 * loader does the same, with more code for cases a Worker does not meet). */
async function compile(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  if (r.headers.get('Content-Type')?.startsWith('application/wasm')) return WebAssembly.compileStreaming(r);
  return WebAssembly.compile(await r.arrayBuffer());
}

async function handle(msg) {
  const [id, op, session, ...args] = msg;
  if (op === 'init') {
    const module = new URL(args[0] ?? './cairn.wasm', import.meta.url);
    ready ??= compile(module).then((m) => engine.initSync({ module: m }));
    try {
      wasm = await ready;
      // The rest of the engine, fetched on first use (worker/split.js): unless the page said
      // where, beside the module, its name with -rest (cairn-rest.wasm, cairn-sync-rest.wasm).
      const restName = module.pathname.slice(module.pathname.lastIndexOf('/') + 1).replace(/(\.wasm)?$/, '-rest.wasm');
      restFrom(wasm, new URL(args[1] ?? restName, module));
      loaded = true;
      self.postMessage([id, OK, null]);
    } catch (e) {
      ready = null;
      self.postMessage([id, ERR, 'LOAD_FAILED', `could not load the engine: ${e && e.message ? e.message : e}`]);
    }
    return;
  }
  if (op === 'attachChannel') {
    attachChannel(args[0]);
    self.postMessage([id, OK, null]);
    return;
  }
  const verdict = admit(id, op, session);
  if (verdict === 'park') return park(msg);
  let out = verdict;
  if (!out) {
    if (op in syncOps) out = runSync(id, op, session, args);
    else {
      asyncBusy++;
      try {
        const [result, transfer] = await asyncOps[op](...args);
        out = { reply: [id, OK, result], transfer };
      } catch (e) {
        out = caught(id, e);
      } finally {
        asyncBusy--;
      }
    }
  }
  reply(out);
}

let queue = Promise.resolve();
let queued = 0;
function enqueue(msg) {
  queued++;
  queue = queue.then(() => handle(msg)).finally(() => queued--);
}
// A request that can be answered at once, with nothing ahead of it, is answered in this turn of
// the event loop: no promise hops between the message and its reply.
function answerNow(msg) {
  const [id, op, session, ...args] = msg;
  if (queued > 0 || asyncBusy > 0 || !loaded || !(op in syncOps)) return false;
  const verdict = admit(id, op, session);
  if (verdict === 'park') park(msg);
  else {
    const out = verdict ?? runSync(id, op, session, args);
    reply(out);
  }
  return true;
}
self.onmessage = (event) => {
  if (!answerNow(event.data)) enqueue(event.data);
};

// ---------------------------------------------------------------------------------------------
// The shared-memory channel (protocol.js has its layout). The page writes a request after the
// header and bumps REQ; the Worker writes the reply in the same place and sets DONE to the
// request's number. After a request the Worker blocks for the next one for up to HOT_MS (so a loop
// of statements costs no event-loop turns), then goes back to its event loop and waits
// asynchronously.
const HOT_MS = 2;
let chan = null;
let lastSeq = 0;

function attachChannel(sab) {
  chan = { sab, i32: new Int32Array(sab, 0, 4) };
  lastSeq = Atomics.load(chan.i32, REQ);
  coldWait();
}

function coldWait() {
  const w = Atomics.waitAsync(chan.i32, REQ, lastSeq);
  if (w.async) w.value.then(serveChannel);
  else serveChannel();
}

function serveChannel() {
  for (;;) {
    const seq = Atomics.load(chan.i32, REQ);
    if (seq !== lastSeq) {
      lastSeq = seq;
      serveOne(seq);
      if (stopped !== null) return;
      continue;
    }
    // Requests that came by postMessage must not wait behind a hot loop.
    if (queued > 0 || Atomics.wait(chan.i32, REQ, lastSeq, HOT_MS) === 'timed-out') break;
  }
  coldWait();
}

function serveOne(seq) {
  const start = performance.now();
  const msg = new Reader(chan.sab, HEADER).value();
  const [id, op, session, ...args] = msg;
  let out;
  const verdict = admit(id, op, session);
  if (verdict === 'park' || (verdict === null && (!(op in syncOps) || asyncBusy > 0 || queued > 0))) {
    // Not now: the page sends it again by postMessage, where it waits its turn.
    out = { reply: [id, RESEND] };
  } else out = verdict ?? runSync(id, op, session, args);
  let byPost = false;
  try {
    new Writer(chan.sab, HEADER).value(out.reply);
  } catch (e) {
    if (!(e instanceof Full)) throw e;
    // Too big for the channel: the channel says so, and the reply goes by postMessage. The page
    // may see either first; it keeps a reply that arrives before it knows to wait for one.
    new Writer(chan.sab, HEADER).value([id, REPLY_BY_POST]);
    byPost = true;
  }
  // How long this took, in microseconds: the page spins for the next reply only after quick ones.
  Atomics.store(chan.i32, SERVED, Math.min(0x7fffffff, Math.round((performance.now() - start) * 1000)));
  Atomics.store(chan.i32, DONE, seq);
  Atomics.notify(chan.i32, DONE);
  if (byPost) reply(out);
}
