// PGlite (opfs-ahp://, in bench-browser's Worker), for wide nodes only: a node is a row with a
// jsonb column; one property is updated with jsonb_set.
import { toDollarParams, workerDb } from '../../../src/engines/worker-db.js';

export const info = { lib: 'PGlite', variants: {} };

export async function openWide(name) {
  const db = await workerDb(new URL('/pglite-worker.js', location.href), name, { rewrite: toDollarParams });
  await db.exec('CREATE TABLE IF NOT EXISTS node (id TEXT PRIMARY KEY, doc JSONB NOT NULL)');
  return {
    layout: 'a jsonb column (opfs-ahp)',
    write: (id, o) => db.run('INSERT INTO node (id, doc) VALUES (?, ?::jsonb) ON CONFLICT (id) DO UPDATE SET doc = excluded.doc', [id, JSON.stringify(o)]),
    read: async (id) => { const r = (await db.query('SELECT doc::text AS doc FROM node WHERE id = ?', [id]))[0]; return r && JSON.parse(r.doc); },
    setProp: (id, p, v) => db.run("UPDATE node SET doc = jsonb_set(doc, ARRAY[?::text], to_jsonb(?::text)) WHERE id = ?", [p, v, id]),
    close: () => db.close(),
  };
}
