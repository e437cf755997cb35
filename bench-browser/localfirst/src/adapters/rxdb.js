// RxDB: a collection 'todos' with a JSON schema. On disk: its Dexie storage (IndexedDB); in
// memory: its memory storage. Updates patch the document found by key. Its in-page replication
// (replicateRxCollection with handlers written by the app) and CRDT plugin are left out: "—".
import { createRxDatabase } from 'rxdb';
import { getRxStorageDexie } from 'rxdb/plugins/storage-dexie';
import { getRxStorageMemory } from 'rxdb/plugins/storage-memory';

export const info = {
  lib: 'RxDB',
  variants: {
    memory: { storage: 'memory', label: 'memory storage' },
    disk: { storage: 'disk', label: 'Dexie storage (IndexedDB)' },
  },
};

const schema = {
  version: 0, primaryKey: 'id', type: 'object',
  properties: {
    id: { type: 'string', maxLength: 32 }, title: { type: 'string' }, done: { type: 'boolean' },
    priority: { type: 'number' }, owner: { type: 'string' }, count: { type: 'number' },
  },
  required: ['id', 'title', 'done', 'priority', 'owner', 'count'],
};

const rec = (d) => (d ? { id: d.id, title: d.title, done: d.done, priority: d.priority, owner: d.owner, count: d.count } : undefined);

export async function open(variant, name) {
  const db = await createRxDatabase({
    name: `rx${name.replace(/[^a-z0-9]/g, '')}`,
    storage: variant === 'memory' ? getRxStorageMemory() : getRxStorageDexie(),
    multiInstance: false,
  });
  const { todos } = await db.addCollections({ todos: { schema } });
  return {
    insert: (r) => todos.insert(r),
    async update(id, title) { const d = await todos.findOne(id).exec(); await d.incrementalPatch({ title }); },
    get: async (id) => rec(await todos.findOne(id).exec()),
    async insertMany(rs) {
      const { error } = await todos.bulkInsert(rs);
      if (error.length) throw new Error(`bulkInsert: ${JSON.stringify(error[0]).slice(0, 200)}`);
    },
    close: () => db.close(),
  };
}
