// cairn through its own page client (worker/client.js, built to the repo's dist/cairn.js by `npm run build`),
// mapped onto the same five calls as the peers. The client owns its Worker.
export async function open(name, { entry = '/cairn/cairn.js' } = {}) {
  const mod = await import(/* @vite-ignore */ entry);
  const client = await mod.open(name, {});
  const wrap = (c) => ({
    exec: (script) => c.exec(script),
    query: (sql, params) => c.query(sql, params || [], { rowMode: 'object' }),
    run: (sql, params) => c.run(sql, params || []),
    async prepare(sql) {
      const st = await c.prepare(sql);
      return {
        run: (params) => st.run(params || []),
        all: (params) => st.all(params || []),
        finalize: () => st.finalize(),
      };
    },
    transaction: (cb) => c.transaction((tx) => cb(wrap(tx))),
  });
  const db = wrap(client);
  db.version = client.version ?? mod.version ?? null;
  db.memory = async () => (typeof client.memory === 'function' ? client.memory() : { wasmBytes: null, workerHeap: null });
  db.close = () => client.close();
  return db;
}
