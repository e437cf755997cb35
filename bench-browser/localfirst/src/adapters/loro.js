// Loro: one LoroDoc, a LoroMap 'todos' holding a LoroMap per record, its count a LoroCounter.
// Loro has no storage of its own; on disk, as its docs suggest, each commit's update bytes
// (doc.export({ mode: 'update', from })) are appended to an IndexedDB store, awaited; opening
// imports them all. Replication: a snapshot posted over a MessageChannel and imported.
import { LoroCounter, LoroDoc, LoroMap } from 'loro-crdt/base64';
import { idbLog } from '../records.js';

export const info = {
  lib: 'Loro',
  variants: {
    memory: { storage: 'memory', label: 'LoroDoc, a LoroMap per record, LoroCounter' },
    disk: { storage: 'disk', label: 'updates appended to IndexedDB' },
  },
};

const FIELDS = ['title', 'done', 'priority', 'owner'];
let seq = 0;

async function openDoc(variant, name) {
  const doc = new LoroDoc();
  const log = variant === 'disk' ? await idbLog(`loro-${name}`) : null;
  if (log) { const all = await log.all(); if (all.length) doc.importBatch(all); }
  let from = doc.oplogVersion();
  const todos = doc.getMap('todos');
  return {
    doc, todos, log,
    async commit() {
      doc.commit();
      if (!log) return;
      const u = doc.export({ mode: 'update', from });
      from = doc.oplogVersion();
      await log.append(u);
    },
    get(id) {
      const m = todos.get(id);
      if (!m) return undefined;
      const r = { id };
      for (const f of FIELDS) r[f] = m.get(f);
      r.count = m.get('count').value;
      return r;
    },
    size: () => todos.size,
  };
}

export async function open(variant, name) {
  const s = await openDoc(variant, name);
  const put = (r) => {
    const m = s.todos.setContainer(r.id, new LoroMap());
    for (const f of FIELDS) m.set(f, r[f]);
    const c = m.setContainer('count', new LoroCounter());
    if (r.count) c.increment(r.count);
  };
  return {
    async insert(r) { put(r); await s.commit(); },
    async update(id, title) { s.todos.get(id).set('title', title); await s.commit(); },
    get: async (id) => s.get(id),
    async increment(id) { s.todos.get(id).get('count').increment(1); await s.commit(); },
    async insertMany(rs) { for (const r of rs) put(r); await s.commit(); },
    async replica() {
      const rep = await openDoc(variant, `${name}-replica-${seq++}`);
      const ch = new MessageChannel();
      const applied = new Promise((resolve) => {
        ch.port2.onmessage = async (e) => {
          rep.doc.import(new Uint8Array(e.data));
          if (rep.log) await rep.log.append(new Uint8Array(e.data));
          resolve(rep.size());
        };
      });
      return {
        run() { ch.port1.postMessage(s.doc.export({ mode: 'snapshot' })); return applied; },
        get: async (id) => rep.get(id),
        async close() { ch.port1.close(); ch.port2.close(); rep.log?.close(); rep.doc.free?.(); },
      };
    },
    async close() { s.log?.close(); },
  };
}
