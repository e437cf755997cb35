// Live queries and change notices (docs/protocol.md, "Live queries"). After each commit, the
// Worker asks the engine what it changed (`takeChanged`: per table, rows inserted, updated and
// deleted), tells the tabs that listen (a `change` notice), and runs again each watched query
// that reads a changed table: once per query however many watchers it has, in this Worker, so a
// commit costs one run per query touched and no round trip. A query's result goes to the pages
// (a `watch` notice) only when it differs from the one sent last. Called after the commit's reply
// is out (worker.js): by postMessage, a page sees a commit's reply before its notices.
import { ops, db, needDb, stopped, saveState, restoreState, wasmMemory, EncodedParams } from './engine.js';
import { tabOf, stop, currentSession } from './sessions.js';
import { fetchRest } from './split.js';
import { MODE_ROWS, paramBytes, sameResult } from './protocol.js';
import { readResult } from './result.js';

const queries = new Map(); // sql and encoded parameters -> { sql, params, tables, last, watchers }
const byId = new Map(); // watch id -> its query
const listening = new Map(); // tab -> how many of its `onChange` listeners
let nextId = 1;

const notice = (...n) => self.postMessage([0, ...n]);

/** Runs the engine's call `f`; one that needs the rest of the engine (not there yet) is undone
 * and gives `undefined`, and `retry` runs once the rest has arrived. */
function engineCall(f, retry) {
  const saved = saveState();
  try {
    return f();
  } catch (e) {
    if (restoreState(saved)) {
      void fetchRest().then((failed) => failed || retry());
      return undefined;
    }
    if (e instanceof WebAssembly.RuntimeError) stop(0, e);
    throw e;
  }
}

/** The query's result, as the page gets it (docs/protocol.md, "Results"). */
function run(q) {
  const [r] = ops.execute(q.sql, new EncodedParams(q.params), MODE_ROWS);
  const wire = readResult(wasmMemory(), r.ptr, r.mode);
  // The connection's changes and last row id are not the query's: every insert would change them.
  wire[1] = wire[2] = 0;
  return wire;
}

/** Posts `q`'s result (or its error) to its watchers, one notice per tab. */
function post(q, wire, e) {
  const tabs = new Map();
  for (const [id, tab] of q.watchers) (tabs.get(tab) ?? tabs.set(tab, []).get(tab)).push(id);
  for (const [tab, ids] of tabs) notice('watch', tab, ids, wire, e ? [e.code ?? 'INTERNAL', e.message ?? String(e)] : null);
}

/** Runs `q` again (with `schema`, finds the tables it reads again first), and posts its result
 * when it changed. */
function rerun(q, schema) {
  let wire;
  try {
    wire = engineCall(() => {
      if (schema) q.tables = db.tablesRead(q.sql).map(lower);
      return run(q);
    }, () => rerun(q, schema));
  } catch (e) {
    if (stopped !== null) return;
    q.last = null; // an error: the next result is news whatever it is
    return post(q, null, e);
  }
  if (wire === undefined || (q.last && sameResult(q.last, wire))) return;
  q.last = wire;
  post(q, wire);
}

const lower = (t) => t.toLowerCase();

/** Forgets what committed while nobody watched: counts from then are no one's news. */
function startWatching(d) {
  if (byId.size === 0 && listening.size === 0) engineCall(() => d.takeChanged(), () => {});
}

/** After a statement of `session` (or a sync step: `'sync'`) whose reply is out: what it
 * committed, to the listeners and the watched queries. */
export function committed(session) {
  if (!db || stopped !== null || (byId.size === 0 && listening.size === 0) || db.inTransaction()) return;
  const d = db;
  const c = engineCall(() => d.takeChanged(), () => committed(session));
  if (!c || c.length === 0) return;
  const schema = c[1] === 1;
  const tables = [];
  const names = new Set();
  for (let i = 2; i < c.length; i += 4) {
    tables.push({ table: c[i], inserted: c[i + 1], updated: c[i + 2], deleted: c[i + 3] });
    names.add(lower(c[i]));
  }
  // The committer: 'sync', '' for the owner tab, '<tab id>/' for another tab; each page makes it
  // its origin ('local', 'tab', 'sync'). The session after it: the records cache's own commits
  // (worker/records.js).
  if (listening.size > 0) notice('change', session === 'sync' ? 'sync' : tabOf(session), { tables, commits: c[0], schema }, session);
  for (const q of queries.values()) if (schema || q.tables.some((t) => names.has(t))) rerun(q, schema);
}

/** The tab's watchers and listeners go with it (`endSession` with its prefix). */
export function dropTab(tab) {
  for (const id of byId.keys()) unwatch(id, tab);
  listening.delete(tab);
}

/** The database closed: nothing is watched. */
export function dropAll() {
  queries.clear();
  byId.clear();
  listening.clear();
}

/** Ends the watcher `id` of `tab` (a tab ends only its own). */
function unwatch(id, tab) {
  const q = byId.get(id);
  if (!q || q.watchers.get(id) !== tab) return false;
  byId.delete(id);
  q.watchers.delete(id);
  if (q.watchers.size === 0) queries.delete(q.key);
  return true;
}

// `watch` and `watchChanges` belong to the tab of the request's session (`currentSession`).
export const watchOps = {
  /** Starts watching `sql` with `params`: `[id, result]`. Fails as the query would, or with
   * INVALID_INPUT for a statement other than one SELECT. */
  watch: (sql, params) => {
    const d = needDb();
    const bytes = paramBytes(params).slice(); // the encoder's buffer is reused
    const key = `${sql}\0${bytes.join(',')}`;
    let q = queries.get(key);
    const fresh = !q;
    if (fresh) q = { key, sql: String(sql), params: bytes, tables: d.tablesRead(String(sql)).map(lower), last: null, watchers: new Map() };
    const wire = run(q);
    startWatching(d);
    if (q.last && !sameResult(q.last, wire)) post(q, wire);
    q.last = wire;
    if (fresh) queries.set(key, q);
    const id = nextId++;
    q.watchers.set(id, tabOf(currentSession));
    byId.set(id, q);
    return [[id, wire]];
  },
  unwatch: (id) => [unwatch(id, tabOf(currentSession))],
  /** `on`: one more `onChange` listener of the session's tab, or one fewer. */
  watchChanges: (on) => {
    const tab = tabOf(currentSession);
    if (on) startWatching(needDb());
    const n = (listening.get(tab) ?? 0) + (on ? 1 : -1);
    if (n > 0) listening.set(tab, n);
    else listening.delete(tab);
    return [null];
  },
};
