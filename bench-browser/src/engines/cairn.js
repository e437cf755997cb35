// cairn through its own page client (worker/client.js, built to the repo's dist/cairn.js by `npm run build`),
// mapped onto the same five calls as the peers. The client owns its Worker. `channel` is open()'s
// option: 'postMessage' forces the channel a page that is not cross-origin isolated gets; left
// out, the client takes the shared-memory channel this page (served isolated) allows.
export async function open(name, { entry = '/cairn/cairn.js', channel } = {}) {
  const mod = await import(/* @vite-ignore */ entry);
  const client = await mod.open(name, channel ? { channel } : {});
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
  db.channel = client.channel;
  // Whether the rest of the engine (cairn-rest.wasm) is fetched, and whether the engine has called
  // into it, from the Worker's memory report.
  db.rest = async () => {
    const m = typeof client.memory === 'function' ? await client.memory() : null;
    return m && 'restLoaded' in m ? { ready: !!m.restReady, loaded: !!m.restLoaded } : null;
  };
  db.close = () => client.close();
  return db;
}
