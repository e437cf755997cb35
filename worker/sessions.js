// Sessions and admission: whether a request may run now, and running it.
//
// Statements carry a session (docs/protocol.md, "Sessions and transactions"): while one session
// has a transaction open, requests of other sessions wait here (parked) until it ends, or fail
// with BUSY after the busy timeout, so a transaction never sees another's uncommitted writes and
// never has statements of another mixed into it. A tab that does not own the database sends its
// requests through the tab that does, with sessions `<tab id>/<session>`; when that tab goes
// away, `endSession` with its prefix rolls back whatever transaction it left open.
import { OK, ERR } from './protocol.js';
import { ops, asyncOps, loaded, stopped, db, busyTimeout, stopEngine, saveState, restoreState, restUnavailable } from './engine.js';
import { fetchRest, restFetching } from './split.js';

// The sync and test builds' flags (engine.js).
/* global CAIRN_SYNC, CAIRN_TESTING */

let txSession = null; // the session whose transaction is open
let parked = []; // [msg, timer]: requests waiting for txSession's transaction to end
let resume = null; // queues a parked request again (worker.js)

/** The session of the request running (the transports count holds by tab). */
export let currentSession = null;
/** When the last statement ran (performance.now()): records are sealed once statements idle. */
export let lastStatement = 0;

/** `f(msg)` queues a request again once the transaction it waited for has ended. */
export function onResume(f) {
  resume = f;
}

/** Ops that do not read or write the database through a session, and so never wait for one. The
 * block files' ops and `debugPanic` exist only in the builds that have them. */
const sessionless = new Set(['ping', 'inTransaction', 'memory', 'endSession', 'finalize', 'unwatch', 'watchChanges']);
if (CAIRN_SYNC || CAIRN_TESTING) sessionless.add('debugPanic');
// A relay's token and the sync status never wait for a transaction: a connection attempt waits
// for the token, and a page shows the status while it writes.
if (CAIRN_SYNC) for (const op of ['syncRelayToken', 'syncStatus']) sessionless.add(op);
if (CAIRN_TESTING) {
  for (const op of ['fileOpen', 'fileRead', 'fileWrite', 'fileLen', 'fileSetLen', 'fileFlush', 'fileClose', 'fileRemove',
    'fileList', 'conformanceCases', 'conformanceRun']) sessionless.add(op);
}

/** The ops that can open or end a transaction. */
const statementOps = new Set(['exec', 'execute', 'executePrepared', 'endSession', 'close']);

export const failure = (id, code, message, extra) => ({ reply: extra === undefined ? [id, ERR, code, message] : [id, ERR, code, message, extra] });

/** Whether a request may run now: null; otherwise the reply to send (an error), or 'park'. */
export function admit(id, op, session) {
  if (stopped !== null) return failure(id, 'INTERNAL', `the engine stopped after an internal error: ${stopped}`);
  if (!(op in ops) && !(op in asyncOps)) {
    if (!CAIRN_SYNC && /^sync[A-Z]/.test(op)) {
      return failure(id, 'NO_SYNC', 'this build of cairn has no sync: open the database with { sync: true } (cairn-sync.wasm)');
    }
    return failure(id, 'UNKNOWN_OP', `unknown request ${JSON.stringify(op)}`);
  }
  if (!loaded) return failure(id, 'NOT_READY', 'the engine is not loaded: send init first');
  if (txSession !== null && txSession !== session && !sessionless.has(op)) return 'park';
  return null;
}

/** Waits for the open transaction to end, or fails with BUSY after the busy timeout. */
export function park(msg) {
  const timer = setTimeout(() => {
    parked = parked.filter(([m]) => m !== msg);
    self.postMessage([msg[0], ERR, 'BUSY', `the database is busy: another transaction has been open for over ${busyTimeout} ms ` +
      '(inside transaction(), run statements on its tx argument, not on the database)']);
  }, busyTimeout);
  parked.push([msg, timer]);
}

/** The engine trapped: report it, fail everything waiting, and stop so OPFS handles are released. */
export function stop(id, e) {
  const message = stopEngine(e);
  for (const [m, timer] of parked) {
    clearTimeout(timer);
    self.postMessage([m[0], ERR, 'INTERNAL', `internal error: ${message}`]);
  }
  parked = [];
  setTimeout(() => self.close(), 0);
  return failure(id, 'INTERNAL', `internal error: ${message}`);
}

/** The reply for an op that threw. */
export function caught(id, e) {
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
      resume(m);
    }
  }
}

/** Runs an op of `ops` (admitted): the reply and what to transfer with it; or `{ wait }` when the
 * op needed the rest of the engine while it was on its way: the engine is as it was before the
 * op, and the caller runs it again once `wait` resolves. */
export function runSync(id, op, session, args) {
  const saved = saveState();
  try {
    currentSession = session;
    const [result, transfer] = ops[op](...args);
    return { reply: [id, OK, result], transfer };
  } catch (e) {
    if (restoreState(saved)) {
      if (restFetching()) return { wait: fetchRest() };
      // Tried again in the background: a later statement finds it if the network is back.
      void fetchRest();
      return caught(id, restUnavailable());
    }
    return caught(id, e);
  } finally {
    if (statementOps.has(op)) {
      trackTransaction(session);
      lastStatement = performance.now();
    }
  }
}

/** Rolls back the transaction of `session`, or of every session of a tab (`<tab id>/`, the
 * prefix of the sessions the owner runs for it), if it has one (its page went away). */
export function endSession(session) {
  const tab = typeof session === 'string' && session.endsWith('/');
  const ours = txSession === session || (tab && typeof txSession === 'string' && txSession.startsWith(session));
  if (db && ours && db.inTransaction()) db.exec('ROLLBACK');
}

/** The database closed: no transaction is open. */
export function endSessions() {
  txSession = null;
}

/** The tab a session belongs to: `<tab id>/` for a follower's, '' for this tab's own. */
export function tabOf(session) {
  const s = typeof session === 'string' ? session.indexOf('/') : -1;
  return s < 0 ? '' : session.slice(0, s + 1);
}
