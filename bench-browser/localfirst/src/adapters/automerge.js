// Automerge through automerge-repo: one document holding a map of records (a Counter each). On
// disk: the repo's IndexedDB storage adapter, a write awaited by repo.flush(). Replication: an
// empty repo joined to this one by the MessageChannel network adapter, finding the document.
import { Counter } from '@automerge/automerge';
import { Repo } from '@automerge/automerge-repo';
import { IndexedDBStorageAdapter } from '@automerge/automerge-repo-storage-indexeddb';
import { MessageChannelNetworkAdapter } from '@automerge/automerge-repo-network-messagechannel';

export const info = {
  lib: 'Automerge',
  variants: {
    memory: { storage: 'memory', label: 'automerge-repo, no storage, Counter' },
    disk: { storage: 'disk', label: 'automerge-repo, IndexedDB storage' },
  },
};

let seq = 0;
const plain = (id, t) => (t ? { id, title: t.title, done: t.done, priority: t.priority, owner: t.owner, count: Number(t.count.value ?? t.count) } : undefined);

const newRepo = (variant, name) => new Repo(variant === 'disk' ? { storage: new IndexedDBStorageAdapter(name) } : {});

export async function open(variant, name, { existing } = {}) {
  const repo = newRepo(variant, name);
  const key = `automerge-url:${name}`;
  let handle;
  if (variant === 'disk' && (existing || localStorage.getItem(key))) handle = await repo.find(localStorage.getItem(key));
  else {
    handle = repo.create({ todos: {} });
    if (variant === 'disk') localStorage.setItem(key, handle.url);
  }
  const saved = () => (variant === 'disk' ? repo.flush([handle.documentId]) : undefined);
  const put = (d, r) => { d.todos[r.id] = { title: r.title, done: r.done, priority: r.priority, owner: r.owner, count: new Counter(r.count) }; };
  return {
    async insert(r) { handle.change((d) => put(d, r)); await saved(); },
    async update(id, title) { handle.change((d) => { d.todos[id].title = title; }); await saved(); },
    get: async (id) => plain(id, handle.doc().todos[id]),
    async increment(id) { handle.change((d) => { d.todos[id].count.increment(1); }); await saved(); },
    async insertMany(rs) { handle.change((d) => { for (const r of rs) put(d, r); }); await saved(); },
    async replica() {
      const want = Object.keys(handle.doc().todos).length;
      const rep = newRepo(variant, `${name}-replica-${seq++}`);
      const ch = new MessageChannel();
      const a = new MessageChannelNetworkAdapter(ch.port1);
      let rh;
      return {
        async run() {
          repo.networkSubsystem.addNetworkAdapter(a);
          rep.networkSubsystem.addNetworkAdapter(new MessageChannelNetworkAdapter(ch.port2));
          rh = await rep.find(handle.url);
          for (;;) {
            const n = Object.keys(rh.doc().todos || {}).length;
            if (n >= want) break;
            await new Promise((r) => setTimeout(r, 0));
          }
          if (variant === 'disk') await rep.flush([rh.documentId]);
          return Object.keys(rh.doc().todos).length;
        },
        get: async (id) => plain(id, rh.doc().todos[id]),
        async close() {
          try { a.disconnect(); } catch {}
          await rep.shutdown();
          ch.port1.close(); ch.port2.close();
        },
      };
    },
    close: () => repo.shutdown(),
  };
}
