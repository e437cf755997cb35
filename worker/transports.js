// The sync transports (docs/sync.md), only in cairn-sync-worker.js: the links that carry the
// replication protocol's bytes between this database and its peers. A MessagePort handed to the
// Worker carries one link; a BroadcastChannel, one link to each database on it; a relay's
// WebSocket (worker/relay.js), one link through the relay. Each link is polled every POLL_MS; the
// engine's sync state machine decides what to send. Also the sealing of records into signed
// blocks once statements are idle, and the events the page reads with `sync.events()`.
import { db, stopped, err, needDb } from './engine.js';
import { stop, currentSession, lastStatement, tabOf } from './sessions.js';
import { relays, attachRelay, detachRelay as leaveRelay, giveToken, sealing, syncStatus, emitStatus, resetRelays } from './relay.js';

// A MessagePort handed to this Worker carries one link's messages.
const links = new Map(); // link id -> { port, timer }
let syncEvents = [];
let noticed = 0; // how many of syncEvents went out in an `events` notice
export const POLL_MS = 100;
// The most events kept for `sync.events()`, the oldest dropped first: a page that only
// subscribes (`sync.on('event')`) never takes them.
const EVENTS_KEPT = 1000;

/** An event for `sync.events()` and `sync.on('event')`: `[kind, code, detail]`. */
export function pushEvent(kind, code, detail) {
  syncEvents.push([kind, code, detail]);
  noticeEvents(false);
}

/** Posts the events not yet posted as a notice (docs/protocol.md, "Notices"); with `engine`,
 * takes the engine's first (only outside an engine call: the seal timer, a request). */
function noticeEvents(engine) {
  if (engine && db && stopped === null) for (const e of db.syncEvents()) syncEvents.push(e);
  if (syncEvents.length > noticed) self.postMessage([0, 'events', syncEvents.slice(noticed)]);
  if (syncEvents.length > EVENTS_KEPT) syncEvents.splice(0, syncEvents.length - EVENTS_KEPT);
  noticed = syncEvents.length;
}

/** The peers linked now: ports given to `connect`, and the databases met on the channels. */
export function linkCount() {
  let n = links.size;
  for (const b of buses.values()) n += b.peers.size;
  return n;
}

function takeSyncEvents() {
  noticeEvents(true);
  const out = syncEvents;
  syncEvents = [];
  noticed = 0;
  return out;
}

// Records are signed in blocks: before they leave on a link (its poll seals), and otherwise once
// statements have been idle for SEAL_IDLE_MS, so a database with no peer holds signed history too.
const SEAL_IDLE_MS = 1000;
let sealTimer = null;
export function startSealTimer() {
  sealTimer ??= setInterval(() => {
    if (!db || stopped !== null) return;
    // The count of pending records changes with commits, and a sync step may have left events:
    // the status and the events' notices follow them at this pace.
    emitStatus();
    noticeEvents(true);
    if (performance.now() - lastStatement < SEAL_IDLE_MS) return;
    try {
      const d = db;
      sealing(d, () => d.syncSeal());
    } catch (e) {
      syncFailed(e);
    }
  }, SEAL_IDLE_MS / 4);
}

/** A transport's step failed: an engine trap stops the engine; anything else is an event. */
export function syncFailed(e, kind = 'error') {
  if (e instanceof WebAssembly.RuntimeError) return stop(0, e);
  pushEvent(kind, (e && e.code) || 'INTERNAL', (e && e.message) || String(e));
}

function attachPort(port) {
  if (!(port instanceof MessagePort)) throw err('INVALID_INPUT', 'sync.connect takes a MessagePort');
  const d = needDb();
  const [link, hello] = sealing(d, () => d.syncConnect());
  const send = (msgs) => {
    for (const m of msgs) port.postMessage(m, [m.buffer]);
  };
  // Runs one step of the protocol; an error ends the link (and an engine trap stops the engine).
  const step = (f) => {
    if (db !== d || stopped !== null) return detachPort(link);
    try {
      send(sealing(d, f));
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

// A BroadcastChannel: every database on it syncs with every other one (one link per pair).
// Messages are [from, to, bytes] between instances; to = '' announces (bytes 'hi' or 'bye').
const buses = new Map(); // handle -> { bc, peers: Map<instance, link>, timer }
let nextBus = -1; // channel handles are negative, beside the positive link ids of ports

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
  const handle = nextBus--;
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
      const [l, hello] = sealing(d, () => d.syncConnect());
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
      } else if (to === me) send(from, sealing(d, () => d.syncReceive(linkFor(from), bytes)));
    } catch (err) {
      syncFailed(err);
    }
  };
  bus.timer = setInterval(() => {
    if (db !== d || stopped !== null) return detachBus(handle);
    for (const [peer, link] of peers) {
      try {
        send(peer, sealing(d, () => d.syncPoll(link)));
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
  return leaveRelay(handle);
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
  syncRelay: (urls, options) => {
    const list = relayUrls(urls);
    return [holdTransport(`relay ${list.join(' ')}`, () => attachRelay(list, options))];
  },
  syncRelayToken: (key, attempt, token, message) => [giveToken(String(key), attempt, token, message)],
  syncStatus: () => [(needDb(), syncStatus())],
  syncBus: (name) => [holdTransport(`bus ${name}`, () => attachBus(String(name)))],
  syncDetach: (link) => [releaseTransport(link, tabOf(currentSession)) ?? detachPort(link)],
};

/** One relay URL or several, each a `ws:` or `wss:` URL. */
function relayUrls(urls) {
  const list = (Array.isArray(urls) ? urls : [urls]).map(String);
  if (list.length === 0) throw err('INVALID_INPUT', 'connectRelay needs at least one URL');
  for (const u of list) {
    if (!/^wss?:\/\/[^\s]+$/i.test(u)) throw err('INVALID_INPUT', `not a relay URL (ws:// or wss://): ${JSON.stringify(u)}`);
  }
  return list;
}

/** Every link, channel and relay let go of (the database closes). */
export function detachAll() {
  for (const link of [...links.keys(), ...buses.keys()]) detachPort(link);
  resetRelays();
}

/** The channels and relays the tab asked for go with it, unless another tab holds them too. */
export function releaseTab(tab) {
  for (const t of [...transports.values()]) releaseTransport(t.handle, tab, true);
}
