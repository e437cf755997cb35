// cairn's dedicated Worker: owns the wasm engine, the database it opened, and the OPFS handles.
//
// Requests arrive by postMessage, or through the shared-memory channel when the page is
// cross-origin isolated (docs/protocol.md); this module takes them from both and hands them, one
// at a time in arrival order, to the admission of sessions (worker/sessions.js), which runs them
// on the engine host (worker/engine.js). The sync transports (worker/transports.js) are in
// cairn-sync-worker.js only.
import { OK, ERR, HELLO, PROTOCOL, RESEND, REPLY_BY_POST, REQ, DONE, SERVED, HEADER, T_ARRAY, Writer, Reader, Full, skip } from './protocol.js';
import { ops, asyncOps, load, loaded, prepareDirectory, stopped, closeDb, Encoded, EncodedParams, replyResult, wasmMemory, saveState, restoreState, restUnavailable } from './engine.js';
import { fetchRest } from './split.js';
import { admit, park, runSync, caught, onResume, endSession, endSessions } from './sessions.js';
import { transportOps, startSealTimer, detachAll, releaseTab } from './transports.js';
import { writeResult } from './result.js';
import { watchOps, committed, dropTab, dropAll } from './watch.js';

// True in cairn-sync-worker.js, which carries cairn-sync.wasm's glue and the sync transports;
// false in cairn-worker.js, which answers every sync request with NO_SYNC (esbuild's `define`,
// scripts/build.mjs). A page that does not sync downloads none of that code.
/* global CAIRN_SYNC */

// Before anything else (the engine loads only on `init`): the page waits for this to know the
// script is cairn's Worker of its own protocol.
self.postMessage([0, HELLO, PROTOCOL]);

// The origin's storage takes tens of milliseconds to start the first time a profile touches it:
// asked for now, it starts while the engine is fetched and compiled.
prepareDirectory();

// The ops that span the modules.
Object.assign(ops, watchOps);
ops.close = () => {
  if (CAIRN_SYNC) detachAll();
  dropAll();
  closeDb();
  endSessions();
  return [null];
};
ops.endSession = (session) => {
  endSession(session);
  if (typeof session === 'string' && session.endsWith('/')) dropTab(session);
  // The channels and relays a tab asked for go with it, unless another tab holds them too.
  if (CAIRN_SYNC && typeof session === 'string' && session.endsWith('/')) releaseTab(session);
  return [null];
};
if (CAIRN_SYNC) {
  Object.assign(ops, transportOps);
  const open = asyncOps.open;
  asyncOps.open = async (...args) => {
    const out = await open(...args);
    startSealTimer();
    return out;
  };
} else {
  // Without sync there are no events and no links to let go of; the other sync requests are
  // NO_SYNC (`admit`, by their prefix).
  Object.assign(ops, { syncEvents: () => [[]], syncDetach: () => [false] });
}

/** Posts a reply; a transfer list only when there is something to transfer. */
function reply(out) {
  replyResult(out);
  if (out.transfer?.length) self.postMessage(out.reply, out.transfer);
  else self.postMessage(out.reply);
}

// The ops that may commit: once their reply is out, live queries run again (worker/watch.js).
const COMMITS = new Set(['exec', 'execute', 'executePrepared', 'syncPurge']);

let asyncBusy = 0; // async requests under way (the channel must not overtake them)

async function handle(msg) {
  const [id, op, session, ...args] = msg;
  if (op === 'init') {
    try {
      await load(args[0], args[1]);
      self.postMessage([id, OK, null]);
    } catch (e) {
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
    if (op in ops) {
      out = runSync(id, op, session, args);
      // It needed the rest of the engine, on its way: the requests behind it wait with it.
      while (out.wait) {
        await out.wait;
        out = runSync(id, op, session, args);
      }
    } else {
      asyncBusy++;
      try {
        const [result, transfer] = await runAsync(op, args);
        out = { reply: [id, OK, result], transfer };
      } catch (e) {
        out = caught(id, e);
      } finally {
        asyncBusy--;
      }
    }
  }
  reply(out);
  if (COMMITS.has(op)) committed(session);
}

// An async op (opening a database, importing one) that needs the rest of the engine waits for it:
// it is not a statement on an open database.
async function runAsync(op, args) {
  for (;;) {
    const saved = saveState();
    try {
      return await asyncOps[op](...args);
    } catch (e) {
      if (!restoreState(saved)) throw e;
      if (await fetchRest()) throw restUnavailable();
    }
  }
}

let queue = Promise.resolve();
let queued = 0;
function enqueue(msg) {
  queued++;
  queue = queue.then(() => handle(msg)).finally(() => queued--);
}
onResume(enqueue);

// A request that can be answered at once, with nothing ahead of it, is answered in this turn of
// the event loop: no promise hops between the message and its reply.
function answerNow(msg) {
  const [id, op, session, ...args] = msg;
  if (queued > 0 || asyncBusy > 0 || !loaded || !(op in ops)) return false;
  const verdict = admit(id, op, session);
  if (verdict === 'park') park(msg);
  else {
    const out = verdict ?? runSync(id, op, session, args);
    // It waits for the rest of the engine in the queue.
    if (out.wait) return false;
    reply(out);
    if (COMMITS.has(op)) committed(session);
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

/** The request in the channel, `[id, op, session, ...args]`. A statement's parameters stay as
 * they are encoded there, and go to the engine so (`EncodedParams`). */
function readRequest() {
  const r = new Reader(chan.sab, HEADER);
  if (r.u8[r.pos] !== T_ARRAY) return r.value();
  r.pos++;
  const n = r.u32();
  const msg = [];
  for (let i = 0; i < n; i++) {
    if (i === 4 && (msg[1] === 'execute' || msg[1] === 'executePrepared')) {
      const start = r.pos;
      skip(r);
      msg.push(new EncodedParams(r.u8.subarray(start, r.pos)));
    } else msg.push(r.value());
  }
  return msg;
}

function serveOne(seq) {
  const start = performance.now();
  const [id, op, session, ...args] = readRequest();
  let out;
  const verdict = admit(id, op, session);
  if (verdict === 'park' || (verdict === null && (!(op in ops) || asyncBusy > 0 || queued > 0))) {
    // Not now: the page sends it again by postMessage, where it waits its turn.
    out = { reply: [id, RESEND] };
  } else out = verdict ?? runSync(id, op, session, args);
  // It needed the rest of the engine, on its way: it waits for it by postMessage.
  if (out.wait) out = { reply: [id, RESEND] };
  let byPost = false;
  try {
    const w = new Writer(chan.sab, HEADER);
    const [, status, result] = out.reply;
    if (result instanceof Encoded) {
      // A statement's result, from where the engine encoded it to the channel's encoding.
      w.u8v(T_ARRAY);
      w.u32(3);
      w.value(id);
      w.value(status);
      writeResult(wasmMemory(), result.ptr, result.mode, w);
    } else w.value(out.reply);
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
  if (COMMITS.has(op)) committed(session);
}
