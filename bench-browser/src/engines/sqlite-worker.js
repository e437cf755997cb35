// SQLite WASM (official build) in a dedicated Worker over the opfs-sahpool VFS.
// One message per statement; prepared statements cached by SQL text.
import sqlite3InitModule from '@sqlite.org/sqlite-wasm';

let sqlite3, db;
const cache = new Map();
function stmt(sql, params) {
  let st = cache.get(sql);
  if (!st) { st = db.prepare(sql); cache.set(sql, st); }
  else st.reset(true);
  if (params && params.length) st.bind(params);
  return st;
}
const ops = {
  async open(name) {
    sqlite3 = await sqlite3InitModule();
    const pool = await sqlite3.installOpfsSAHPoolVfs({});
    db = new pool.OpfsSAHPoolDb('/' + name + '.db');
    return sqlite3.version.libVersion;
  },
  exec(sql) { db.exec(sql); },
  query(sql, params) {
    const st = stmt(sql, params);
    const rows = [];
    while (st.step()) rows.push(st.get({}));
    st.reset();
    return rows;
  },
  run(sql, params) {
    const st = stmt(sql, params);
    while (st.step()) {}
    st.reset();
    return { changes: db.changes() };
  },
  memory() {
    return { wasmBytes: sqlite3.wasm.heap8u().byteLength, workerHeap: self.performance?.memory?.usedJSHeapSize ?? null };
  },
  close() { for (const st of cache.values()) st.finalize(); cache.clear(); db.close(); },
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
