// The parts of the page-side client that a page needs only once it syncs (`Sync`, behind
// `db.sync`), once another tab owns the database it opens (`FollowerLink`), when it imports a
// database (`importDatabase`), or opens one with `migrations` (`migrate`), and the live queries
// and records (`Live`, with worker/records.js bundled in). worker/client.js
// imports this module the first time it needs one; the build makes it cairn-extra.js, beside
// cairn.js (docs/size.md, "The scripts"). What it needs of the client comes as arguments, so that
// it never holds a second copy of the client's classes; of the protocol, it takes a constant.
import { OK, sameResult } from './protocol.js';
import { Records } from './records.js';

/** A database's replica: its author id and key, who may write to its scopes, and the links
 * that carry the sync protocol to peers (another database, a relay). */
export class Sync {
  #db;
  #error;
  constructor(db, CairnError) {
    this.#db = db;
    this.#error = CairnError;
  }
  #send(op, args = [], transfer = []) {
    return this.#db._send(op, this.#db._session, args, transfer);
  }
  /** This database's author id: 64 hex digits (the key pair is made on first use). */
  id() {
    return this.#send('syncId');
  }
  /** The key pair, to move this identity to another device. Keep it secret: it is kept in the
   * database's key file, never in its file, so `export()` does not carry it. */
  exportKey() {
    return this.#send('syncExportKey');
  }
  /** Takes an exported key pair (refused once this database has written changes of its own): how
   * an imported database signs as the author it was exported from, rather than as its own. */
  importKey(bytes) {
    const copy = new Uint8Array(bytes).slice();
    return this.#send('syncImportKey', [copy.buffer], [copy.buffer]);
  }
  /** Writes go to the scopes of `ownerId` (default: this database's own id). */
  setOwner(ownerId) {
    return this.#send('syncSetOwner', [String(ownerId)]);
  }
  /** As a scope's owner, lets `writerIds` write to scope `scope` (a table name, or
   * `table/column=value` for a scoped table). Lists only grow. */
  authorize(scope, writerIds) {
    return this.#send('syncAuthorize', [String(scope), Array.from(writerIds, String)]);
  }
  /** As a scope's owner, removes `writerIds` from its writers: each keeps what this database
   * holds of its writes there; its later ones are refused on every replica. */
  revoke(scope, writerIds) {
    return this.#send('syncRevoke', [String(scope), Array.from(writerIds, String)]);
  }
  /** Equal on two replicas that hold the same changes. */
  digest() {
    return this.#send('syncDigest');
  }
  /** Records committed here and not yet signed: they are sealed into a block before they leave
   * on a link, or once statements have been idle for a second. */
  pending() {
    return this.#send('syncPending');
  }
  /** Drops the history every known peer has acknowledged (up to the owner's attestations,
   * docs/sync.md sec. 8); resolves to the number of records dropped. */
  compact() {
    return this.#send('syncCompact');
  }
  /** Deletes the row of replicated table `table` whose primary key is `key` (a value, or the
   * values of a key of several columns) and erases its values from the history held here; a
   * signed tombstone makes every replica do the same. Resolves to whether the row existed. */
  purge(table, key) {
    return this.#send('syncPurge', [String(table), Array.isArray(key) ? key : [key]]);
  }
  /** Re-checks every stored signature and chain link; returns the problems (empty when sound). */
  verify() {
    return this.#send('syncVerify');
  }
  /** What happened since the last call: `[{ kind, code, detail }]` (`applied`, `rejected` with
   * the reason, `fork`, `peer_rejected`, `row_refused`, `error`). */
  async events() {
    const raw = await this.#send('syncEvents');
    return raw.map(([kind, code, detail]) => ({ kind, code, detail }));
  }
  /** Syncs with whatever is at the other end of `port` (a `MessagePort`: another database's
   * `sync.connect`, or a bridge to a relay). The port moves into the Worker, which runs the
   * protocol by itself. Returns `{ link, close() }`. Only the tab that owns the database can.
   * The port dies with the Worker: after an engine restart, connect a new one. */
  async connect(port) {
    const worker = this.#owner('sync.connect');
    const link = await worker.call('syncAttach', [port], [port]);
    return { link, close: () => worker.call('syncDetach', [link]) };
  }
  /** Syncs with every other database (in this tab, other tabs, their Workers) that joins the
   * BroadcastChannel `name`: one link per pair, run inside the owner tab's Worker. Any tab may ask
   * (a second tab's request goes through the owner); the database joins a channel once however
   * many tabs ask, and leaves it when the last of them closes it or goes away. A tab that takes
   * over the database, or whose engine restarts, joins the channels it asked for again. */
  async connectChannel(name) {
    return this.#transport('syncBus', String(name));
  }
  /** Syncs through a relay (`ws://` or `wss://` URL, docs/relay.md), or one of several relays
   * that share one database (an array: one connection at a time, moving on to the next URL when
   * a connection fails or ends). The owner tab's Worker answers the relay's challenge with this
   * database's key, runs the protocol, and after a cut waits (backoff with jitter, the relay's
   * `retry_after_ms`, not while offline) before it tries again. `options.token`: a string sent
   * before every authentication (suits tests), or a function, called for a fresh token before
   * each attempt (suits apps: tokens expire). Refusals arrive as events of kind `relay`;
   * `status()` and `on('status')` follow the connections. Any tab may ask, as for
   * `connectChannel`, with the same sharing (the options of the first call win) and the same
   * reconnection after a take-over or an engine restart. Returns `{ link, close() }`. */
  async connectRelay(urls, options = {}) {
    const list = Array.isArray(urls) ? urls.map(String) : [String(urls)];
    const token = options?.token;
    if (token !== undefined && typeof token !== 'string' && typeof token !== 'function') {
      throw new this.#error('INVALID_INPUT', 'the relay token is a string or a function that returns one');
    }
    if (typeof token === 'function') this.#tokens.set(list.join(' '), token);
    return this.#transport('syncRelay', list, { token: typeof token === 'function' ? true : token });
  }
  /** The relays' connections and what is left to sync: `{ relays: [{ url, state, lastError?,
   * retryInMs?, lastSyncedAt? }], pending, lastSyncedAt }` (docs/sync.md 10b, "Status"). */
  status() {
    return this.#send('syncStatus');
  }
  /** `'status'`: calls `fn(status)` each time the status changes; `'event'`: `fn(event)` for
   * each sync event, as `events()` gives them. Returns the function that stops it. */
  on(type, fn) {
    // `type` checked by the caller (worker/client.js), before loading this
    const set = type === 'status' ? this.#listeners : this.#eventListeners;
    set.add(fn);
    return () => void set.delete(fn);
  }
  #listeners = new Set();
  #eventListeners = new Set();
  #tokens = new Map(); // the relays' URLs, joined by spaces -> the page's token function
  /** A notice from the Worker (docs/protocol.md, "Notices"), in this tab or passed on by the
   * owner tab. */
  _notice([kind, a, b]) {
    const call = (set, v) => {
      for (const fn of set) {
        try {
          fn(v);
        } catch (e) {
          queueMicrotask(() => { throw e; }); // the page's error, reported as the page's
        }
      }
    };
    if (kind === 'status') call(this.#listeners, a);
    else if (kind === 'events') {
      for (const [k, code, detail] of a) call(this.#eventListeners, Object.freeze({ kind: k, code, detail }));
    } else if (kind === 'token') {
      const fn = this.#tokens.get(a);
      if (!fn) return;
      // Every tab holding a function for these relays answers; the Worker takes the first.
      Promise.resolve()
        .then(fn)
        .then(
          (token) => this.#send('syncRelayToken', [a, b, typeof token === 'string' ? token : null, 'it returned no string']),
          (e) => this.#send('syncRelayToken', [a, b, null, String(e?.message ?? e)]),
        )
        .catch(() => {});
    }
  }

  #owner(what) {
    const worker = this.#db._ownerWorker();
    if (!worker) throw new this.#error('NOT_OWNER', `${what} runs in the tab that owns the database (db.isOwner)`);
    return worker;
  }
  // Channels and relays this tab asked for, to ask for again from a new owner (this tab after a
  // take-over or an engine restart, or another tab that took over).
  #transports = new Set();
  async #transport(op, ...args) {
    const t = { op, args, link: await this.#send(op, args) };
    this.#transports.add(t);
    return {
      get link() {
        return t.link;
      },
      close: async () => {
        if (!this.#transports.delete(t)) return false;
        return (await this.#send('syncDetach', [t.link]).catch(() => false)) ?? false;
      },
    };
  }
  /** After a new Worker took the database (this tab's engine restarted, this tab took over, or
   * another tab did): the transports this tab asked for, again. */
  async _reattach() {
    for (const t of this.#transports) {
      try {
        // The owner's own Worker directly: during a restart, requests through the database wait
        // for the restart, which waits for this.
        const worker = this.#db._ownerWorker();
        t.link = await (worker ? worker.call(t.op, t.args) : this.#send(t.op, t.args));
      } catch {
        this.#transports.delete(t); // the database was reopened without sync
      }
    }
  }
}

/** Calls the page's function; what it throws is reported as the page's own error, and does not
 * stop the other callbacks. */
function call(fn, arg) {
  try {
    fn(arg);
  } catch (e) {
    queueMicrotask(() => { throw e; });
  }
}

/** A database's live queries and change listeners in this tab (`db.watch`, `db.onChange`). The
 * owner tab's Worker runs the queries again after each commit (worker/watch.js) and sends a
 * result only when it changed; this tab's requests, and the notices for it, go through the owner
 * when another tab owns the database. */
export class Live {
  #db;
  #opts;
  #byId = new Map(); // the Worker's watch id -> watcher
  #all = new Set(); // watchers not stopped
  #listeners = new Set();
  /** `opts`: `{ CairnError, decodeRows, tab }`, `tab()` the name the Worker gives this tab. */
  constructor(db, opts) {
    this.#db = db;
    this.#opts = opts;
  }
  #send(op, args) {
    return this.#db._send(op, this.#db._session, args);
  }
  watch(sql, params, cb, { rowMode, onError } = {}) {
    const w = { sql, params, cb, rowMode, onError, id: null, last: null, stopped: false, token: null };
    this.#all.add(w);
    void this.#start(w);
    return () => {
      if (w.stopped) return;
      w.stopped = true;
      this.#all.delete(w);
      if (w.id !== null) this.#unwatch(w.id);
    };
  }
  #unwatch(id) {
    this.#byId.delete(id);
    this.#send('unwatch', [id]).catch(() => {});
  }
  async #start(w) {
    const token = (w.token = {});
    let id, wire;
    try {
      [id, wire] = await this.#send('watch', [w.sql, w.params]);
    } catch (e) {
      if (!w.stopped && w.token === token) this.#fail(w, e);
      return;
    }
    // Stopped meanwhile, or asked again of a new owner.
    if (w.stopped || w.token !== token) return this.#unwatch(id);
    w.id = id;
    this.#byId.set(id, w);
    this.#deliver(w, wire);
  }
  #deliver(w, wire) {
    if (w.last && sameResult(w.last, wire)) return;
    w.last = wire;
    call(w.cb, this.#opts.decodeRows(wire, w.rowMode));
  }
  #fail(w, e) {
    w.last = null;
    if (w.onError) call(w.onError, e);
    else queueMicrotask(() => { throw e; }); // no error path given: the page's uncaught error
  }
  onChange(fn) {
    return this._listen({ fn, on: false });
  }
  /** Adds listener `l`: `l.fn(change)`, or `l.raw(change, session)` with the committing session;
   * `l.on` says whether the Worker has it, and `l.reset()` is called each time it does not. */
  _listen(l) {
    this.#listeners.add(l);
    this.#listen(l);
    return () => {
      if (this.#listeners.delete(l)) this.#send('watchChanges', [false]).catch(() => {});
    };
  }
  // A listener hears of the commits after the Worker took it: a notice that arrives before the
  // Worker's reply is of a commit made before.
  #listen(l) {
    l.on = false;
    l.reset?.();
    this.#send('watchChanges', [true]).then(() => { l.on = true; }, () => {});
  }
  /** `db.records(table)[method](...args)` (worker/records.js). */
  records(table, method, args) {
    this.#records ??= new Records(this.#db, this.#opts, this);
    return this.#records.call(String(table), method, args);
  }
  #records = null;
  /** A `watch` or `change` notice (docs/protocol.md, "Live queries"), from this tab's Worker or
   * passed on by the owner tab. */
  _notice([kind, a, b, wire, e]) {
    const tab = this.#opts.tab();
    if (kind === 'change') {
      const change = { ...b, origin: a === 'sync' ? 'sync' : a === tab ? 'local' : 'tab' };
      for (const l of this.#listeners) if (l.on) l.raw ? l.raw(change, wire) : call(l.fn, change);
      return;
    }
    if (a !== tab) return;
    for (const id of b) {
      const w = this.#byId.get(id);
      if (!w) continue;
      if (e) this.#fail(w, new this.#opts.CairnError(e[0], e[1]));
      else this.#deliver(w, wire);
    }
  }
  /** A new Worker holds the database (a take-over, an engine restart): every watcher and listener
   * is asked of it again; a watcher hears of the result only if it differs from its last. */
  _reattach() {
    this.#byId.clear();
    for (const w of this.#all) {
      w.id = null; // the old Worker's: the new one may have given it to another watcher
      void this.#start(w);
    }
    for (const l of this.#listeners) this.#listen(l);
  }
}

/** A tab that does not own the database: requests go to the owner over the channel. */
export class FollowerLink {
  #pending = new Map();
  #nextId = 1;
  constructor(db, { CairnError, clientId }) {
    this.db = db;
    this.error = CairnError;
    this.from = clientId;
    this.timer = setInterval(() => this.#resendUnacked(), 250);
  }
  send(op, session, args) {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const req = { id, op, session, args, acked: false, resolve, reject };
      this.#pending.set(id, req);
      this.#post(req);
    });
  }
  #post(req) {
    this.db.bus.postMessage({ t: 'req', from: this.from, id: req.id, op: req.op, session: req.session, args: req.args });
  }
  #resendUnacked() {
    for (const req of this.#pending.values()) if (!req.acked) this.#post(req);
  }
  onMessage(m) {
    const req = this.#pending.get(m.id);
    if (!req) return;
    if (m.t === 'ack') req.acked = true;
    else if (m.t === 'res') {
      this.#pending.delete(m.id);
      const [status, a, b, extra] = m.reply;
      if (status === OK) req.resolve(a);
      else req.reject(new this.error(a, b, extra));
    }
  }
  /** A new owner took over: requests it never received are sent again; the outcome of those the
   * old owner had received is unknown, and they fail with OWNER_GONE. */
  ownerChanged() {
    for (const [id, req] of this.#pending) {
      if (req.acked) {
        this.#pending.delete(id);
        req.reject(new this.error('OWNER_GONE', 'the tab that held the database closed while this statement was in flight; it may or may not have been applied'));
      } else this.#post(req);
    }
  }
  /** Hands requests still waiting to the next link (this tab became the owner). */
  drain(next) {
    clearInterval(this.timer);
    this.ownerChanged();
    for (const req of this.#pending.values()) next.send(req.op, req.session, req.args).then(req.resolve, req.reject);
    this.#pending.clear();
  }
  close() {
    clearInterval(this.timer);
    for (const req of this.#pending.values()) req.reject(new this.error('CLOSED', 'the database was closed'));
    this.#pending.clear();
  }
}

// ---------------------------------------------------------------------------------------------
// Imports

// An import goes in pieces of this size: each is transferred to the Worker on its own, so the
// page never holds a second copy of a large file nor clones one in one message.
const CHUNK = 1 << 20;

/** The bytes of `source` as a Uint8Array over them (no copy), or null when it is not bytes. */
function bytesOf(source) {
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  if (Array.isArray(source)) return Uint8Array.from(source);
  return null;
}

/** The pieces of a ReadableStream, or of any async iterable of bytes (a Node.js stream). */
async function* piecesOf(source) {
  if (typeof source.getReader === 'function') {
    const reader = source.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        yield value;
      }
    } finally {
      reader.releaseLock();
    }
  }
  yield* source;
}

/** worker/client.js's `importDatabase`, with the client's `CairnError` and `withWorker`. */
export async function importDatabase(name, source, options, { CairnError, withWorker }) {
  // A File (from an <input type=file>, say) is read as a stream of known length.
  if (typeof Blob === 'function' && source instanceof Blob) {
    return importDatabase(name, source.stream(), { ...options, total: options.total ?? source.size }, { CairnError, withWorker });
  }
  const { onProgress, replace = false } = options;
  const bytes = bytesOf(source);
  const stream = bytes === null && typeof source === 'object' && source !== null &&
    (typeof source.getReader === 'function' || Symbol.asyncIterator in source);
  if (bytes === null && !stream) {
    throw new CairnError('INVALID_INPUT', 'import takes bytes (a Uint8Array or ArrayBuffer), a Blob or a ReadableStream of bytes');
  }
  const total = bytes ? bytes.length : (options.total ?? null);
  return withWorker(options, async (w) => {
    await w.call('importBegin', [String(name), { replace: !!replace }]);
    let done = 0;
    const send = async (piece) => {
      done = await w.call('importChunk', [piece.buffer], [piece.buffer]);
      onProgress?.({ done, total });
    };
    if (bytes) {
      for (let at = 0; at < bytes.length; at += CHUNK) await send(bytes.slice(at, at + CHUNK));
    } else {
      // A stream's pieces are sent as pieces of CHUNK: small ones (a Node.js file stream's are
      // 64 KiB) gathered, large ones (a Blob's may be several MiB) cut; `all` sends the tail too.
      let held = [];
      let heldBytes = 0;
      const flush = async (all) => {
        const joined = new Uint8Array(heldBytes);
        let at = 0;
        for (const h of held) {
          joined.set(h, at);
          at += h.length;
        }
        for (at = 0; joined.length - at >= CHUNK || (all && at < joined.length); at += CHUNK) {
          await send(joined.slice(at, at + CHUNK));
        }
        held = [joined.subarray(at)];
        heldBytes = joined.length - at;
      };
      try {
        for await (const value of piecesOf(source)) {
          const v = bytesOf(value);
          if (v === null) throw new CairnError('INVALID_INPUT', 'the import stream gave something other than bytes');
          held.push(v.slice());
          heldBytes += v.length;
          if (heldBytes >= CHUNK) await flush(false);
        }
      } catch (e) {
        if (e instanceof CairnError) throw e;
        throw new CairnError('IMPORT_INCOMPLETE', `the import stream failed after ${done + heldBytes} bytes: ${e?.message ?? e}; nothing was written`);
      }
      if (heldBytes > 0) await flush(true);
    }
    if (total !== null && done !== total) {
      throw new CairnError('IMPORT_INCOMPLETE', `the import stream ended after ${done} of ${total} bytes; nothing was written`);
    }
    await w.call('importEnd');
  });
}

// `migrations` as `[{ version, up }]`: a SQL script at index i is version i + 1; versions rise.
function migrationSteps(list, CairnError) {
  const bad = (why) => new CairnError('INVALID_INPUT', `migrations: ${why}`);
  if (!Array.isArray(list)) throw bad('must be an array of SQL scripts or of { version, up }');
  let last = 0;
  return list.map((m, i) => {
    const step = typeof m === 'string' ? { version: i + 1, up: m } : m;
    const { version, up } = step ?? {};
    if (!Number.isInteger(version) || version <= last) throw bad(`the version at index ${i} must be an integer above ${last}`);
    if (typeof up !== 'string' && typeof up !== 'function') throw bad(`version ${version}'s up must be a SQL script or a function`);
    last = version;
    return { version, up };
  });
}

/**
 * Runs the steps of `list` (`open`'s `migrations`) that `db` has not had: each missing one in a
 * transaction of its own that also sets `user_version`, so that a step that fails leaves the
 * database at the version before it. One tab at a time (a Web Lock per database): another tab
 * opening the database waits, then finds them done.
 */
export async function migrate(db, list, { CairnError, MEMORY }) {
  const steps = migrationSteps(list, CairnError);
  const locks = db.name !== MEMORY && globalThis.navigator?.locks;
  if (locks) return locks.request(`cairn:migrate:${db.name}`, () => runSteps(db, steps, CairnError));
  return runSteps(db, steps, CairnError);
}

async function runSteps(db, steps, CairnError) {
  let at = Number((await db.get('PRAGMA user_version')).user_version);
  for (const { version, up } of steps) {
    if (version <= at) continue;
    try {
      await db.transaction(async (tx) => {
        await (typeof up === 'string' ? tx.exec(up) : up(tx));
        await tx.exec(`PRAGMA user_version = ${version}`);
      });
    } catch (e) {
      throw new CairnError('MIGRATION', `migration ${version} failed, the database stays at version ${at}: ${e.message}`,
        { version, cause: e });
    }
    at = version;
  }
}
