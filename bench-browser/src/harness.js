// The benchmark page. The runner drives it through window.bench; engines are loaded on demand
// (one chunk each) so that a page downloads only the engine it opens.
import { makeCtx } from './ctx.js';

const ENGINES = {
  sqlite: () => import('./engines/sqlite.js'),
  pglite: () => import('./engines/pglite.js'),
  cairn: () => import('./engines/cairn.js'),
  'cairn-pm': () => import('./engines/cairn.js'), // cairn with its client forced to postMessage
  'cairn-base': () => import('./engines/cairn.js'), // another cairn build (run.mjs --base)
};

/** The engine whose SQL a workload writes for `engine` (cairn-pm and cairn-base are cairn). */
const dialectOf = (engine) => (engine.startsWith('cairn') ? 'cairn' : engine);

async function openEngine(engine, name, opts) {
  const adapter = await ENGINES[engine]();
  return adapter.open(name, opts.engineOptions || {});
}

async function measureMemory(db, opts) {
  const m = { pageHeap: performance.memory ? performance.memory.usedJSHeapSize : null };
  try { Object.assign(m, await db.memory()); } catch (e) { m.engineError = String(e.message || e); }
  if (opts.uaMemory && performance.measureUserAgentSpecificMemory && self.crossOriginIsolated) {
    try {
      const r = await Promise.race([
        performance.measureUserAgentSpecificMemory(),
        new Promise((res) => setTimeout(() => res(null), opts.uaMemoryTimeout || 3000)),
      ]);
      m.uaBytes = r ? r.bytes : null;
    } catch (e) { m.uaBytes = null; }
  }
  return m;
}

let group = null;
async function runWorkload(db, engine, workloadUrl, opts) {
  const w = (await import(workloadUrl)).default;
  const ctx = makeCtx(dialectOf(engine), opts.rows);
  const tables = w.tables || ['t1', 't2', 'customers', 'orders'];
  const r = await (async () => {
    // Where the engine first called into the rest of itself (cairn): 'earlier' (before this
    // workload's setup, in a grouped session), 'setup', 'run' (in the timed part), 'check'.
    const rest = db.rest ? { readyAtRun: null, loaded: null } : null;
    const restStep = async (step) => {
      const r = rest && (await db.rest());
      if (!r) return;
      if (!rest.loaded && r.loaded) rest.loaded = step;
      if (step === 'setup') rest.readyAtRun = r.ready; // whether the background fetch was done
    };
    await restStep('earlier');
    try { if (w.setup) await w.setup(db, ctx); } catch (e) { return fail('setup', e); }
    await restStep('setup');
    let out, ms;
    try {
      const t0 = performance.now();
      out = await w.run(db, ctx);
      ms = performance.now() - t0;
    } catch (e) { return fail('run', e); }
    await restStep('run');
    let check;
    try { check = w.check ? await w.check(db, ctx, out) : null; } catch (e) { return fail('check', e); }
    await restStep('check');
    const memory = await measureMemory(db, opts);
    return { ok: true, ms, check, memory, version: db.version, channel: db.channel ?? null, rest };
  })();
  r.tables = tables;
  return r;
}

const fail = (phase, err) => ({ ok: false, phase, error: String((err && err.message) || err) });

window.bench = {
  crossOriginIsolated: self.crossOriginIsolated,

  /** n timed 4 KiB write + flush() on an OPFS sync access handle, in a Worker; readings in ms. */
  opfsProbe(n = 3) {
    return new Promise((resolve) => {
      const w = new Worker('/probe-worker.js', { type: 'module' });
      w.postMessage({ n });
      w.onmessage = (e) => { w.terminate(); resolve(e.data); };
      w.onerror = (e) => { w.terminate(); resolve({ error: e.message || 'probe worker error' }); };
    });
  },

  /** One timed workload: open a new database, untimed setup, timed run, untimed check. */
  async sample(engine, workloadUrl, opts) {
    let db;
    try { db = await openEngine(engine, opts.dbName || 'bench', opts); } catch (e) { return fail('open', e); }
    try { return await runWorkload(db, engine, workloadUrl, opts); } finally { try { await db.close(); } catch {} }
  },

  // Grouped mode (smoke): one database per browser session, workloads one after another,
  // each workload's tables dropped after it. Quicker, less isolated; never used for published figures.
  async groupOpen(engine, opts) {
    try { group = { engine, db: await openEngine(engine, opts.dbName || 'bench', opts) }; return { ok: true }; } catch (e) { return fail('open', e); }
  },
  async groupSample(workloadUrl, opts) {
    const r = await runWorkload(group.db, group.engine, workloadUrl, opts);
    for (const t of r.tables || []) { try { await group.db.exec(`DROP TABLE IF EXISTS ${t}`); } catch {} }
    delete r.tables;
    return r;
  },
  async groupClose() { try { await group.db.close(); } catch {} group = null; return { ok: true }; },

  /** First open: from before the engine is fetched until the first query on a new database returns. */
  async firstOpen(engine, opts) {
    let db, ms, rows;
    try {
      const t0 = performance.now();
      db = await openEngine(engine, opts.dbName || 'bench', opts);
      rows = await db.query('SELECT 1 AS one', []);
      ms = performance.now() - t0;
    } catch (e) { return fail('open', e); }
    const memory = await measureMemory(db, opts);
    try { await db.close(); } catch {}
    return { ok: true, ms, check: rows.length, memory, version: db.version };
  },

  /** Reopen, part one (untimed): make the database to reopen, in this profile. */
  async reopenPrepare(engine, opts) {
    try {
      const db = await openEngine(engine, opts.dbName || 'bench', opts);
      await makeCtx(dialectOf(engine), opts.rows).loadT1(db);
      await db.close();
      return { ok: true };
    } catch (e) { return fail('setup', e); }
  },

  /** Reopen, part two, in a new browser session with a warm HTTP cache: load, open, count rows. */
  async reopen(engine, opts) {
    let db, ms, rows;
    try {
      const t0 = performance.now();
      db = await openEngine(engine, opts.dbName || 'bench', opts);
      rows = await db.query('SELECT count(*) AS n FROM t1', []);
      ms = performance.now() - t0;
    } catch (e) { return fail('run', e); }
    const memory = await measureMemory(db, opts);
    try { await db.close(); } catch {}
    return { ok: true, ms, check: Number(rows[0].n), memory, version: db.version };
  },
};
