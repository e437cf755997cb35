// The records API (docs/records.md) in the browser: every call over a plain table, bad input
// refused with codes naming the field and nothing written, the page-side cache answering a hot
// get without a request and kept coherent by other writers' commits, two replicas converging
// after concurrent records edits, and sync maintenance from the page (compact, purge, status).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './harness.mjs';

// In the page: runs `fn`, giving what it resolved to or the error's code, field and message.
const TRY = () => {
  window.tryIt = async (fn) => {
    try {
      return { ok: true, value: await fn() };
    } catch (e) {
      return { ok: false, code: e.code, field: e.field, message: e.message };
    }
  };
};

test('every records call over a plain table, and bad input refused', async () => {
  const b = await launch();
  try {
    await b.page.evaluate(TRY);
    const r = await b.page.evaluate(async () => {
      const out = {};
      const db = await cairn.open('records-plain');
      await db.exec(`CREATE TABLE todo (id TEXT PRIMARY KEY, title TEXT NOT NULL, done INTEGER DEFAULT 0,
                     likes INTEGER DEFAULT 0, note TEXT);
                     CREATE TABLE n (k INTEGER PRIMARY KEY, v REAL)`);
      const todos = db.records('todo');
      out.thenable = typeof todos.then === 'function';
      const id = await todos.insert({ title: 'milk' });
      out.id = id;
      out.uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id);
      out.given = await todos.insert({ id: 'b', title: 'bread', likes: 2 });
      out.get = await todos.get(id);
      out.frozen = Object.isFrozen(out.get);
      out.missing = await todos.get('nope');
      out.has = [await todos.has(id), await todos.has('nope')];
      out.update = [await todos.update(id, { done: 1 }), await todos.update('nope', { done: 1 })];
      out.afterUpdate = await db.get('SELECT title, done, likes FROM todo WHERE id = ?', [id]);
      await todos.set('c', { title: 'cheese', note: 'x' });
      await todos.set('c', { title: 'cream' }); // whole record: note back to its default (NULL)
      out.set = await db.get("SELECT * FROM todo WHERE id = 'c'");
      out.swap = [
        await todos.swap('c', { title: 'butter' }, { title: 'no' }),
        await todos.swap('c', { title: 'cream', note: null }, { title: 'sour cream' }),
      ];
      out.swapped = (await todos.get('c')).title;
      out.inc = [await todos.inc('b', 'likes', 3), await todos.inc('b', 'likes'), await todos.inc('nope', 'likes')];
      out.selectAll = (await todos.select()).map((t) => t.id);
      const ids = async (q) => (await todos.select(q)).map((t) => t.id);
      out.ops = {
        eq: await ids({ where: { title: 'bread' } }),
        eqOp: await ids({ where: { title: { $eq: 'bread' } } }),
        isNull: await ids({ where: { note: null }, orderBy: 'id' }),
        ne: await ids({ where: { title: { $ne: 'bread' } }, orderBy: 'id' }),
        gt: await ids({ where: { likes: { $gt: 0 } } }),
        gteLte: await ids({ where: { likes: { $gte: 0, $lte: 0 } }, orderBy: 'id' }),
        lt: await ids({ where: { likes: { $lt: 1 } }, orderBy: [['id', 'desc']] }),
        in: await ids({ where: { id: { $in: ['b', 'c', 'z'] } }, orderBy: 'id' }),
        inEmpty: await ids({ where: { id: { $in: [] } } }),
        like: await ids({ where: { title: { $like: '%CREAM' } } }),
        page: await ids({ orderBy: ['likes', ['id', 'asc']], limit: 1, offset: 1 }),
        offsetOnly: await ids({ orderBy: 'id', offset: 2 }),
      };
      out.count = [await todos.count(), await todos.count({ likes: { $gt: 0 } })];
      out.delete = [await todos.delete('c'), await todos.delete('c')];
      out.afterDelete = [await todos.get('c'), await todos.count()];
      // An integer key: a row id when none is given.
      const n = db.records('n');
      out.intKey = [await n.insert({ v: 1.5 }), await n.insert({ k: 10 }), await n.inc(10, 'v', 2)];
      // watch: the records now, then after a commit that changes them.
      const seen = [];
      const stop = todos.watch({ where: { done: 1 } }, (rows) => seen.push(rows.map((t) => t.title)));
      await until('the first result', async () => seen.length === 1);
      await todos.update('b', { done: 1 });
      await until('the second result', async () => seen.length === 2);
      stop();
      out.watch = seen;

      // Bad input: a code naming the field, nothing written.
      const before = await db.query('SELECT * FROM todo ORDER BY id');
      out.bad = {
        unknownInsert: await tryIt(() => todos.insert({ title: 't', colour: 'red' })),
        unknownUpdate: await tryIt(() => todos.update(id, { done: 0, colour: 'red' })),
        unknownWhere: await tryIt(() => todos.select({ where: { colour: 'red' } })),
        unknownOrder: await tryIt(() => todos.select({ orderBy: 'colour' })),
        object: await tryIt(() => todos.update(id, { title: { text: 'x' } })),
        date: await tryIt(() => todos.insert({ title: new Date(0) })),
        engineType: await tryIt(() => todos.update(id, { done: 'yes' })),
        incText: await tryIt(() => todos.inc(id, 'title', 1)),
        incKey: await tryIt(() => todos.inc(id, 'id', 1)),
        incAmount: await tryIt(() => todos.inc(id, 'likes', '1')),
        addNotSet: await tryIt(() => todos.add(id, 'note', 'x')),
        removeNotSet: await tryIt(() => todos.remove(id, 'note', 'x')),
        text: await tryIt(() => todos.select({ where: { title: { $text: 'milk' } } })),
        operator: await tryIt(() => todos.select({ where: { likes: { $regex: '1' } } })),
        direction: await tryIt(() => todos.select({ orderBy: [['id', 'up']] })),
        limit: await tryIt(() => todos.select({ limit: -1 })),
        queryKey: await tryIt(() => todos.select({ sort: 'id' })),
        method: await tryIt(() => todos.upsert('x', {})),
        table: await tryIt(() => db.records('nothing').get('x')),
        noKey: await tryIt(async () => {
          await db.exec('CREATE TABLE pair (a TEXT, b TEXT, PRIMARY KEY (a, b))');
          return db.records('pair').get('x');
        }),
        notNull: await tryIt(() => todos.insert({ note: 'no title' })),
      };
      out.unchanged = JSON.stringify(await db.query('SELECT * FROM todo ORDER BY id')) === JSON.stringify(before);
      // A column added after the first call is found (the columns are asked for again).
      await db.exec('ALTER TABLE todo ADD COLUMN due TEXT');
      out.added = await tryIt(() => todos.update(id, { due: 'monday' }));
      await db.close();
      return out;
    });
    assert.equal(r.thenable, false);
    assert.ok(r.uuid, 'a version 7 UUID key');
    assert.equal(r.given, 'b');
    assert.equal(r.get.title, 'milk');
    assert.equal(r.get.done, 0);
    assert.equal(r.frozen, true);
    assert.equal(r.missing, undefined);
    assert.deepEqual(r.has, [true, false]);
    assert.deepEqual(r.update, [true, false]);
    assert.deepEqual(r.afterUpdate, { title: 'milk', done: 1, likes: 0 });
    assert.deepEqual(r.set, { id: 'c', title: 'cream', done: 0, likes: 0, note: null });
    assert.deepEqual(r.swap, [false, true]);
    assert.equal(r.swapped, 'sour cream');
    assert.deepEqual(r.inc, [5, 6, undefined]);
    assert.equal(r.selectAll.length, 3);
    const U = r.id; // a version 7 UUID sorts before 'b'
    assert.deepEqual(r.ops, {
      eq: ['b'], eqOp: ['b'], isNull: [U, 'b', 'c'], ne: [U, 'c'], gt: ['b'], gteLte: [U, 'c'], lt: ['c', U],
      in: ['b', 'c'], inEmpty: [], like: ['c'], page: ['c'], offsetOnly: ['c'],
    });
    assert.deepEqual(r.count, [3, 1]);
    assert.deepEqual(r.delete, [true, false]);
    assert.deepEqual(r.afterDelete, [undefined, 2]);
    assert.deepEqual(r.intKey, [1, 10, 2]);
    assert.deepEqual(r.watch, [['milk'], ['milk', 'bread']]);
    const expect = {
      unknownInsert: ['UNKNOWN_FIELD', 'colour'], unknownUpdate: ['UNKNOWN_FIELD', 'colour'],
      unknownWhere: ['UNKNOWN_FIELD', 'colour'], unknownOrder: ['UNKNOWN_FIELD', 'colour'],
      object: ['FIELD_TYPE', 'title'], date: ['FIELD_TYPE', 'title'], engineType: ['FIELD_TYPE', 'done'],
      incText: ['NOT_COUNTER', 'title'], incKey: ['NOT_COUNTER', 'id'], incAmount: ['FIELD_TYPE', 'likes'],
      addNotSet: ['NOT_SET', 'note'], removeNotSet: ['NOT_SET', 'note'], text: ['UNSUPPORTED', 'title'],
      operator: ['INVALID_INPUT', 'likes'], direction: ['INVALID_INPUT', 'id'], limit: ['INVALID_INPUT', undefined],
      queryKey: ['INVALID_INPUT', undefined], method: ['INVALID_INPUT', undefined], table: ['UNKNOWN_TABLE', undefined],
      noKey: ['UNSUPPORTED', undefined], notNull: ['CONSTRAINT_NOT_NULL', undefined],
    };
    for (const [k, [code, field]] of Object.entries(expect)) {
      assert.equal(r.bad[k].ok, false, k);
      assert.equal(r.bad[k].code, code, `${k}: ${r.bad[k].message}`);
      assert.equal(r.bad[k].field, field, k);
      if (field) assert.match(r.bad[k].message, new RegExp(field), k);
    }
    assert.equal(r.unchanged, true, 'nothing written by the refused calls');
    assert.deepEqual(r.added, { ok: true, value: true });
  } finally {
    await b.close();
  }
});

test('the cache answers a hot get without a request and follows other writers', async (t) => {
  const b = await launch();
  try {
    const r = await b.page.evaluate(async () => {
      const out = {};
      const db = await cairn.open('records-cache');
      await db.exec('CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)');
      const kv = db.records('kv');
      await kv.insert({ k: 'a', v: 1 });
      // Requests that reach the engine, counted where the client sends them.
      let sent = 0;
      const send = db._send.bind(db);
      db._send = (op, ...rest) => {
        if (op === 'execute') sent++;
        return send(op, ...rest);
      };
      await kv.get('a');
      await until('the notices on', async () => {
        const before = sent;
        await kv.get('a');
        return sent === before;
      });
      const N = 20000;
      const s0 = sent;
      let t0 = performance.now();
      for (let i = 0; i < N; i++) await kv.get('a');
      out.hotMs = performance.now() - t0;
      out.hotRequests = sent - s0;
      t0 = performance.now();
      for (let i = 0; i < 2000; i++) await db.get('SELECT * FROM kv WHERE k = ?', ['a']);
      out.tripMs = (performance.now() - t0) / 2000 * N;
      out.N = N;
      // Another writer in this tab: its commit's notice empties the table's cache.
      await db.run("UPDATE kv SET v = 2 WHERE k = 'a'");
      out.afterRun = await until('the notice of the update', async () => (await kv.get('a')).v === 2 && 2);
      // A write through records is seen at once, and cached.
      await kv.update('a', { v: 3 });
      const s = sent;
      out.afterUpdate = (await kv.get('a')).v;
      out.updateCached = sent === s;
      window.db = db;
      window.kv = kv;
      return out;
    });
    // Another tab's writes, through its own records, reach this tab's cache.
    const other = await b.context.newPage();
    await other.goto(`${b.server.url}/tests/browser/page.html`);
    await other.waitForFunction(() => window.cairnReady === true);
    await other.evaluate(async () => {
      const db2 = await cairn.open('records-cache');
      await db2.records('kv').update('a', { v: 4 });
      await db2.records('kv').insert({ k: 'b', v: 9 });
      await db2.close();
    });
    await other.close();
    r.otherTab = await b.page.evaluate(async () => {
      const seen = await until("the other tab's write", async () => (await kv.get('a')).v === 4 && (await kv.get('b'))?.v === 9);
      await db.close();
      return seen;
    });
    assert.equal(r.hotRequests, 0, 'hot gets sent no request');
    assert.equal(r.afterRun, 2);
    assert.equal(r.afterUpdate, 3);
    assert.equal(r.updateCached, true);
    assert.equal(r.otherTab, true);
    const hot = Math.round(r.N / (r.hotMs / 1000));
    const trip = Math.round(r.N / (r.tripMs / 1000));
    t.diagnostic(`get from the cache: ${hot} ops/s; a round trip (db.get): ${trip} ops/s`);
  } finally {
    await b.close();
  }
});

test('two replicas converge after concurrent records edits; compact, purge and status from the page', async () => {
  const b = await launch();
  try {
    await b.page.evaluate(TRY);
    const r = await b.page.evaluate(async () => {
      const ddl = `CREATE TABLE note (id TEXT PRIMARY KEY DEFAULT (uuid7()), body TEXT, tag TEXT,
                   likes INTEGER DEFAULT 0) REPLICATED (COUNTER likes)`;
      const out = {};
      const a = await cairn.open('records-a', { sync: true });
      const c = await cairn.open('records-c', { sync: true });
      await a.exec(ddl);
      await c.exec(ddl);
      const statuses = [];
      const offStatus = a.sync.on('status', (s) => statuses.push(s.pending));
      await a.sync.authorize('note', [await c.sync.id()]);
      await c.sync.setOwner(await a.sync.id());
      const ch = new MessageChannel();
      await a.sync.connect(ch.port1);
      await c.sync.connect(ch.port2);
      const na = a.records('note');
      const nc = c.records('note');
      const id = await na.insert({ body: 'hello', likes: 1 });
      await na.insert({ id: 'gone', body: 'secret' });
      await until('c to have the notes', async () => (await nc.count()) === 2);
      await until('c to be authorized', async () => (await tryIt(() => nc.insert({ id: 'fromc', body: 'hi' }))).ok);
      // Concurrent edits: different fields, and increments on both sides.
      await Promise.all([
        na.update(id, { body: 'hello world' }), nc.update(id, { tag: 'greeting' }),
        na.inc(id, 'likes', 2), nc.inc(id, 'likes', 3),
      ]);
      const same = async () => JSON.stringify(await na.select({ orderBy: 'id' })) === JSON.stringify(await nc.select({ orderBy: 'id' }));
      await until('convergence', async () => (await na.get(id))?.likes === 6 && (await nc.get(id))?.likes === 6 && (await same()));
      out.note = await nc.get(id);
      out.notBad = await tryIt(() => na.inc(id, 'body', 1));
      out.digests = (await a.sync.digest()) === (await c.sync.digest());
      // Purge: gone on both, history erased; compact drops what peers acknowledged.
      out.purge = [await a.sync.purge('note', 'gone'), await a.sync.purge('note', ['gone'])];
      await until('the purge to reach c', async () => (await nc.get('gone')) === undefined);
      out.purgeBad = await tryIt(() => a.sync.purge('note', { x: 1 }));
      out.compact = await a.sync.compact();
      out.verify = [await a.sync.verify(), await c.sync.verify()];
      // The status came as notices: no status() call was made.
      await until('a status notice', async () => statuses.length > 0);
      offStatus();
      out.statuses = statuses.length;
      await a.close();
      await c.close();
      return out;
    });
    assert.deepEqual({ body: r.note.body, tag: r.note.tag, likes: r.note.likes }, { body: 'hello world', tag: 'greeting', likes: 6 });
    assert.equal(r.notBad.code, 'NOT_COUNTER');
    assert.equal(r.notBad.field, 'body');
    assert.equal(r.digests, true);
    assert.deepEqual(r.purge, [true, false]);
    assert.equal(r.purgeBad.ok, false);
    assert.equal(typeof r.compact, 'number');
    assert.deepEqual(r.verify, [[], []]);
    assert.ok(r.statuses > 0);
  } finally {
    await b.close();
  }
});

test('add and remove on a SET column converge on two replicas', async () => {
    const b = await launch();
    try {
      const r = await b.page.evaluate(async () => {
        const ddl = `CREATE TABLE doc (id TEXT PRIMARY KEY, tags TEXT) REPLICATED (SET tags)`;
        const a = await cairn.open('records-set-a', { sync: true });
        const c = await cairn.open('records-set-c', { sync: true });
        await a.exec(ddl);
        await c.exec(ddl);
        await a.sync.authorize('doc', [await c.sync.id()]);
        await c.sync.setOwner(await a.sync.id());
        const ch = new MessageChannel();
        await a.sync.connect(ch.port1);
        await c.sync.connect(ch.port2);
        const da = a.records('doc');
        const dc = c.records('doc');
        await da.insert({ id: 'd', tags: ['x'] });
        await until('c to have d', async () => (await dc.get('d')) !== undefined);
        await Promise.all([da.add('d', 'tags', 'y'), dc.add('d', 'tags', 'z'), dc.remove('d', 'tags', 'x')]);
        await until('convergence', async () => JSON.stringify((await da.get('d')).tags) === JSON.stringify((await dc.get('d')).tags) &&
          (await da.get('d')).tags.length === 2);
        const out = { tags: [...(await da.get('d')).tags].sort(), bad: await attempt(() => da.inc('d', 'tags', 1)) };
        await a.close();
        await c.close();
        return out;
      });
      assert.deepEqual(r.tags, ['y', 'z']);
      assert.equal(r.bad.code, 'NOT_COUNTER');
    } finally {
      await b.close();
    }
  });
