// cairn through its page client (the repo's dist/cairn.js, served at /cairn/), with the records in a
// REPLICATED table (COUNTER count): what a local-first app writes, so every write is recorded for
// sync, as the other libraries record theirs. Variants: ':memory:', and OPFS with durability
// 'full' (a flush per commit) or 'relaxed'.
const ENTRY = '/cairn/cairn.js';

export const info = {
  lib: 'cairn',
  variants: {
    memory: { storage: 'memory', label: "':memory:', REPLICATED table" },
    full: { storage: 'disk', label: "OPFS, durability 'full'" },
    relaxed: { storage: 'disk', label: "OPFS, durability 'relaxed'" },
  },
};

const DDL = `CREATE TABLE IF NOT EXISTS todo (id TEXT PRIMARY KEY, title TEXT NOT NULL, done INTEGER NOT NULL,
  priority INTEGER NOT NULL, owner TEXT NOT NULL, count INTEGER NOT NULL DEFAULT 0) REPLICATED (COUNTER count)`;
const COLS = '(id, title, done, priority, owner, count)';
const row = (r) => (r ? { ...r, done: !!r.done } : r);
let seq = 0;

async function openDb(variant, name) {
  const cairn = await import(/* @vite-ignore */ ENTRY);
  const opts = { sync: true };
  if (variant !== 'memory') opts.durability = variant;
  return cairn.open(variant === 'memory' ? ':memory:' : name, opts);
}

async function store(db) {
  await db.exec(DDL);
  const ins = await db.prepare(`INSERT INTO todo ${COLS} VALUES (?, ?, ?, ?, ?, ?)`);
  const upd = await db.prepare('UPDATE todo SET title = ? WHERE id = ?');
  const get = await db.prepare('SELECT id, title, done, priority, owner, count FROM todo WHERE id = ?');
  const inc = await db.prepare('UPDATE todo SET count = count + 1 WHERE id = ?');
  return { ins, upd, get, inc };
}

const values = (r) => [r.id, r.title, r.done ? 1 : 0, r.priority, r.owner, r.count];

export async function open(variant, name) {
  const db = await openDb(variant, name);
  const st = await store(db);
  return {
    insert: (r) => st.ins.run(values(r)),
    update: (id, title) => st.upd.run([title, id]),
    get: async (id) => row((await st.get.all([id], { rowMode: 'object' }))[0]),
    increment: (id) => st.inc.run([id]),
    // One transaction, 250 rows a statement.
    insertMany: (rs) => db.transaction(async (tx) => {
      for (let i = 0; i < rs.length; i += 250) {
        const part = rs.slice(i, i + 250);
        await tx.run(`INSERT INTO todo ${COLS} VALUES ${part.map(() => '(?, ?, ?, ?, ?, ?)').join(', ')}`, part.flatMap(values));
      }
    }),
    // An empty replica (a second database, its own Worker) synced over a MessageChannel with
    // db.sync.connect; done when it holds as many records as this store.
    async replica() {
      const [{ n: want }] = await db.query('SELECT count(*) AS n FROM todo', [], { rowMode: 'object' });
      const rep = await openDb(variant, `${name}-replica-${seq++}`);
      const rst = await store(rep);
      const count = await rep.prepare('SELECT count(*) AS n FROM todo');
      let links = [];
      return {
        async run() {
          const ch = new MessageChannel();
          links = [await db.sync.connect(ch.port1), await rep.sync.connect(ch.port2)];
          for (;;) {
            const [{ n }] = await count.all([], { rowMode: 'object' });
            if (n >= want) return n;
            await new Promise((r) => setTimeout(r, 0));
          }
        },
        get: async (id) => row((await rst.get.all([id], { rowMode: 'object' }))[0]),
        async close() { for (const l of links) await l.close(); await rep.close(); },
      };
    },
    close: () => db.close(),
  };
}

// Wide nodes, as docs/sync.md ("Wide records") lays them out: one column per property for a
// small node, one row per property (a replicated table keyed by node and property) for a wide
// one, where changing one property records one small change and writes a few pages whatever
// the node's size. WIDE_LAYOUT picks; 'json' (one JSON text column) stays for comparison.
export const WIDE_COLUMNS = 100;
export const WIDE_LAYOUT = (size) => (size <= WIDE_COLUMNS ? 'columns' : 'rows');

export async function openWide(name, size) {
  const db = await openDb('full', name);
  const layout = WIDE_LAYOUT(size);
  const props = Array.from({ length: size }, (_, k) => `p${k}`);
  if (layout === 'columns') {
    await db.exec(`CREATE TABLE IF NOT EXISTS node (id TEXT PRIMARY KEY, ${props.map((p) => `${p} TEXT`).join(', ')}) REPLICATED`);
    const put = await db.prepare(`INSERT OR REPLACE INTO node (id, ${props.join(', ')}) VALUES (?${', ?'.repeat(size)})`);
    const get = await db.prepare('SELECT * FROM node WHERE id = ?');
    const set = {};
    return {
      layout: `a table of ${size} columns, REPLICATED`,
      write: (id, o) => put.run([id, ...props.map((p) => o[p])]),
      read: async (id) => (await get.all([id], { rowMode: 'object' }))[0],
      async setProp(id, p, v) {
        set[p] ??= await db.prepare(`UPDATE node SET ${p} = ? WHERE id = ?`);
        return set[p].run([v, id]);
      },
      close: () => db.close(),
    };
  }
  if (layout === 'rows') {
    await db.exec('CREATE TABLE IF NOT EXISTS prop (node TEXT NOT NULL, key TEXT NOT NULL, value TEXT, PRIMARY KEY (node, key)) REPLICATED');
    const put = await db.prepare('INSERT OR REPLACE INTO prop (node, key, value) VALUES (?, ?, ?)');
    const get = await db.prepare('SELECT key, value FROM prop WHERE node = ?');
    return {
      layout: 'a row per property (node, key, value), REPLICATED',
      // One transaction, 250 properties to a statement.
      async write(id, o) {
        await db.transaction(async (tx) => {
          for (let i = 0; i < props.length; i += 250) {
            const part = props.slice(i, i + 250);
            const sql = `INSERT OR REPLACE INTO prop (node, key, value) VALUES ${part.map(() => '(?, ?, ?)').join(', ')}`;
            await tx.run(sql, part.flatMap((p) => [id, p, o[p]]));
          }
        });
      },
      async read(id) {
        const rows = await get.all([id], { rowMode: 'object' });
        if (rows.length === 0) return undefined;
        const o = {};
        for (const r of rows) o[r.key] = r.value;
        return o;
      },
      setProp: (id, p, v) => put.run([id, p, v]),
      close: () => db.close(),
    };
  }
  if (layout === 'json') {
    await db.exec('CREATE TABLE IF NOT EXISTS node (id TEXT PRIMARY KEY, doc TEXT NOT NULL) REPLICATED');
    const put = await db.prepare('INSERT OR REPLACE INTO node (id, doc) VALUES (?, ?)');
    const get = await db.prepare('SELECT doc FROM node WHERE id = ?');
    const set = await db.prepare('UPDATE node SET doc = json_set(doc, ?, ?) WHERE id = ?');
    return {
      layout: 'a JSON text column, REPLICATED',
      write: (id, o) => put.run([id, JSON.stringify(o)]),
      read: async (id) => { const r = (await get.all([id], { rowMode: 'object' }))[0]; return r && JSON.parse(r.doc); },
      setProp: (id, p, v) => set.run([`$.${p}`, v, id]),
      close: () => db.close(),
    };
  }
  throw new Error(`cairn: wide layout ${layout} is not built yet`);
}
