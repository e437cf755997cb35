// The sync transports (docs/sync.md), only in cairn-sync-worker.js: the links that carry the
// replication protocol's bytes between this database and its peers. A MessagePort handed to the
// Worker carries one link; a BroadcastChannel, one link to each database on it; a relay's
// WebSocket (docs/relay.md), one link through the relay. Each link is polled every POLL_MS; the
// engine's sync state machine decides what to send. Also the sealing of records into signed
// blocks once statements are idle, and the events the page reads with `sync.events()`.
import { db, stopped, err, needDb } from './engine.js';
import { stop, currentSession, lastStatement, tabOf } from './sessions.js';

// A MessagePort handed to this Worker carries one link's messages.
const links = new Map(); // link id -> { port, timer }
let syncEvents = [];
const POLL_MS = 100;

function takeSyncEvents() {
  if (db && stopped === null) for (const e of db.syncEvents()) syncEvents.push(e);
  const out = syncEvents;
  syncEvents = [];
  return out;
}

// Records are signed in blocks: before they leave on a link (its poll seals), and otherwise once
// statements have been idle for SEAL_IDLE_MS, so a database with no peer holds signed history too.
const SEAL_IDLE_MS = 1000;
let sealTimer = null;
export function startSealTimer() {
  sealTimer ??= setInterval(() => {
    if (!db || stopped !== null || performance.now() - lastStatement < SEAL_IDLE_MS) return;
    try {
      db.syncSeal();
    } catch (e) {
      syncFailed(e);
    }
  }, SEAL_IDLE_MS / 4);
}

/** A transport's step failed: an engine trap stops the engine; anything else is an event. */
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

/** The ops of the transports and the sync events. */
export const transportOps = {
  syncEvents: () => [takeSyncEvents()],
  syncAttach: (port) => [attachPort(port)],
  syncRelay: (url) => [holdTransport(`relay ${url}`, () => attachRelay(String(url)))],
  syncBus: (name) => [holdTransport(`bus ${name}`, () => attachBus(String(name)))],
  syncDetach: (link) => [releaseTransport(link, tabOf(currentSession)) ?? detachPort(link)],
};

/** Every link, channel and relay let go of (the database closes). */
export function detachAll() {
  for (const link of [...links.keys(), ...relays.keys(), ...buses.keys()]) detachPort(link);
}

/** The channels and relays the tab asked for go with it, unless another tab holds them too. */
export function releaseTab(tab) {
  for (const t of [...transports.values()]) releaseTransport(t.handle, tab, true);
}
