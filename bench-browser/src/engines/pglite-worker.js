// PGlite in a dedicated Worker over opfs-ahp://. One message per statement; PGlite gets the SQL text each time.
import { PGlite } from '@electric-sql/pglite';

let pg;
const ops = {
  async open(name) {
    pg = await PGlite.create('opfs-ahp://' + name);
    const r = await pg.query('SELECT version() AS v');
    return (globalThis.PGLITE_VERSION || '') + ' (' + String(r.rows[0].v).split(' on ')[0] + ')';
  },
  async exec(sql) { await pg.exec(sql); },
  async query(sql, params) { return (await pg.query(sql, params)).rows; },
  async run(sql, params) { return { changes: (await pg.query(sql, params)).affectedRows ?? 0 }; },
  memory() {
    const m = pg.Module || {};
    const mem = m.HEAP8 || m.HEAPU8 || m.wasmMemory?.buffer || m.wasmExports?.memory?.buffer;
    return { wasmBytes: mem ? mem.byteLength : null, workerHeap: self.performance?.memory?.usedJSHeapSize ?? null };
  },
  async close() { await pg.close(); },
};
self.onmessage = async (e) => {
  const { id, op, sql, params } = e.data;
  try {
    const result = await ops[op](sql, params);
    self.postMessage({ id, result });
  } catch (err) {
    self.postMessage({ id, error: String(err && err.message || err) });
  }
};
