// PouchDB: a document per record. On disk: its browser build's IndexedDB adapter (idb); in
// memory: its memory adapter plugin. An update is get, change, put (the document's _rev), as its docs show.
// Replication: PouchDB.replicate from this database to an empty one, in the page. No counter.
import PouchDB from './pouchdb-global.js';
import 'pouchdb/dist/pouchdb.memory.js';

export const info = {
  lib: 'PouchDB',
  variants: {
    memory: { storage: 'memory', label: 'memory adapter' },
    disk: { storage: 'disk', label: 'idb adapter (IndexedDB)' },
  },
};

let seq = 0;
const doc = (r) => ({ _id: r.id, title: r.title, done: r.done, priority: r.priority, owner: r.owner, count: r.count });
const rec = (d) => (d ? { id: d._id, title: d.title, done: d.done, priority: d.priority, owner: d.owner, count: d.count } : undefined);
const newDb = (variant, name) => new PouchDB(`pouch-${name}`, variant === 'memory' ? { adapter: 'memory' } : {});
const get = async (db, id) => { try { return rec(await db.get(id)); } catch (e) { if (e.status === 404) return undefined; throw e; } };

export async function open(variant, name) {
  const db = newDb(variant, name);
  return {
    insert: (r) => db.put(doc(r)),
    async update(id, title) { const d = await db.get(id); d.title = title; await db.put(d); },
    get: (id) => get(db, id),
    async insertMany(rs) {
      const res = await db.bulkDocs(rs.map(doc));
      const bad = res.find((x) => x.error);
      if (bad) throw new Error(`bulkDocs: ${bad.error} ${bad.reason || ''}`);
    },
    async replica() {
      const rep = newDb(variant, `${name}-replica-${seq++}`);
      return {
        async run() { await PouchDB.replicate(db, rep); return (await rep.info()).doc_count; },
        get: (id) => get(rep, id),
        close: () => rep.destroy(),
      };
    },
    close: () => db.close(),
  };
}
