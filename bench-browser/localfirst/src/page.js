// The benchmark page. The runner drives it through window.lf; each library's adapter is its own
// chunk, loaded on demand, so a page downloads only the library it measures.
import { idOf, record, records, rng, same } from './records.js';

const ADAPTERS = {
  cairn: () => import('./adapters/cairn.js'),
  yjs: () => import('./adapters/yjs.js'),
  automerge: () => import('./adapters/automerge.js'),
  loro: () => import('./adapters/loro.js'),
  tinybase: () => import('./adapters/tinybase.js'),
  pouchdb: () => import('./adapters/pouchdb.js'),
  rxdb: () => import('./adapters/rxdb.js'),
  gun: () => import('./adapters/gun.js'),
  sqlite: () => import('./adapters/sqlite.js'),
  pglite: () => import('./adapters/pglite.js'),
};

const err = (phase, e) => ({ ok: false, phase, error: String((e && (e.stack || e.message)) || e) });
const now = () => performance.now();

/** Each scenario: `check` runs once, untimed, and throws on a mismatch; `op` is one awaited
 * operation (`per` records); `round` scenarios time `run` after an untimed `prepare`. */
const SCENARIOS = {
  insert: {
    async check(s, st) {
      const r = record(st.next++);
      await s.insert(r);
      const got = await s.get(r.id);
      if (!same(got, r)) throw new Error(`insert: read back ${JSON.stringify(got)}, wrote ${JSON.stringify(r)}`);
    },
    op: (s, st) => s.insert(record(st.next++)),
  },
  update: {
    async check(s, st) {
      const id = idOf(st.pick());
      await s.update(id, 'checked title');
      const got = await s.get(id);
      if (!got || got.title !== 'checked title') throw new Error(`update: read back ${JSON.stringify(got)}`);
    },
    op: (s, st) => s.update(idOf(st.pick()), `title ${st.n++}`),
  },
  read: {
    async check(s, st) {
      const i = st.pick();
      const got = await s.get(idOf(i));
      if (!same(got, record(i))) throw new Error(`read: ${JSON.stringify(got)} for ${JSON.stringify(record(i))}`);
    },
    op: (s, st) => s.get(idOf(st.pick())),
  },
  increment: {
    supported: (s) => typeof s.increment === 'function',
    async check(s, st) {
      const id = idOf(st.pick());
      for (let k = 0; k < 3; k++) await s.increment(id);
      const got = await s.get(id);
      if (!got || Number(got.count) !== 3) throw new Error(`increment: three increments made ${got && got.count}`);
    },
    op: (s, st) => s.increment(idOf(st.pick())),
  },
  batch: {
    rounds: true,
    async check(s, st) {
      const rs = records(st.next, st.batch);
      st.next += st.batch;
      await s.insertMany(rs);
      const last = rs[rs.length - 1];
      const got = await s.get(last.id);
      if (!same(got, last)) throw new Error(`batch: the last record read back as ${JSON.stringify(got)}`);
    },
    prepare(s, st) { const rs = records(st.next, st.batch); st.next += st.batch; return rs; },
    run: (s, st, rs) => s.insertMany(rs),
    per: (st) => st.batch,
  },
  replicate: {
    rounds: true,
    supported: (s) => typeof s.replica === 'function',
    async check(s, st) {
      const rep = await s.replica();
      const n = await rep.run();
      const got = await rep.get(idOf(st.seed - 1));
      await rep.close();
      if (n !== st.seed) throw new Error(`replicate: the replica holds ${n} of ${st.seed} records`);
      if (!same(got, record(st.seed - 1))) throw new Error(`replicate: the replica read ${JSON.stringify(got)}`);
    },
    prepare: (s) => s.replica(),
    async run(s, st, rep) { await rep.run(); },
    finish: (s, st, rep) => rep.close(),
    per: (st) => st.seed,
  },
};

/** Warm-up, then samples: each runs operations one at a time for `sampleMs` of timed work or
 * until `cap` records; a round scenario's setup is outside the timed part. */
async function measure(sc, s, st, opts) {
  const once = async () => {
    if (!sc.rounds) { const t0 = now(); await sc.op(s, st); return { ms: now() - t0, ops: 1 }; }
    const p = await sc.prepare(s, st);
    const t0 = now();
    await sc.run(s, st, p);
    const ms = now() - t0;
    if (sc.finish) await sc.finish(s, st, p);
    return { ms, ops: sc.per(st) };
  };
  const w0 = now();
  while (now() - w0 < opts.warmupMs) await once();
  const samples = [];
  for (let k = 0; k < opts.samples; k++) {
    let ms = 0, ops = 0;
    const wall = now();
    do {
      const r = await once();
      ms += r.ms; ops += r.ops;
    } while (ms < opts.sampleMs && ops < opts.cap && now() - wall < opts.sampleMs * 20);
    samples.push({ ms, ops });
  }
  return samples;
}

function state(opts) {
  const r = rng(opts.seedRng || 7);
  return { seed: opts.seed, next: opts.seed, batch: opts.batch, n: 0, pick: () => Math.floor(r() * opts.seed) };
}

async function openSeeded(ad, variant, name, opts) {
  const s = await ad.open(variant, name);
  for (let i = 0; i < opts.seed; i += opts.batch) await s.insertMany(records(i, Math.min(opts.batch, opts.seed - i)));
  return s;
}

async function runScenario(s, name, opts) {
  const sc = SCENARIOS[name];
  if (sc.supported && !sc.supported(s)) return { ok: true, unsupported: true };
  const st = state(opts);
  try { await sc.check(s, st); } catch (e) { return err('check', e); }
  try { return { ok: true, samples: await measure(sc, s, st, opts) }; } catch (e) { return err('run', e); }
}

const DEFAULTS = { seed: 1000, batch: 1000, warmupMs: 1000, samples: 5, sampleMs: 1000, cap: 5000 };

window.lf = {
  crossOriginIsolated: self.crossOriginIsolated,
  scenarios: Object.keys(SCENARIOS),

  async info(lib) { const ad = await ADAPTERS[lib](); return ad.info; },

  /** One (library variant, scenario) pair in this page: open, seed, check, warm up, sample. */
  async scenario(lib, variant, name, o = {}) {
    const opts = { ...DEFAULTS, ...o };
    let ad, s;
    try { ad = await ADAPTERS[lib](); s = await openSeeded(ad, variant, `lf-${lib}-${variant}-${name}`, opts); } catch (e) { return err('open', e); }
    try { return await runScenario(s, name, opts); } finally { try { await s.close(); } catch {} }
  },

  /** Smoke: every scenario in turn in one page, each on a store of its own; not a measurement. */
  async group(lib, variant, names, o = {}) {
    const opts = { ...DEFAULTS, ...o };
    const out = {};
    for (const n of names) {
      let s;
      try { s = await openSeeded(await ADAPTERS[lib](), variant, `lf-${lib}-${variant}-${n}`, opts); } catch (e) { out[n] = err('open', e); continue; }
      out[n] = await runScenario(s, n, opts);
      try { await s.close(); } catch {}
    }
    return out;
  },

  /** Cold start, part one (untimed): a store of `seed` records on disk in this profile. */
  async coldPrepare(lib, variant, o = {}) {
    const opts = { ...DEFAULTS, ...o };
    try { const s = await openSeeded(await ADAPTERS[lib](), variant, `lf-${lib}-${variant}-cold`, opts); await s.close(); return { ok: true }; } catch (e) { return err('setup', e); }
  },

  /** Cold start, part two, in a new browser session: load the library, open the store, read one. */
  async cold(lib, variant, o = {}) {
    const opts = { ...DEFAULTS, ...o };
    const i = Math.floor(opts.seed / 2);
    let s, got, ms;
    try {
      const t0 = now();
      s = await (await ADAPTERS[lib]()).open(variant, `lf-${lib}-${variant}-cold`, { existing: true });
      got = await s.get(idOf(i));
      ms = now() - t0;
    } catch (e) { return err('run', e); }
    try { await s.close(); } catch {}
    if (!same(got, record(i))) return err('check', new Error(`cold: read ${JSON.stringify(got)}`));
    return { ok: true, ms };
  },

  /** Wide nodes of `size` properties: write n nodes, read them, rewrite them whole, update one
   * property on each; one awaited operation at a time, each operation a timed round of n nodes.
   * A warm-up round of n/10 nodes first; samples stop early once `budgetMs` has passed, after at
   * least one (GUN's nodes take a quarter of a second and more each). */
  async wide(lib, size, o = {}) {
    const opts = { samples: 5, warmup: 1, budgetMs: 45000, opMs: 10000, ...o };
    const n = o.n || { 10: 1000, 1000: 100, 10000: 10 }[size];
    let s;
    try { s = await (await ADAPTERS[lib]()).openWide(`lf-wide-${size}`, size); } catch (e) { return err('open', e); }
    const node = (id, v) => { const o = {}; for (let k = 0; k < size; k++) o[`p${k}`] = `${v}-${id}-${k}`; return o; };
    const eq = (a, b) => { for (let k = 0; k < size; k++) if (!a || a[`p${k}`] !== b[`p${k}`]) return false; return true; };
    try {
      try {
        await s.write('check', node('check', 'a'));
        if (!eq(await s.read('check'), node('check', 'a'))) throw new Error('wide: a node read back differently');
        await s.write('check', node('check', 'b'));
        await s.setProp('check', `p${size - 1}`, 'one');
        const got = await s.read('check');
        const want = { ...node('check', 'b'), [`p${size - 1}`]: 'one' };
        if (!eq(got, want)) throw new Error('wide: a rewrite or a one-property update did not show');
      } catch (e) { return err('check', e); }
      const ops = { write: [], read: [], rewrite: [], update: [] };
      let round = 0;
      const t0 = now();
      for (let k = 0; k < opts.warmup + opts.samples; k++) {
        if (k > opts.warmup && now() - t0 > opts.budgetMs) break;
        const ids = Array.from({ length: k < opts.warmup ? Math.ceil(n / 10) : n }, (_, j) => `n${round}-${j}`);
        round++;
        // An operation's round stops after opMs (warm-up: a tenth of it): the nodes done are counted,
        // and the later operations of the round work on the nodes written.
        const limit = k < opts.warmup ? opts.opMs / 10 : opts.opMs;
        const time = async (f, list) => {
          const t0 = now();
          let done = 0;
          for (const id of list) { await f(id); done++; if (now() - t0 > limit) break; }
          return { ms: now() - t0, ops: done };
        };
        const t = {};
        t.write = await time((id) => s.write(id, node(id, 'w')), ids);
        const written = ids.slice(0, t.write.ops);
        t.read = await time(async (id) => { if (!(await s.read(id))) throw new Error(`wide: node ${id} missing`); }, written);
        t.rewrite = await time((id) => s.write(id, node(id, 'r')), written);
        t.update = await time((id) => s.setProp(id, 'p0', `u-${id}`), written);
        if (k >= opts.warmup) for (const op in t) ops[op].push(t[op]);
      }
      return { ok: true, n, ops, layout: s.layout };
    } catch (e) { return err('run', e); } finally { try { await s.close(); } catch {} }
  },
};
