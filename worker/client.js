// The page side of cairn. `open(name)` returns a Database whose calls return promises; the engine
// runs in a dedicated Worker over OPFS. One tab owns a database at a time (Web Locks); a second
// tab that opens the same name sends its statements through the owner over a BroadcastChannel
// and takes over when the owner goes away (docs/protocol.md, "Tabs").
import {
  OK, ERR, HELLO, PROTOCOL, RESEND, REPLY_BY_POST, MODE_ROWS, MODE_RUN, MODE_FIRST, COL_ARRAY, REQ, DONE, SERVED, HEADER, CHANNEL_OPS,
  Writer, Reader, Full,
} from './protocol.js';

/** Every error cairn reports: a stable `code`, and a message a person can act on. */
export class CairnError extends Error {
  constructor(code, message, extra) {
    super(message);
    this.name = 'CairnError';
    this.code = code;
    if (extra) Object.assign(this, extra);
  }
}

// The Worker without sync carries neither the sync glue nor the transports (docs/size.md).
// Each file is named by a literal `new URL('./file', import.meta.url)`, and each Worker by a
// literal `new Worker(new URL(...), { type: 'module' })`: the patterns Vite and webpack 5 (and
// Rollup's and esbuild's plugins for them) find, emit and rewrite. A computed name hides the file
// from them, and one function per file keeps a minifier from merging two into one. webpack names
// a Worker's chunk after its `name`: each has its own.
const FILES = {
  worker: () => new Worker(new URL('./cairn-worker.js', import.meta.url), { type: 'module', name: 'cairn-worker' }),
  syncWorker: () => new Worker(new URL('./cairn-sync-worker.js', import.meta.url), { type: 'module', name: 'cairn-sync-worker' }),
  wasm: () => new URL('./cairn.wasm', import.meta.url),
  syncWasm: () => new URL('./cairn-sync.wasm', import.meta.url),
  // Named here, not only in the Worker, so that a bundler emits them beside the engine.
  rest: () => new URL('./cairn-rest.wasm', import.meta.url),
  syncRest: () => new URL('./cairn-sync-rest.wasm', import.meta.url),
};

// How long a Worker script has to post its hello (docs/protocol.md, "The hello") once the page saw
// it arrive, and in all when the page cannot see that (no resource timing for it: the default
// URL, which only the bundler knows, or Node.js): long enough for a slow network, never a hang.
const HELLO_MS = 1000;
const HELLO_CAP_MS = 30_000;

// How long the page spins for a reply on the shared-memory channel before it waits for one, and
// the longest time the Worker may have taken over the last request for the page to spin again.
const SPIN_MS = 0.05;
const SPIN_AFTER_US = 35;

/**
 * A running Worker and the requests waiting for its replies. Requests go by postMessage, or, when
 * the page is cross-origin isolated, through a SharedArrayBuffer with Atomics (several times
 * cheaper a round trip). Either way they reach the Worker in the order they were sent.
 */
export class EngineWorker {
  #worker;
  #pending = new Map(); // id -> {resolve, reject}, for replies by postMessage
  #early = new Map(); // id -> reply that came by postMessage before the channel said to expect it
  #queue = []; // requests not yet sent, in order
  #posted = new Map(); // session -> requests of it sent by postMessage and not yet answered
  #chan = null; // {sab, i32}
  #spin = true; // whether the last channel request was served quickly (docs/protocol.md)
  #chanBusy = false;
  #chanReq = null; // the request in flight on the channel
  #nextId = 1;
  #dead = null;
  #greet = null; // takes the Worker's first message, its hello
  #helloDone = null; // stops waiting for the hello
  /** Called once when the Worker dies or stops itself (code, message). */
  onDeath = null;

  constructor(options = {}) {
    // `typeof` of the names themselves: the Node build puts its own Worker in their place.
    const missing = typeof Worker === 'undefined' ? 'Worker' : typeof WebAssembly === 'undefined' ? 'WebAssembly' : null;
    if (missing) throw new CairnError('UNSUPPORTED_BROWSER', `this browser has no ${missing}, which cairn runs in (docs/browsers.md)`);
    const workerUrl = options.sync ? options.syncWorkerUrl : options.workerUrl;
    this.#worker = workerUrl !== undefined ? new Worker(workerUrl, { type: 'module', name: options.sync ? 'cairn-sync-worker' : 'cairn-worker' })
      : options.sync ? FILES.syncWorker() : FILES.worker();
    const url = workerUrl ?? (options.sync ? 'cairn-sync-worker.js beside cairn.js' : 'cairn-worker.js beside cairn.js');
    const check = options.sync ? 'syncWorkerUrl' : 'workerUrl';
    this.#awaitHello(workerUrl, url, check);
    this.#worker.onmessage = (e) => this.#reply(e.data);
    this.#worker.onerror = (e) => {
      e.preventDefault();
      this.#die('WORKER_ERROR', `the cairn Worker (${url}) failed: ${e.message || `it could not start (check ${check})`}`);
    };
    this.#worker.onmessageerror = () => this.#die('WORKER_ERROR', 'a reply from the cairn Worker could not be read');
    const init = [String((options.sync ? options.syncWasmUrl : options.wasmUrl) ?? (options.sync ? FILES.syncWasm() : FILES.wasm()))];
    // The rest of the engine: where the page says, else beside the module (the Worker's default)
    // when the page moved that, else beside this one.
    const [restUrl, wasmUrl] = options.sync ? [options.syncRestWasmUrl, options.syncWasmUrl] : [options.restWasmUrl, options.wasmUrl];
    const rest = restUrl ?? (wasmUrl === undefined ? (options.sync ? FILES.syncRest() : FILES.rest()) : undefined);
    if (rest !== undefined) init.push(String(rest));
    this.ready = this.call('init', init).then(() => this.#attach(options));
  }

  // Fails the Worker unless its hello comes within HELLO_MS of the page seeing its script arrive
  // (a resource timing entry for the URL), or within HELLO_CAP_MS in all. A script that fails to
  // load or throws is an error event instead, at once.
  #awaitHello(workerUrl, url, check) {
    const fail = (code, why) => {
      this.#die(code, `the Worker script at ${url} ${why}`);
      this.#worker.terminate();
    };
    const timers = [];
    const wait = (ms, why) => timers.push(setTimeout(() => fail('WORKER_ERROR', `is not cairn's Worker: it ${why} (check ${check})`), ms));
    wait(HELLO_CAP_MS, `posted no hello within ${HELLO_CAP_MS / 1000} s`);
    let seen = null;
    if (workerUrl !== undefined && typeof PerformanceObserver === 'function' && typeof location === 'object') {
      const href = new URL(String(workerUrl), location.href).href;
      seen = new PerformanceObserver((list) => {
        if (list.getEntriesByName(href).length === 0) return;
        seen.disconnect();
        wait(HELLO_MS, `loaded, but posted no hello within ${HELLO_MS / 1000} s`);
      });
      try {
        seen.observe({ type: 'resource' });
      } catch {
        seen = null;
      }
    }
    this.#helloDone = () => {
      for (const t of timers) clearTimeout(t);
      seen?.disconnect();
      this.#helloDone = this.#greet = null;
    };
    // The first message, which must be the hello: anything else is another script, or cairn's
    // Worker from before the hello (a stale cached copy).
    this.#greet = (msg) => {
      this.#helloDone();
      if (!Array.isArray(msg) || msg[0] !== 0 || msg[1] !== HELLO) fail('WORKER_ERROR', `is not cairn's Worker: its first message was not cairn's hello (check ${check})`);
      else if (msg[2] !== PROTOCOL) fail('WORKER_MISMATCH', `speaks protocol ${msg[2]}, this cairn.js ${PROTOCOL}: serve the files of one build together`);
    };
  }

  async #attach(options) {
    const want = options.channel ?? 'auto';
    if (want === 'postMessage' || !globalThis.crossOriginIsolated || typeof SharedArrayBuffer !== 'function' ||
        typeof Atomics.waitAsync !== 'function') return;
    const sab = new SharedArrayBuffer(options.channelBytes ?? 1 << 20);
    await this.call('attachChannel', [sab]);
    this.#chan = { sab, i32: new Int32Array(sab, 0, 4) };
  }

  /** 'sharedMemory' or 'postMessage': how statements reach the Worker. */
  get channel() {
    return this.#chan ? 'sharedMemory' : 'postMessage';
  }

  get dead() {
    return this.#dead;
  }

  #settle(req, msg) {
    const [, status, a, b, extra] = msg;
    if (status === OK) req.resolve(a);
    else {
      // The Worker stops itself after an internal error; no reply will come for anything else.
      if (a === 'INTERNAL') queueMicrotask(() => this.#die('INTERNAL', b));
      req.reject(new CairnError(a, b, extra));
    }
  }

  #reply(msg) {
    if (this.#greet) return this.#greet(msg);
    // A notice the Worker sends unasked (docs/protocol.md, "Notices"): `onNotice(notice)`.
    if (msg[0] === 0) return this.onNotice?.(msg.slice(1));
    const req = this.#pending.get(msg[0]);
    if (!req) {
      // A channel request whose reply did not fit: it can arrive before the channel's notice.
      if (this.#chanReq?.id === msg[0]) this.#early.set(msg[0], msg);
      return;
    }
    this.#pending.delete(msg[0]);
    this.#unpost(req.session);
    this.#settle(req, msg);
    if (this.#queue.length > 0) this.#pump();
  }

  #die(code, message) {
    if (this.#dead) return;
    this.#helloDone?.();
    this.#dead = new CairnError(code, message);
    for (const p of this.#pending.values()) p.reject(new CairnError(code, message));
    for (const p of this.#queue) p.reject(new CairnError(code, message));
    this.#chanReq?.reject(new CairnError(code, message));
    this.#chanReq = null;
    this.#pending.clear();
    this.#queue = [];
    this.onDeath?.(code, message);
  }

  /** Sends one request outside any session. */
  call(op, args = [], transfer = []) {
    return this.send(op, 0, args, transfer);
  }

  /** Sends one request on `session`; `transfer` lists buffers handed over (unusable here after). */
  send(op, session, args = [], transfer = []) {
    if (this.#dead) return Promise.reject(new CairnError(this.#dead.code, this.#dead.message));
    return new Promise((resolve, reject) => {
      const req = { id: this.#nextId++, op, session, args, transfer, resolve, reject };
      // With nothing queued ahead of it, a request goes out at once (the common case: one
      // awaited statement after another).
      if (this.#queue.length > 0 || this.#chanBusy || !this.#trySend(req)) {
        this.#queue.push(req);
        this.#pump();
      }
    });
  }

  // Sends `req` unless it would overtake a request of its session in flight by postMessage.
  #trySend(req) {
    const viaChannel = this.#chan !== null && CHANNEL_OPS.has(req.op);
    if (viaChannel && this.#posted.has(req.session)) return false;
    if (!viaChannel || !this.#sendByChannel(req)) this.#post(req);
    return true;
  }

  // Sends what can be sent without letting a request overtake an earlier one of its session: a
  // channel request only when nothing of its session is in flight by postMessage, and postMessage
  // requests (which may pipeline) only when the channel is idle. Sessions do not wait for each
  // other here: one may be waiting in the Worker for another's transaction to end.
  #pump() {
    const blocked = new Set(); // sessions with an earlier request still waiting in the queue
    for (let i = 0; i < this.#queue.length && !this.#chanBusy && !this.#dead; ) {
      const req = this.#queue[i];
      if (blocked.has(req.session)) {
        i++;
        continue;
      }
      this.#queue.splice(i, 1);
      if (!this.#trySend(req)) {
        this.#queue.splice(i, 0, req);
        blocked.add(req.session);
        i++;
      }
    }
  }

  #post(req) {
    this.#pending.set(req.id, req);
    this.#posted.set(req.session, (this.#posted.get(req.session) ?? 0) + 1);
    const msg = [req.id, req.op, req.session, ...req.args];
    if (req.transfer.length > 0) this.#worker.postMessage(msg, req.transfer);
    else this.#worker.postMessage(msg);
  }

  #unpost(session) {
    const n = this.#posted.get(session) - 1;
    if (n > 0) this.#posted.set(session, n);
    else this.#posted.delete(session);
  }

  #sendByChannel(req) {
    const { sab, i32 } = this.#chan;
    try {
      new Writer(sab, HEADER).value([req.id, req.op, req.session, ...req.args]);
    } catch (e) {
      if (e instanceof Full) return false;
      req.reject(new CairnError('INVALID_INPUT', e.message));
      return true;
    }
    this.#chanBusy = true;
    this.#chanReq = req;
    const done = Atomics.load(i32, DONE);
    Atomics.add(i32, REQ, 1);
    Atomics.notify(i32, REQ);
    const finish = () => {
      // A wake-up can be stale (a notify meant for the previous request): check before reading.
      if (this.#chanReq !== req) return; // the Worker died meanwhile
      if (Atomics.load(i32, DONE) === done) return wait();
      const msg = new Reader(sab, HEADER).value();
      this.#spin = Atomics.load(i32, SERVED) <= SPIN_AFTER_US;
      this.#chanBusy = false;
      this.#chanReq = null;
      if (msg[1] === RESEND) this.#post(req);
      else if (msg[1] === REPLY_BY_POST) {
        const early = this.#early.get(req.id);
        this.#early.delete(req.id);
        if (early) this.#settle(req, early);
        else {
          this.#pending.set(req.id, req);
          this.#posted.set(req.session, (this.#posted.get(req.session) ?? 0) + 1);
        }
      } else this.#settle(req, msg);
      this.#pump();
    };
    const wait = () => {
      const w = Atomics.waitAsync(i32, DONE, done);
      if (w.async) w.value.then(finish);
      else finish();
    };
    // A reply that comes within SPIN_MS is read at once: an asynchronous wake-up reaches the
    // page as a task, which costs about what a postMessage round trip does. Only after a
    // request the Worker served quickly: spinning while a slow one runs takes a core from it.
    if (this.#spin) {
      const until = performance.now() + SPIN_MS;
      while (Atomics.load(i32, DONE) === done && performance.now() < until);
    }
    wait(); // finishes at once when the reply is there
    return true;
  }

  /** Kills the Worker at once, as a crash would: pending requests fail with `TERMINATED`. */
  terminate() {
    this.#worker.terminate();
    this.#die('TERMINATED', 'the cairn Worker was terminated');
  }
}

// ---------------------------------------------------------------------------------------------
// Results

/**
 * Turns a wire result into what the caller asked for: `[rowCount, changes, lastInsertRowid,
 * columnCount, ...names, kinds, ...values]`, where `kinds === null` means the values follow row by
 * row, and otherwise one array per column (docs/protocol.md, "Results").
 */
function decodeRows(wire, rowMode) {
  const [rowCount, changes, lastInsertRowid, n] = wire;
  const columns = wire.slice(4, 4 + n);
  const at = 5 + n;
  const byRow = wire[4 + n] === null;
  // The value of row r, column c.
  const get = byRow ? (r, c) => wire[at + r * n + c] : (r, c) => wire[at + c][r];
  if (rowMode === 'columns') {
    let values = wire.slice(at);
    if (byRow) {
      values = columns.map(() => new Array(rowCount));
      for (let r = 0; r < rowCount; r++) for (let c = 0; c < n; c++) values[c][r] = get(r, c);
    }
    return { columns, rowCount, values, changes, lastInsertRowid };
  }
  if (rowMode === 'array') {
    let values;
    if (byRow) values = wire.slice(at);
    else {
      values = new Array(rowCount * n);
      for (let c = 0; c < n; c++) {
        const col = wire[at + c];
        for (let r = 0; r < rowCount; r++) values[r * n + c] = col[r];
      }
    }
    return { columns, rowCount, values, changes, lastInsertRowid };
  }
  const rows = new Array(rowCount);
  for (let r = 0; r < rowCount; r++) {
    const row = {};
    for (let c = 0; c < n; c++) row[columns[c]] = get(r, c);
    rows[r] = row;
  }
  return rows;
}

function firstRow(wire) {
  const [rowCount, , , n] = wire;
  if (rowCount === 0) return undefined;
  const byRow = wire[4 + n] === null;
  const row = {};
  for (let c = 0; c < n; c++) row[wire[4 + c]] = byRow ? wire[5 + n + c] : wire[5 + n + c][0];
  return row;
}

const runInfo = (wire) => ({ changes: wire[0], lastInsertRowid: wire[1] });

/** Checks parameters on the page side, so a mistake fails before it crosses to the Worker. */
function params(p) {
  if (p === undefined || p === null) return null;
  if (Array.isArray(p)) return p;
  if (typeof p === 'object' && !ArrayBuffer.isView(p)) return p;
  throw new CairnError('INVALID_INPUT', 'parameters must be an array (positional) or an object (named)');
}

export { COL_ARRAY };

/** The name of a database in memory, with no file: this tab's alone, gone when it closes. */
const MEMORY = ':memory:';

// ---------------------------------------------------------------------------------------------
// Connections: how statements reach the engine, in the owner tab or through it.

let nextSession = 1;
const clientId = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;

/** The tab that owns the database: its own Worker, and it serves the other tabs' requests. */
class OwnerLink {
  constructor(db, worker) {
    this.db = db;
    this.worker = worker;
  }
  send(op, session, args, transfer) {
    return this.worker.send(op, session, args, transfer);
  }
}

// ---------------------------------------------------------------------------------------------

/** A prepared statement: parsed and planned once in the engine, run many times. */
export class Statement {
  #db;
  #session;
  #sql;
  #id = null;
  #gen = -1;
  #finalized = false;
  constructor(db, session, sql) {
    this.#db = db;
    this.#session = session;
    this.#sql = sql;
  }
  get sql() {
    return this.#sql;
  }
  // The engine may have restarted (or another tab taken over) since the statement was prepared:
  // prepare it again there, transparently.
  async #ensure() {
    if (this.#finalized) throw new CairnError('FINALIZED', 'the statement was finalized');
    if (this.#gen !== this.#db._generation) {
      this.#id = await this.#db._send('prepare', this.#session, [this.#sql]);
      this.#gen = this.#db._generation;
    }
    return this.#id;
  }
  async #exec(p, mode) {
    const id = await this.#ensure();
    return this.#db._send('executePrepared', this.#session, [id, params(p), mode]);
  }
  async run(p) {
    return runInfo(await this.#exec(p, MODE_RUN));
  }
  async all(p, { rowMode } = {}) {
    return decodeRows(await this.#exec(p, MODE_ROWS), rowMode);
  }
  async get(p) {
    return firstRow(await this.#exec(p, MODE_FIRST));
  }
  async finalize() {
    if (this.#finalized) return;
    this.#finalized = true;
    if (this.#gen === this.#db._generation && this.#id !== null) await this.#db._send('finalize', this.#session, [this.#id]);
  }
}

/** The statements of one session: the database's own, or one transaction's. */
class Queries {
  constructor(db, session) {
    this._db = db;
    this._session = session;
  }
  /** Runs a parameter-free script of one or more statements. */
  async exec(sql) {
    await this._db._send('exec', this._session, [String(sql)]);
  }
  /** Runs one statement and returns its rows (objects, or `{columns, rowCount, values}` with
   * `rowMode: 'array'`, values flat and row-major). */
  async query(sql, p, { rowMode } = {}) {
    return decodeRows(await this._db._send('execute', this._session, [String(sql), params(p), MODE_ROWS]), rowMode);
  }
  /** Runs one statement and returns `{ changes, lastInsertRowid }`. */
  async run(sql, p) {
    return runInfo(await this._db._send('execute', this._session, [String(sql), params(p), MODE_RUN]));
  }
  /** Runs one statement and returns its first row, or undefined. */
  async get(sql, p) {
    return firstRow(await this._db._send('execute', this._session, [String(sql), params(p), MODE_FIRST]));
  }
  prepare(sql) {
    return new Statement(this._db, this._session, String(sql));
  }
  /** Inside a transaction (`tx.transaction(fn)`): runs `fn(tx)` in a savepoint, released when it
   * resolves; when it throws, rolled back to (what it did is undone, the transaction goes on)
   * and the error rethrown. (`Database` has its own: a transaction.) */
  async transaction(fn) {
    const name = `cairn_savepoint_${++savepoints}`;
    const send = (sql) => this._db._send('exec', this._session, [sql]);
    await send(`SAVEPOINT ${name}`);
    let result;
    try {
      result = await fn(this);
    } catch (e) {
      await send(`ROLLBACK TO ${name}`).then(() => send(`RELEASE ${name}`)).catch(() => {});
      throw e;
    }
    await send(`RELEASE ${name}`);
    return result;
  }
}
let savepoints = 0;

// What a page needs only once it syncs, or once another tab owns the database it opens, is in
// cairn-extra.js, fetched then (worker/extra.js; docs/size.md, "The scripts"): a page that
// opens a database in one tab without sync does not download it.
let extras = null;
const extra = () => (extras ??= import('./extra.js'));

// The replica's methods (worker/extra.js, `Sync`), each loading it on first use; what a call
// takes is read at the call, as the methods themselves do.
const SYNC_METHODS = ['id', 'exportKey', 'setOwner', 'digest', 'pending', 'verify', 'events', 'connect', 'connectChannel', 'connectRelay', 'status', 'compact', 'purge'];
function lazySync(db) {
  let real = null;
  const get = () => (real ??= extra().then((x) => new x.Sync(db, CairnError)));
  const sync = {
    importKey: (bytes) => {
      const copy = new Uint8Array(bytes).slice();
      return get().then((s) => s.importKey(copy));
    },
    authorize: (scope, writerIds) => {
      const ids = Array.from(writerIds, String);
      return get().then((s) => s.authorize(scope, ids));
    },
    revoke: (scope, writerIds) => {
      const ids = Array.from(writerIds, String);
      return get().then((s) => s.revoke(scope, ids));
    },
    // Synchronous, as a subscription is: the listener is added once the module is loaded.
    on: (type, fn) => {
      if ((type !== 'status' && type !== 'event') || typeof fn !== 'function') throw new CairnError('INVALID_INPUT', "sync.on takes 'status' or 'event', and a function");
      const off = get().then((s) => s.on(type, fn));
      return () => void off.then((f) => f());
    },
    _notice: (n) => void real?.then((s) => s._notice(n)),
    _reattach: async () => (await real)?._reattach(),
  };
  for (const m of SYNC_METHODS) sync[m] = (...args) => get().then((s) => s[m](...args));
  return sync;
}

export class Database extends Queries {
  #name;
  #options;
  #link = null;
  #closed = false;
  #release = null; // resolves to give up ownership
  #held = null; // the request of the database's lock
  #sessions = new Set();
  _generation = 0;

  constructor(name, options) {
    super(null, 0);
    this._db = this;
    this._session = nextSession++;
    this.#name = name;
    this.#options = options;
  }

  get name() {
    return this.#name;
  }
  /** How statements reach the engine: 'sharedMemory', 'postMessage', or 'owner tab'. */
  get channel() {
    return this.#link instanceof OwnerLink ? this.#link.worker.channel : 'owner tab';
  }

  /** The engine's memory: `{ wasmBytes }`, the size of the wasm instance's linear memory. */
  memory() {
    return this._send('memory', this._session, []);
  }

  /** Replication: identity, writers, transports (docs/sync.md). */
  get sync() {
    this._sync ??= lazySync(this);
    return this._sync;
  }

  /** The Worker that holds the file, when this tab owns the database. */
  _ownerWorker() {
    return this.#link instanceof OwnerLink ? this.#link.worker : null;
  }

  /**
   * A live query: calls `cb(result)` with the result of `sql` now, and again after each commit
   * (of this tab, another tab, or a sync apply) that changed a table it reads, when the result
   * differs from the last one. `rowMode` as for `query`; errors go to `onError(error)`, or when
   * none is given are thrown as the page's uncaught error. Returns the function that stops it.
   */
  watch(sql, p, cb, options = {}) {
    if (typeof cb !== 'function') throw new CairnError('INVALID_INPUT', 'watch(sql, params, callback, options): the callback is not a function');
    const args = [String(sql), params(p)];
    const stop = this.#live().then((l) => l.watch(...args, cb, options));
    return () => void stop.then((s) => s());
  }

  /** Calls `cb({ tables: [{ table, inserted, updated, deleted }], commits, schema, origin })`
   * after each commit; `origin` is 'local' (this tab), 'tab' (another tab) or 'sync'. Returns
   * the function that stops it. */
  onChange(cb) {
    if (typeof cb !== 'function') throw new CairnError('INVALID_INPUT', 'onChange takes a function');
    const off = this.#live().then((l) => l.onChange(cb));
    return () => void off.then((f) => f());
  }

  // Live queries are in cairn-extra.js (worker/extra.js, `Live`), loaded on the first watch.
  #liveP = null;
  #live() {
    const tab = () => (this.isOwner ? '' : `${clientId}/`); // as the Worker names this tab's sessions
    return (this.#liveP ??= extra().then((x) => (this._live = new x.Live(this, { CairnError, decodeRows, tab }))));
  }

  /** The records of `table` (worker/records.js, in cairn-extra.js): each call loads it on first
   * use; `watch` returns its stop function at once. */
  records(t) {
    return new Proxy({}, { get: (_, m) => m != 'then' && ((...a) => {
      const p = this.#live().then((l) => l.records(t, m, a));
      return m == 'watch' ? () => void p.then((f) => f()) : p;
    }) });
  }

  /** Tables and indexes: `[{ type, name, table, sql }]`. */
  schema() {
    return this._send('schema', this._session, []);
  }

  /** Whether this tab owns the database (its Worker holds the file). */
  get isOwner() {
    return this.#link instanceof OwnerLink;
  }

  async _connect() {
    // A database in memory is this tab's alone: no lock, no other tab to serve.
    if (!('locks' in navigator) || this.#name === MEMORY) {
      await this.#becomeOwner();
      return;
    }
    // The Worker starts (fetches and compiles the engine, wakes the origin's storage) while the
    // lock is asked for, which in a new profile takes tens of milliseconds; a tab that turns out
    // not to own the database lets it go.
    let early = new EngineWorker(this.#options);
    early.ready.catch(() => {});
    this.bus = new BroadcastChannel(`cairn:${this.#name}`);
    this.bus.onmessage = (e) => this.#onChannel(e.data);
    // Held for this tab's lifetime, so the owner learns when this tab goes away.
    navigator.locks.request(`cairn:client:${clientId}`, () => new Promise((r) => { this.#releaseClient = r; }));
    const lockName = `cairn:db:${this.#name}`;
    let first = true;
    let failed = null;
    await new Promise((resolve, reject) => {
      const hold = async () => {
        const worker = early;
        early = null;
        try {
          await this.#becomeOwner(worker);
        } catch (e) {
          // open() fails once the lock is let go (below), not before: an open() of the same name
          // right after must find it free, not follow an owner that is not there.
          if (first) failed = e;
          return;
        }
        if (first) resolve();
        first = false;
        // Ownership lasts until close(), or until this tab goes away.
        await new Promise((r) => { this.#release = r; });
      };
      // Settles once this tab holds the lock no more (close() waits for it, so that the
      // database is free when close() resolves: reopened at once, this tab owns it again).
      this.#held = navigator.locks.request(lockName, { ifAvailable: true }, async (lock) => {
        if (lock) return hold();
        early.terminate();
        early = null;
        const { FollowerLink } = await extra();
        this.#link = new FollowerLink(this, { CairnError, clientId });
        first = false;
        resolve();
        // Wait in line to take over when the owner goes away.
        return navigator.locks.request(lockName, async () => {
          if (this.#closed) return;
          const follower = this.#link;
          await hold();
          void follower;
        });
      });
      this.#held.then(() => failed && reject(failed), reject);
    });
  }

  #releaseClient = null;

  /** Opens the database in `worker` (a new one when null) and makes this tab its owner. */
  async #becomeOwner(worker = null) {
    const preload = this.#options.preloadRest ?? 'background';
    if (preload !== 'background' && preload !== 'wait') {
      worker?.terminate();
      throw new CairnError('INVALID_INPUT', `preloadRest must be "background" or "wait", not ${JSON.stringify(preload)}`);
    }
    worker ??= new EngineWorker(this.#options);
    try {
      await worker.ready;
      await worker.call('open', [this.#name, {
        create: this.#options.create !== false,
        durability: this.#options.durability ?? 'full',
        cachePages: this.#options.cachePages ?? 0,
        busyTimeout: this.#options.busyTimeout ?? 5000,
      }]);
      // The Worker fetches the rest of the engine in the background once the engine is loaded.
      if (preload === 'wait') await worker.call('loadRest');
    } catch (e) {
      worker.terminate();
      throw e;
    }
    const previous = this.#link;
    const link = new OwnerLink(this, worker);
    this._generation++;
    this.#link = link;
    worker.onDeath = (code) => this.#onWorkerDeath(link, code);
    // Notices (the sync status, a relay's request for a token) reach this tab and the others.
    worker.onNotice = (n) => {
      if (n[0] === 'watch' || n[0] === 'change') {
        this._live?._notice(n);
        // A change is every tab's news; a query's result, the watching tab's.
        if ((n[0] === 'change' || n[1] !== '') && !this.#closed) this.bus?.postMessage({ t: 'live', n });
        return;
      }
      this._sync?._notice(n);
      if (!this.#closed) this.bus?.postMessage({ t: 'sync', n });
    };
    // The live queries ran in the Worker before this one (this tab's, or the old owner's).
    if (previous) void this._live?._reattach();
    if (previous?.drain) {
      previous.drain(link);
      // The channels and relays this tab asked for ran in the old owner's Worker.
      void this._sync?._reattach().catch(() => {});
    }
    this.bus?.postMessage({ t: 'owner', from: clientId });
  }

  // A panic stops the Worker; a new one opens the database at its last committed state, and calls
  // made meanwhile wait for it.
  #restarting = null;
  #onWorkerDeath(link, code) {
    if (this.#closed || this.#link !== link || code === 'TERMINATED') return;
    this.#restarting = this.#becomeOwner()
      .then(() => this._sync?._reattach())
      .catch(() => {}) // the next call reports the failure
      .finally(() => { this.#restarting = null; });
  }

  #watched = new Set();
  #onChannel(m) {
    if (m.t === 'owner') {
      if (this.#link?.ownerChanged && m.from !== clientId) {
        this._generation++;
        this.#link.ownerChanged();
        this._live?._reattach();
        // What this tab asked for ran in the old owner's Worker: ask the new one.
        void this._sync?._reattach().catch(() => {});
      }
      return;
    }
    if (m.t === 'sync') return void this._sync?._notice(m.n);
    if (m.t === 'live') return void this._live?._notice(m.n);
    if (m.t === 'ack' || m.t === 'res') {
      if (m.to === clientId) this.#link?.onMessage?.(m);
      return;
    }
    if (m.t === 'req' && this.#link instanceof OwnerLink) {
      const { from, id, op, session, args } = m;
      this.bus.postMessage({ t: 'ack', to: from, id });
      const remoteSession = `${from}/${session}`;
      if (!this.#watched.has(from)) {
        this.#watched.add(from);
        // When that tab goes away, roll back whatever transaction it left open.
        navigator.locks.request(`cairn:client:${from}`, () => {
          this.#watched.delete(from);
          // Any of its sessions may hold the transaction: end them all.
          if (this.#link instanceof OwnerLink) return this.#link.worker.call('endSession', [`${from}/`]).catch(() => {});
        });
      }
      this.#link.send(op, remoteSession, args, []).then(
        (result) => this.bus.postMessage({ t: 'res', to: from, id, reply: [OK, result] }),
        (e) => this.bus.postMessage({ t: 'res', to: from, id, reply: [ERR, e.code, e.message, extraOf(e)] }),
      );
    }
  }

  // Not async: an awaited statement's promise is the link's own, with no promise wrapped around it.
  _send(op, session, args, transfer = []) {
    if (this.#restarting) return this.#restarting.then(() => this._send(op, session, args, transfer));
    if (this.#closed) return Promise.reject(new CairnError('CLOSED', 'the database was closed'));
    return this.#link.send(op, session, args, transfer);
  }

  /**
   * Runs `fn(tx)` in a transaction: commits when it resolves, rolls back when it throws. Statements
   * inside must go through `tx`; the database's other callers wait until the transaction ends.
   */
  async transaction(fn) {
    const session = nextSession++;
    const tx = new Queries(this, session);
    this.#sessions.add(session);
    try {
      await this._send('exec', session, ['BEGIN']);
      let result;
      try {
        result = await fn(tx);
      } catch (e) {
        await this._send('exec', session, ['ROLLBACK']).catch(() => {});
        throw e;
      }
      await this._send('exec', session, ['COMMIT']);
      return result;
    } finally {
      this.#sessions.delete(session);
    }
  }

  /** Walks every page and index entry; resolves to the list of problems found (empty when sound). */
  check() {
    return this._send('check', this._session, []);
  }

  /** The database file as bytes, as of the last commit; with `onProgress`, in pieces, calling
   * it with `{ done, total }` (bytes) after each. */
  async export({ onProgress } = {}) {
    const { id, total } = await this._send('exportBegin', this._session, []);
    if (!onProgress) return this._send('exportChunk', this._session, [id, 0, total]);
    const out = new Uint8Array(total);
    for (let done = 0; done < total; ) {
      const piece = await this._send('exportChunk', this._session, [id, done, CHUNK]);
      out.set(piece, done);
      done += piece.length;
      onProgress({ done, total });
    }
    return out;
  }

  async close() {
    if (this.#closed) return;
    const link = this.#link;
    if (link instanceof OwnerLink) {
      await link.worker.call('close').catch(() => {});
      link.worker.terminate();
    } else link?.close();
    this.#closed = true;
    this.#release?.();
    this.#releaseClient?.();
    this.bus?.close();
    // An owner's close() resolves once the lock is free (a follower's place in line is let go
    // when its turn comes).
    if (link instanceof OwnerLink) await this.#held?.catch(() => {});
  }
}

function extraOf(e) {
  const extra = {};
  for (const k of Object.keys(e)) if (k !== 'code' && k !== 'name') extra[k] = e[k];
  return Object.keys(extra).length ? extra : undefined;
}

/** Opens the database `name` in this origin's OPFS, creating it unless `create: false`, and
 * runs the `migrations` it has not had yet (worker/extra.js, fetched while the database opens). */
export async function open(name, options = {}) {
  const x = options.migrations === undefined ? null : extra();
  const db = new Database(String(name), options);
  await db._connect();
  if (x) {
    await (await x).migrate(db, options.migrations, { CairnError, MEMORY }).catch(async (e) => {
      await db.close();
      throw e;
    });
  }
  return db;
}

/** Creates (or opens) the database `name`. */
export const create = (name, options = {}) => open(name, { ...options, create: true });

/** Runs `fn(worker)` on a short-lived Worker that holds no database. */
async function withWorker(options, fn) {
  const w = new EngineWorker(options);
  try {
    await w.ready;
    return await fn(w);
  } finally {
    w.terminate();
  }
}

// Exports with progress go in pieces of this size: each is transferred from the Worker on its own.
const CHUNK = 1 << 20;

/**
 * Writes `source` (bytes, a Blob, or a ReadableStream of bytes) as the database `name`, in pieces sent to
 * the Worker as they come, calling `onProgress({ done, total })` after each. The whole file is
 * checked before anything is written: bytes that are not a sound cairn database are refused, and
 * a database already under `name` is refused too unless `replace: true`, and stays as it was
 * when the import fails. A stream's `total` is what `options.total` says (else null). The code is
 * in cairn-extra.js (worker/extra.js), loaded on the first import.
 */
export const importDatabase = (name, source, options = {}) =>
  extra().then((x) => x.importDatabase(name, source, options, { CairnError, withWorker }));
export { importDatabase as import };

/** Deletes the database `name`. Fails with BUSY while a tab has it open. */
export function destroy(name, options = {}) {
  return withWorker(options, (w) => w.call('destroy', [String(name)]));
}

/** Starts a Worker and waits until its engine is loaded. */
export async function startWorker(options = {}) {
  const w = new EngineWorker(options);
  await w.ready;
  return w;
}
