// GUN: records as nodes under gun.get('todos'). On disk: RAD over IndexedDB (gun/lib/radix,
// radisk, store, rindexed, with localStorage off), as its docs show for browsers; a put is awaited
// by its acknowledgement. In memory: RAD over a store object holding its files in a Map (RAD's
// documented storage interface, put/get), since with no storage at all a read never answers. GUN syncs through relay peers (WebSocket, WebRTC),
// with no in-page channel: replication "—". No counter.
import Gun from 'gun/gun';
import 'gun/lib/radix';
import 'gun/lib/radisk';
import 'gun/lib/store';
import 'gun/lib/rindexed';

export const info = {
  lib: 'GUN',
  variants: {
    memory: { storage: 'memory', label: 'RAD on an in-memory store' },
    disk: { storage: 'disk', label: 'RAD on IndexedDB (rindexed)' },
  },
};

const ACK_MS = 30000;
const FIELDS = ['title', 'done', 'priority', 'owner', 'count'];

function make(variant, name) {
  const opt = { localStorage: false, file: `gun-${name}`, peers: [] };
  if (variant === 'memory') {
    const files = new Map();
    opt.store = { put(f, d, cb) { files.set(f, d); cb(null, 1); }, get(f, cb) { cb(null, files.get(f)); } };
  }
  return Gun(opt);
}

/** A put, resolved on its acknowledgement. */
function putter(variant) {
  return (ref, data) => new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('GUN: no acknowledgement of a put')), ACK_MS);
    ref.put(data, (ack) => { clearTimeout(t); if (ack.err) reject(new Error(`GUN: ${ack.err}`)); else resolve(); });
  });
}

const once = (ref) => new Promise((resolve) => ref.once((d) => resolve(d)));
const strip = (d) => { if (!d) return d; const o = { ...d }; delete o._; return o; };

export async function open(variant, name) {
  const gun = make(variant, name);
  const put = putter(variant);
  const todos = gun.get('todos');
  const node = (r) => { const o = {}; for (const f of FIELDS) o[f] = r[f]; return o; };
  return {
    insert: (r) => put(todos.get(r.id), node(r)),
    update: (id, title) => put(todos.get(id), { title }),
    async get(id) { const d = strip(await once(todos.get(id))); return d && d.title !== undefined ? { id, ...d } : undefined; },
    insertMany(rs) { const g = {}; for (const r of rs) g[r.id] = node(r); return put(todos, g); },
    close: async () => { gun.off(); },
  };
}

export async function openWide(name) {
  const gun = make('disk', name);
  const put = putter('disk');
  return {
    layout: 'a node per record',
    write: (id, o) => put(gun.get(`w-${id}`), o),
    read: async (id) => strip(await once(gun.get(`w-${id}`))),
    setProp: (id, p, v) => put(gun.get(`w-${id}`), { [p]: v }),
    close: async () => { gun.off(); },
  };
}
