// TinyBase: a MergeableStore, a row per record in table 'todos'. On disk: its IndexedDB persister,
// each write awaited by persister.save() (the persister writes the store's content). Replication:
// the local synchronizer (tinybase/synchronizers/synchronizer-local), one on each store. No
// counter type.
import { createMergeableStore } from 'tinybase';
import { createIndexedDbPersister } from 'tinybase/persisters/persister-indexed-db';
import { createLocalSynchronizer } from 'tinybase/synchronizers/synchronizer-local';

export const info = {
  lib: 'TinyBase',
  variants: {
    memory: { storage: 'memory', label: 'MergeableStore' },
    disk: { storage: 'disk', label: 'MergeableStore, IndexedDB persister' },
  },
};

let seq = 0;
const row = (r) => ({ title: r.title, done: r.done, priority: r.priority, owner: r.owner, count: r.count });

async function openStore(variant, name) {
  const store = createMergeableStore();
  let persister = null;
  if (variant === 'disk') {
    persister = createIndexedDbPersister(store, `tinybase-${name}`);
    await persister.load();
  }
  const saved = () => (persister ? persister.save() : undefined);
  const get = (id) => (store.hasRow('todos', id) ? { id, ...store.getRow('todos', id) } : undefined);
  return { store, persister, saved, get };
}

export async function open(variant, name) {
  const s = await openStore(variant, name);
  return {
    async insert(r) { s.store.setRow('todos', r.id, row(r)); await s.saved(); },
    async update(id, title) { s.store.setCell('todos', id, 'title', title); await s.saved(); },
    get: async (id) => s.get(id),
    async insertMany(rs) { s.store.transaction(() => { for (const r of rs) s.store.setRow('todos', r.id, row(r)); }); await s.saved(); },
    async replica() {
      const want = s.store.getRowCount('todos');
      const rep = await openStore(variant, `${name}-replica-${seq++}`);
      const syncs = [createLocalSynchronizer(s.store), createLocalSynchronizer(rep.store)];
      return {
        async run() {
          for (const x of syncs) await x.startSync();
          while (rep.store.getRowCount('todos') < want) await new Promise((r) => setTimeout(r, 0));
          await rep.saved();
          return rep.store.getRowCount('todos');
        },
        get: async (id) => rep.get(id),
        async close() { for (const x of syncs) await x.destroy(); if (rep.persister) await rep.persister.destroy(); },
      };
    },
    async close() { if (s.persister) await s.persister.destroy(); },
  };
}
