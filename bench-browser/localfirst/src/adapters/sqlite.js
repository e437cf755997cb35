// SQLite WASM (opfs-sahpool, in bench-browser's Worker), for wide nodes only: a node is a row
// with a JSON text column; one property is updated with json_set.
import { workerDb } from '../../../src/engines/worker-db.js';

export const info = { lib: 'SQLite WASM', variants: {} };

export async function openWide(name) {
  const db = await workerDb(new URL('/sqlite-worker.js', location.href), name);
  await db.exec('CREATE TABLE IF NOT EXISTS node (id TEXT PRIMARY KEY, doc TEXT NOT NULL)');
  return {
    layout: 'a JSON text column (opfs-sahpool)',
    write: (id, o) => db.run('INSERT OR REPLACE INTO node (id, doc) VALUES (?, ?)', [id, JSON.stringify(o)]),
    read: async (id) => { const r = (await db.query('SELECT doc FROM node WHERE id = ?', [id]))[0]; return r && JSON.parse(r.doc); },
    setProp: (id, p, v) => db.run('UPDATE node SET doc = json_set(doc, ?, ?) WHERE id = ?', [`$.${p}`, v, id]),
    close: () => db.close(),
  };
}
