// The relay transport (docs/relay.md, sec. 8; docs/sync.md 10b, "Relays"), only in
// cairn-sync-worker.js: one WebSocket at a time to one of the relay URLs a page gave, which
// answers the relay's challenge (with the page's token first, when it gave one), carries the
// sync protocol, and when the connection fails or ends waits (exponential backoff with full
// jitter, at least the relay's `retry_after_ms`, and not at all while the browser is offline)
// before it tries the next URL. Also the sync status the page reads with `sync.status()` and is
// sent on every change (a notice, docs/protocol.md, "Notices").
import { db, stopped, err, needDb, saveState, restoreState, restUnavailable } from './engine.js';
import { fetchRest } from './split.js';
import { pushEvent, syncFailed, POLL_MS, linkCount } from './transports.js';
import { committed } from './watch.js';

// Waits between attempts: a random time in [0, min(CAP, BASE * 2^failures)) (full jitter, so
// that clients cut together by a relay's restart do not come back together), and no less than
// the relay's last `retry_after_ms`. `failures` counts attempts since the last connection that
// authenticated and stayed up STABLE_MS: a relay that welcomes and then drops a client at once
// does not reset it.
const BACKOFF_BASE_MS = 500;
const BACKOFF_CAP_MS = 30000;
const STABLE_MS = 5000;
// How often a relay waiting for the browser to be back online looks at `navigator.onLine`.
const ONLINE_CHECK_MS = 1000;
// How long an attempt waits for a tab to answer a request for a token.
const TOKEN_WAIT_MS = 10000;
// Relay ERROR codes that drop one frame and leave the connection up: a BLOCKS message dropped so
// is never acknowledged (the engine sends it again), so it leaves the count of those awaited.
const DROPS = new Set(['RATE_LIMITED', 'TOO_LARGE', 'MALFORMED']);

const C = 0x43, R = 0x52, S = 0x53; // 'C' 'R': a relay frame; 'C' 'S': a sync message
const CHALLENGE = 1, WELCOME = 3, ERROR = 4, TOKEN = 5; // relay frame types
const HELLO = 1, BLOCKS = 3, ACK = 4; // sync message types

let nextHandle = -1000000; // relay handles are negative, apart from channels' and ports' ids
export const relays = new Map(); // handle -> Relay

// Records of this database sealed into blocks that no relay has acknowledged yet (sealing
// happens only in the calls `sealing` wraps); `unsealed + unacked` is the status's `pending`.
let unacked = 0;
let lastSyncedAt = null;

/** Runs `f`, a call into the engine that may seal this database's pending records into blocks,
 * and counts what it sealed as not yet acknowledged. */
export function sealing(d, f) {
  // Undone, like a statement, if it needs the rest of the engine while that is missing: the step
  // fails with REST_UNAVAILABLE (an event), as a step that fails for another reason does.
  const saved = saveState();
  let before, out;
  try {
    before = d.syncPending();
    out = f();
  } catch (e) {
    if (!restoreState(saved)) throw e;
    void fetchRest();
    throw restUnavailable();
  }
  unacked += Math.max(0, before - d.syncPending());
  committed('sync'); // rows a peer sent, applied
  return out;
}

/** Posts a notice to the page (docs/protocol.md, "Notices"): request id 0, then what it is. */
const notice = (...n) => self.postMessage([0, ...n]);

class Relay {
  constructor(d, urls, token) {
    this.d = d; // the database it syncs (a reopened one gets relays of its own)
    this.urls = urls;
    this.key = urls.join(' ');
    this.entries = urls.map((url) => ({ url, state: 'waiting' }));
    this.at = 0; // the URL tried next (or connected)
    this.token = token; // undefined, a string, or true: ask the page before each attempt
    this.ws = null;
    this.conn = null; // the connection's bookkeeping, below
    this.retry = null; // the timer of the next attempt
    this.retryAt = 0; // performance.now() of the next attempt, while one is waiting
    this.hint = 0; // the `retry_after_ms` of the fatal ERROR that ends this connection
    this.notBefore = 0; // performance.now() before which no attempt starts (the relay's hint)
    this.offline = false; // waiting for the `online` event
    this.failures = 0;
    this.tokenAsk = null; // { attempt, timer } while waiting for the page's token
    this.closed = false;
  }
}

let tokenAttempts = 0;

/** Joins the relays at `urls` (tried in turn), with `options.token` (a string, or `true`: the
 * page's function is asked through a notice before each attempt). Returns the handle. */
export function attachRelay(urls, options) {
  const d = needDb();
  d.syncId(); // the key pair exists before the first challenge
  const token = options?.token;
  if (token !== undefined && token !== true && typeof token !== 'string') {
    throw err('INVALID_INPUT', 'a relay token is a string or a function');
  }
  // Listened for from the first relay on, so that a Worker without sync carries none of this.
  if (relays.size === 0) {
    self.removeEventListener?.('online', backOnline);
    self.addEventListener?.('online', backOnline);
  }
  const r = new Relay(d, urls, token);
  const handle = (r.handle = nextHandle--);
  relays.set(handle, r);
  attempt(r, d);
  return handle;
}

function attempt(r, d) {
  r.retry = null;
  r.retryAt = 0;
  if (r.closed || db !== d || stopped !== null) return;
  if (globalThis.navigator?.onLine === false) {
    // Tried again at once when the browser is back online: on the `online` event (below), or
    // when a look every ONLINE_CHECK_MS finds it so (a Worker is not always told: DevTools'
    // offline emulation changes `navigator.onLine` without the event). No network is used.
    r.offline = true;
    r.retry = setTimeout(() => attempt(r, d), ONLINE_CHECK_MS);
    return emitStatus();
  }
  r.offline = false;
  const entry = r.entries[r.at];
  entry.state = 'connecting';
  emitStatus();
  if (r.token !== true) return open(r, d, r.token);
  // The page holds the function: ask every tab (the owner passes the notice on to the others);
  // the first answer for this attempt is taken (`giveToken`).
  const ask = { attempt: ++tokenAttempts, timer: null };
  ask.timer = setTimeout(() => {
    if (r.tokenAsk !== ask) return;
    r.tokenAsk = null;
    failed(r, d, 'TOKEN_UNAVAILABLE', 'no tab answered the request for a relay token (the tab that gave the token function went away?)');
  }, TOKEN_WAIT_MS);
  r.tokenAsk = ask;
  notice('token', r.key, ask.attempt);
}

/** A tab's answer to a request for a token: `token` a string, or null with why the page's
 * function failed. Whether an attempt was waiting for it. */
export function giveToken(key, attemptNo, token, message) {
  for (const r of relays.values()) {
    if (r.key !== key || r.tokenAsk?.attempt !== attemptNo) continue;
    clearTimeout(r.tokenAsk.timer);
    r.tokenAsk = null;
    if (typeof token === 'string') open(r, r.d, token);
    else failed(r, r.d, 'TOKEN_UNAVAILABLE', `the page's token function failed: ${message ?? 'it returned no string'}`);
    return true;
  }
  return false;
}

/** An attempt that ended before any socket opened: counted as a failure, and the next waits. */
function failed(r, d, code, message) {
  const entry = r.entries[r.at];
  entry.lastError = { code, message };
  pushEvent('relay', code, message);
  next(r, d, false);
}

/** The TOKEN frame: `43 52 01 05`, `text token` (docs/relay.md, sec. 2). */
function tokenFrame(token) {
  const text = new TextEncoder().encode(token);
  const out = [C, R, 1, TOKEN];
  for (let n = text.length; ; n >>>= 7) {
    if (n < 0x80) {
      out.push(n);
      break;
    }
    out.push((n & 0x7f) | 0x80);
  }
  const frame = new Uint8Array(out.length + text.length);
  frame.set(out);
  frame.set(text, out.length);
  return frame;
}

/** An ERROR frame's fields (docs/relay.md, sec. 2); a field cut short reads as empty or 0. */
function readError(bytes) {
  const text = new TextDecoder();
  let at = 5;
  const str = () => {
    let n = 0, shift = 0, b;
    do {
      b = bytes[at++] ?? 0;
      n += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80 && shift < 35);
    const s = text.decode(bytes.subarray(at, at + n));
    at += n;
    return s;
  };
  const fatal = bytes[4] === 1;
  const code = str();
  const message = str();
  const retryAfter = at + 4 <= bytes.length ? new DataView(bytes.buffer, bytes.byteOffset + at, 4).getUint32(0, true) : 0;
  return { fatal, code, message, retryAfter };
}

function open(r, d, token) {
  if (r.closed || db !== d || stopped !== null) return;
  const entry = r.entries[r.at];
  const url = r.urls[r.at];
  let ws;
  try {
    ws = new WebSocket(url);
  } catch (e) {
    return failed(r, d, e.code ?? 'INVALID_INPUT', e.code ? e.message : `not a WebSocket URL: ${url} (${e.message})`);
  }
  ws.binaryType = 'arraybuffer';
  r.ws = ws;
  // `ready`: the relay's HELLO was handled, so the engine's link sends what the relay lacks;
  // `awaited`: BLOCKS messages sent and not acknowledged yet (the relay answers each it handles
  // with one ACK); `synced`: the relay held everything this database wrote, when last checked.
  const c = { link: null, timer: null, welcomedAt: 0, ready: false, awaited: 0, synced: false, refused: false };
  r.conn = c;
  const send = (msgs) => {
    for (const m of msgs) {
      if (m[1] === S && m[3] === BLOCKS) {
        c.awaited++;
        c.synced = false;
      }
      ws.send(m);
    }
  };
  // Runs one step of the protocol; an error is an event (and an engine trap stops the engine).
  const step = (f) => {
    if (db !== d || stopped !== null) return detachRelay(r.handle);
    try {
      send(sealing(d, f));
    } catch (e) {
      return syncFailed(e, 'relay');
    }
    checkSynced(r, d, c, entry);
  };
  ws.onmessage = (e) => {
    if (r.ws !== ws) return;
    const bytes = new Uint8Array(e.data);
    if (bytes[0] !== C) return;
    if (bytes[1] === R) {
      const type = bytes[3];
      if (type === CHALLENGE) {
        step(() => (token === undefined ? [d.syncRelayAuth(bytes)] : [tokenFrame(token), d.syncRelayAuth(bytes)]));
      } else if (type === WELCOME) {
        c.welcomedAt = performance.now();
        entry.state = 'connected';
        step(() => {
          const [link, hello] = d.syncConnect();
          c.link = link;
          c.timer = setInterval(() => step(() => d.syncPoll(link)), POLL_MS);
          return [hello];
        });
        emitStatus();
      } else if (type === ERROR) {
        const { fatal, code, message, retryAfter } = readError(bytes);
        entry.lastError = { code, message };
        if (retryAfter > 0) entry.lastError.retryAfterMs = retryAfter;
        if (fatal) {
          c.refused = true;
          r.hint = retryAfter;
        } else if (DROPS.has(code)) c.awaited = Math.max(0, c.awaited - 1);
        pushEvent('relay', code, message);
        emitStatus();
      }
      return;
    }
    if (bytes[1] !== S || c.link === null) return;
    if (bytes[3] === ACK) c.awaited = Math.max(0, c.awaited - 1);
    step(() => d.syncReceive(c.link, bytes));
    if (bytes[3] === HELLO && !c.ready) {
      c.ready = true;
      checkSynced(r, d, c, entry);
    }
  };
  ws.onclose = (e) => {
    if (r.ws !== ws) return;
    r.ws = null;
    r.conn = null;
    clearInterval(c.timer);
    if (c.link !== null && db === d && stopped === null) d.syncDisconnect(c.link);
    if (r.closed) return;
    // A connection refused or cut (not closed by the relay after a fatal ERROR, which is the
    // reason then): the browser says no more than that.
    if (!c.refused && !e.wasClean) {
      const message = c.welcomedAt > 0 ? `the connection to the relay at ${url} was cut` : `cannot reach the relay at ${url}`;
      entry.lastError = { code: 'CONNECTION', message };
      pushEvent('relay', 'CONNECTION', message);
    }
    next(r, d, c.welcomedAt > 0 && performance.now() - c.welcomedAt >= STABLE_MS);
  };
}

/** The relay connection `c` holds everything this database wrote once the relay's HELLO was
 * handled, no BLOCKS message is awaiting its ACK and no record is left to seal: the engine's
 * link would have sent anything the relay lacked. */
function checkSynced(r, d, c, entry) {
  if (!c.ready || c.awaited > 0 || r.conn !== c || d.syncPending() > 0) return;
  if (c.synced && unacked === 0) return;
  c.synced = true;
  unacked = 0;
  lastSyncedAt = entry.lastSyncedAt = Date.now();
  emitStatus();
}

/** The connection failed or ended: wait, then try the next URL. */
function next(r, d, stable) {
  r.entries[r.at].state = 'waiting';
  if (stable) r.failures = 0;
  const wait = Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.min(r.failures, 16));
  r.failures++;
  r.at = (r.at + 1) % r.urls.length;
  // The relay's hint counts from the end of the connection it refused.
  const now = performance.now();
  r.notBefore = now + r.hint;
  schedule(r, d, Math.max(wait, r.hint), now);
  r.hint = 0;
}

function schedule(r, d, wait, now = performance.now()) {
  clearTimeout(r.retry);
  r.retryAt = now + wait;
  r.retry = setTimeout(() => attempt(r, d), wait);
  emitStatus(undefined, now);
}

/** Back online: every relay waiting tries again at once (or when the relay's hint allows). */
function backOnline() {
  for (const r of relays.values()) {
    if (r.closed || r.ws !== null || r.tokenAsk !== null) continue;
    if (r.offline || r.retry !== null) schedule(r, r.d, Math.max(0, r.notBefore - performance.now()));
  }
}

function closeRelay(r) {
  r.closed = true;
  clearTimeout(r.retry);
  clearTimeout(r.tokenAsk?.timer);
  const c = r.conn;
  if (c) {
    clearInterval(c.timer);
    if (c.link !== null && db === r.d && stopped === null) r.d.syncDisconnect(c.link);
  }
  r.ws?.close();
  r.ws = null;
  for (const e of r.entries) e.state = 'closed';
}

/** Leaves the relays of `handle`: their entries are in one last status, as `closed`. */
export function detachRelay(handle) {
  const r = relays.get(handle);
  if (!r) return false;
  closeRelay(r);
  relays.delete(handle);
  emitStatus(r);
  return true;
}

/** The sync status (docs/sync.md 10b, "Status"); `also`, a relay just let go of. */
export function syncStatus(also, now = performance.now()) {
  const list = [];
  for (const r of also ? [...relays.values(), also] : relays.values()) {
    r.entries.forEach((e, i) => {
      const out = { url: e.url, state: e.state };
      if (e.lastError) out.lastError = { ...e.lastError };
      if (i === r.at && r.retryAt > 0 && !r.closed) out.retryInMs = Math.max(0, Math.ceil(r.retryAt - now));
      if (e.lastSyncedAt) out.lastSyncedAt = e.lastSyncedAt;
      list.push(out);
    });
  }
  const pending = db && stopped === null ? db.syncPending() + unacked : unacked;
  const links = linkCount() + list.filter((r) => r.state === 'connected').length;
  return { relays: list, links, pending, lastSyncedAt };
}

// The last status posted, with each wait as whether there is one (the time left changes by
// itself): a notice goes out when anything else changed. Every new wait follows an attempt that
// changed a state, so none is missed.
let lastPosted = '';

/** Posts the status when it changed (state changes call it; so does the sealing timer, for the
 * count of pending records). */
export function emitStatus(also, now) {
  if (!db || stopped !== null) return;
  const s = syncStatus(also, now);
  const key = JSON.stringify(s, (k, v) => (k === 'retryInMs' ? true : v));
  if (key === lastPosted) return;
  lastPosted = key;
  notice('status', s);
}

/** The database closes or the engine stops: relays go, and the counts start again. */
export function resetRelays() {
  for (const h of [...relays.keys()]) detachRelay(h);
  unacked = 0;
  lastSyncedAt = null;
  lastPosted = '';
}
