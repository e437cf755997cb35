// Page side of a peer engine's Worker: one message per statement, same five calls for every engine.
export function workerDb(url, name, { rewrite = (s) => s } = {}) {
  const worker = new Worker(url, { type: 'module' });
  let next = 1;
  const pending = new Map();
  let dead = null;
  worker.onmessage = (e) => {
    const { id, result, error } = e.data;
    const p = pending.get(id);
    pending.delete(id);
    if (error !== undefined) p.reject(new Error(error));
    else p.resolve(result);
  };
  worker.onerror = (e) => {
    dead = new Error('worker error: ' + (e.message || 'no message'));
    for (const p of pending.values()) p.reject(dead);
    pending.clear();
  };
  const call = (op, sql, params) => new Promise((resolve, reject) => {
    if (dead) return reject(dead);
    const id = next++;
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, op, sql: sql === undefined ? undefined : rewrite(sql), params });
  });
  const db = {
    version: null,
    exec: (script) => call('exec', script),
    query: (sql, params) => call('query', sql, params),
    run: (sql, params) => call('run', sql, params),
    // The Worker caches prepared statements by SQL text, so a statement handle is the text.
    prepare: async (sql) => ({
      run: (params) => call('run', sql, params),
      all: (params) => call('query', sql, params),
      finalize: async () => {},
    }),
    // BEGIN and COMMIT are statements of their own: one round trip each, like every other statement.
    async transaction(cb) {
      await call('exec', 'BEGIN');
      try {
        const r = await cb(db);
        await call('exec', 'COMMIT');
        return r;
      } catch (err) {
        try { await call('exec', 'ROLLBACK'); } catch {}
        throw err;
      }
    },
    memory: () => call('memory'),
    async close() { try { await call('close'); } finally { worker.terminate(); } },
  };
  return call('open', name).then((info) => { db.version = info; return db; });
}

/** `?` placeholders to PostgreSQL's `$n`, outside quoted strings; cached by text. */
const pgCache = new Map();
export function toDollarParams(sql) {
  let out = pgCache.get(sql);
  if (out !== undefined) return out;
  let n = 0; out = ''; let quote = null;
  for (const ch of sql) {
    if (quote) { if (ch === quote) quote = null; out += ch; }
    else if (ch === "'" || ch === '"') { quote = ch; out += ch; }
    else if (ch === '?') out += '$' + (++n);
    else out += ch;
  }
  pgCache.set(sql, out);
  return out;
}
