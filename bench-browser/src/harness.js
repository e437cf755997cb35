// The benchmark page. The runner drives it through window.bench; engines are loaded on demand
// (one chunk each) so that a page downloads only the engine it opens.
import { t1Rows, ints, words, mulberry32, T1_SCHEMA } from './data.js';

const ENGINES = {
  sqlite: () => import('./engines/sqlite.js'),
  pglite: () => import('./engines/pglite.js'),
  cairn: () => import('./engines/cairn.js'),
};

async function openEngine(engine, name, opts) {
  const adapter = await ENGINES[engine]();
  return adapter.open(name, opts.engineOptions || {});
}

function makeCtx(engine, rows) {
  const ctx = {
    engine,
    rows,
    /** n scaled with the row count (n is the count at 10,000 rows), at least 1. */
    scale: (n) => Math.max(1, Math.round((n * rows) / 10000)),
    data: { t1Rows, ints, words, mulberry32 },
    T1_SCHEMA,
    pick: (variants) => (engine in variants ? variants[engine] : variants.default),
    num: (x) => (x === null || x === undefined ? x : Number(x)),
    /** Multi-row INSERTs of `per` rows each, in the current transaction (or none). */
    async insertRows(db, table, ncols, rowsArr, per = 200) {
      let stmtSql = null; let stmtN = 0;
      for (let i = 0; i < rowsArr.length; i += per) {
        const chunk = rowsArr.slice(i, i + per);
        if (chunk.length !== stmtN) {
          const one = '(' + new Array(ncols).fill('?').join(',') + ')';
          stmtSql = `INSERT INTO ${table} VALUES ` + new Array(chunk.length).fill(one).join(',');
          stmtN = chunk.length;
        }
        await db.run(stmtSql, chunk.flat());
      }
    },
    /** Untimed setup: t1 with `count` rows, loaded with multi-row inserts in one transaction. */
    async loadT1(db, { table = 't1', count = rows, seed = 1, indexB = false } = {}) {
      await db.exec(T1_SCHEMA.replace('t1', table));
      await db.transaction((tx) => ctx.insertRows(tx, table, 5, t1Rows(count, seed)));
      if (indexB) await db.exec(`CREATE INDEX ${table}_b ON ${table}(b)`);
    },
    /** Untimed check of a table: row count and column sums, as numbers. */
    async tableCheck(db, table = 't1') {
      const [r] = await db.query(`SELECT count(*) AS n, sum(a) AS sa, sum(b) AS sb, sum(g) AS sg, sum(length(c)) AS sc FROM ${table}`, []);
      return { n: ctx.num(r.n), sa: ctx.num(r.sa), sb: ctx.num(r.sb), sg: ctx.num(r.sg), sc: ctx.num(r.sc) };
    },
    /** Untimed setup: 100 customers, orders (5,000 at 10,000 rows) with an index on customer_id. */
    async loadJoin(db) {
      await db.exec('CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, city TEXT)');
      await db.exec('CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, amount INTEGER, note TEXT)');
      const rnd = mulberry32(11);
      const customers = [];
      for (let i = 1; i <= 100; i++) customers.push([i, 'customer ' + words(i), 'city ' + (i % 17)]);
      const orders = [];
      const n = ctx.scale(5000);
      for (let i = 1; i <= n; i++) {
        const amount = Math.floor(rnd() * 10000);
        orders.push([i, 1 + Math.floor(rnd() * 100), amount, words(amount)]);
      }
      await db.transaction(async (tx) => {
        await ctx.insertRows(tx, 'customers', 3, customers);
        await ctx.insertRows(tx, 'orders', 4, orders);
      });
      await db.exec('CREATE INDEX orders_customer ON orders(customer_id)');
    },
  };
  return ctx;
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
  const ctx = makeCtx(engine, opts.rows);
  const tables = w.tables || ['t1', 't2', 'customers', 'orders'];
  const r = await (async () => {
    try { if (w.setup) await w.setup(db, ctx); } catch (e) { return fail('setup', e); }
    let out, ms;
    try {
      const t0 = performance.now();
      out = await w.run(db, ctx);
      ms = performance.now() - t0;
    } catch (e) { return fail('run', e); }
    let check;
    try { check = w.check ? await w.check(db, ctx, out) : null; } catch (e) { return fail('check', e); }
    const memory = await measureMemory(db, opts);
    return { ok: true, ms, check, memory, version: db.version };
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
      await makeCtx(engine, opts.rows).loadT1(db);
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
