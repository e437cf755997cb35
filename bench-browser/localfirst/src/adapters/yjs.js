// Yjs: one Y.Doc, a top-level Y.Map 'todos' holding a Y.Map per record. On disk: y-indexeddb,
// which stores each update in its own IndexedDB transaction; a write is awaited by a read-only
// transaction on the same store, which IndexedDB starts only after that one completes.
// Replication: the doc's state as an update (Y.encodeStateAsUpdate) posted over a MessageChannel
// and applied to an empty doc, Yjs's documented sync step. No counter type.
import * as Y from 'yjs';
import { IndexeddbPersistence } from 'y-indexeddb';
import { idbBarrier } from '../records.js';

export const info = {
  lib: 'Yjs',
  variants: {
    memory: { storage: 'memory', label: 'Y.Doc, a Y.Map per record' },
    disk: { storage: 'disk', label: 'y-indexeddb' },
  },
};

const FIELDS = ['title', 'done', 'priority', 'owner', 'count'];
let seq = 0;

async function openDoc(variant, name) {
  const doc = new Y.Doc();
  let idb = null;
  if (variant === 'disk') {
    idb = new IndexeddbPersistence(name, doc);
    await idb.whenSynced;
  }
  const todos = doc.getMap('todos');
  const flushed = () => (idb ? idbBarrier(idb.db, ['updates']) : undefined);
  const get = (id) => {
    const m = todos.get(id);
    if (!m) return undefined;
    const r = { id };
    for (const f of FIELDS) r[f] = m.get(f);
    return r;
  };
  const put = (r) => {
    const m = new Y.Map();
    for (const f of FIELDS) m.set(f, r[f]);
    todos.set(r.id, m);
  };
  return { doc, idb, todos, flushed, get, put };
}

export async function open(variant, name) {
  const s = await openDoc(variant, name);
  return {
    async insert(r) { s.put(r); await s.flushed(); },
    async update(id, title) { s.todos.get(id).set('title', title); await s.flushed(); },
    get: async (id) => s.get(id),
    async insertMany(rs) { s.doc.transact(() => { for (const r of rs) s.put(r); }); await s.flushed(); },
    async replica() {
      const rep = await openDoc(variant, `${name}-replica-${seq++}`);
      const ch = new MessageChannel();
      const applied = new Promise((resolve) => {
        ch.port2.onmessage = async (e) => { Y.applyUpdate(rep.doc, new Uint8Array(e.data)); await rep.flushed(); resolve(rep.todos.size); };
      });
      return {
        run() { ch.port1.postMessage(Y.encodeStateAsUpdate(s.doc)); return applied; },
        get: async (id) => rep.get(id),
        async close() { ch.port1.close(); ch.port2.close(); if (rep.idb) await rep.idb.destroy(); rep.doc.destroy(); },
      };
    },
    async close() { if (s.idb) await s.idb.destroy(); s.doc.destroy(); },
  };
}
