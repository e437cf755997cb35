// The records API (docs/records.md) in the browser: every call over a plain table, bad input
// refused with codes naming the field and nothing written, `$text` through an fts5 table, the
// page-side cache answering a hot get without a request and kept coherent by other writers'
// commits, two replicas converging after concurrent records edits (counters, sets, maps, a wide
// record, edited while apart), and sync maintenance from the page (compact, purge, status).
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
        textType: await tryIt(() => todos.count({ title: { $text: 7 } })),
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
      addNotSet: ['NOT_SET', 'note'], removeNotSet: ['NOT_SET', 'note'], text: ['NO_TEXT_INDEX', 'title'], textType: ['FIELD_TYPE', 'title'],
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
      const offStatus = a.sync.on('status', (s) => statuses.push(s));
      // Sync events as a subscription too: c hears of the records it applies.
      const events = [];
      const offEvents = c.sync.on('event', (e) => events.push(`${e.kind} ${e.code}`));
      out.badOn = await tryIt(() => a.sync.on('events', () => {}));
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
      await until('a status notice with the link', async () => statuses.some((s) => s.links === 1));
      offStatus();
      out.statuses = statuses.length;
      out.links = statuses.findLast((s) => s.links > 0).links;
      await until('an applied event', async () => events.some((e) => e.startsWith('applied ')));
      offEvents();
      out.applied = events.find((e) => e.startsWith('applied '));
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
    assert.equal(r.links, 1, 'the status counts the port given to connect');
    assert.equal(r.applied, 'applied APPLIED');
    assert.equal(r.badOn.code, 'INVALID_INPUT');
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


test('$text searches through an fts5 table over the records table', async () => {
  const b = await launch();
  try {
    await b.page.evaluate(TRY);
    const r = await b.page.evaluate(async () => {
      const out = {};
      const db = await cairn.open('records-text');
      await db.exec(`CREATE TABLE todo (id INTEGER PRIMARY KEY, title TEXT, note TEXT, done INTEGER DEFAULT 0);
                     CREATE TABLE other (id INTEGER PRIMARY KEY, title TEXT);
                     CREATE TABLE memo (id TEXT PRIMARY KEY, body TEXT);
                     CREATE VIRTUAL TABLE todo_fts USING fts5(title, note, content='todo', content_rowid='id');
                     CREATE VIRTUAL TABLE memo_fts USING fts5(body, content='memo')`);
      const todos = db.records('todo');
      await todos.insert({ title: 'buy milk', note: 'oat' });
      await todos.insert({ title: 'bake bread', note: 'with milk' });
      await todos.insert({ title: 'milk the cow', done: 1 });
      await todos.insert({ title: 'walk', note: 'bread crumbs for ducks' });
      const ids = async (q) => (await todos.select(q)).map((t) => t.id);
      out.field = await ids({ where: { title: { $text: 'milk' } } });
      out.note = await ids({ where: { note: { $text: 'milk' } } });
      out.all = await ids({ where: { todo_fts: { $text: 'milk' } } });
      out.kept = await ids({ where: { title: { $text: 'bread OR cow' } }, orderBy: 'id' });
      out.prefix = await ids({ where: { title: { $text: 'mil*' } }, orderBy: [['id', 'desc']] });
      out.combined = await ids({ where: { title: { $text: 'milk' }, done: 0 } });
      out.twoFields = await ids({ where: { title: { $text: 'bake' }, note: { $text: 'milk' } } });
      out.ordered = await ids({ where: { todo_fts: { $text: 'milk OR bread' } }, orderBy: [['title', 'desc']], limit: 3 });
      out.count = [await todos.count({ title: { $text: 'milk' } }), await todos.count({ todo_fts: { $text: 'bread' }, done: 0 })];
      // A write through records is found by the next search: the index commits with the row.
      await todos.update(4, { title: 'walk to the milk bar' });
      out.afterUpdate = await ids({ where: { title: { $text: 'milk' } }, orderBy: 'id' });
      // A live search.
      const seen = [];
      const stop = todos.watch({ where: { note: { $text: 'oat*' } }, orderBy: 'id' }, (rows) => seen.push(rows.map((t) => t.id)));
      await until('the first result', async () => seen.length === 1);
      await todos.insert({ title: 'porridge', note: 'oats and water' });
      await until('the second result', async () => seen.length === 2);
      stop();
      out.watch = seen;
      // A text key: the fts5 table's rowid is that key.
      const memos = db.records('memo');
      await memos.insert({ id: 'm1', body: 'call the plumber' });
      await memos.insert({ id: 'm2', body: 'plumber paid' });
      await memos.insert({ id: 'm3', body: 'nothing' });
      out.textKey = (await memos.select({ where: { body: { $text: 'plumber' } }, orderBy: [['id', 'desc']] })).map((m) => m.id);
      const before = await db.query('SELECT * FROM todo ORDER BY id');
      out.bad = {
        noIndex: await tryIt(() => db.records('other').select({ where: { title: { $text: 'x' } } })),
        notIndexed: await tryIt(() => todos.select({ where: { done: { $text: '1' } } })),
        notString: await tryIt(() => todos.count({ title: { $text: ['milk'] } })),
        syntax: await tryIt(() => todos.select({ where: { title: { $text: 'milk) OR (bread' } } })),
        empty: await tryIt(() => todos.select({ where: { title: { $text: '' } } })),
        filter: await tryIt(() => todos.select({ where: { title: { $text: 'colour: red' } } })),
        ftsOther: await tryIt(() => todos.select({ where: { todo_fts: { $text: 'milk', $like: 'x' } } })),
        ftsNoText: await tryIt(() => todos.select({ where: { todo_fts: 'milk' } })),
        unknown: await tryIt(() => todos.select({ where: { nothing: { $text: 'x' } } })),
      };
      out.unchanged = JSON.stringify(await db.query('SELECT * FROM todo ORDER BY id')) === JSON.stringify(before);
      // An index made after the first call is found: the schema is read again.
      await db.exec(`CREATE VIRTUAL TABLE other_fts USING fts5(title, content='other')`);
      await db.records('other').insert({ title: 'late index' });
      out.later = (await db.records('other').select({ where: { title: { $text: 'late' } } })).map((o) => o.title);
      await db.close();
      return out;
    });
    assert.deepEqual(r.field, [1, 3]);
    assert.deepEqual(r.note, [2]);
    assert.deepEqual(r.all, [1, 2, 3]);
    assert.deepEqual(r.kept, [2, 3], 'the column filter keeps the whole query to the field');
    assert.deepEqual(r.prefix, [3, 1]);
    assert.deepEqual(r.combined, [1]);
    assert.deepEqual(r.twoFields, [2]);
    assert.deepEqual(r.ordered, [4, 3, 1]);
    assert.deepEqual(r.count, [2, 2]);
    assert.deepEqual(r.afterUpdate, [1, 3, 4]);
    assert.deepEqual(r.watch, [[1], [1, 5]]);
    assert.deepEqual(r.textKey, ['m2', 'm1']);
    const expect = {
      noIndex: ['NO_TEXT_INDEX', 'title'], notIndexed: ['NO_TEXT_INDEX', 'done'], notString: ['FIELD_TYPE', 'title'],
      syntax: ['SYNTAX', undefined], empty: ['SYNTAX', undefined], filter: ['UNKNOWN_COLUMN', undefined],
      ftsOther: ['INVALID_INPUT', 'todo_fts'], ftsNoText: ['UNKNOWN_FIELD', 'todo_fts'], unknown: ['UNKNOWN_FIELD', 'nothing'],
    };
    for (const [k, [code, field]] of Object.entries(expect)) {
      assert.equal(r.bad[k].ok, false, k);
      assert.equal(r.bad[k].code, code, `${k}: ${r.bad[k].message}`);
      assert.equal(r.bad[k].field, field, k);
      if (field) assert.match(r.bad[k].message, new RegExp(field), k);
    }
    assert.match(r.bad.noIndex.message, /CREATE VIRTUAL TABLE other_fts USING fts5\(title, content='other'\)/);
    assert.equal(r.unchanged, true);
    assert.deepEqual(r.later, ['late index']);
  } finally {
    await b.close();
  }
});

test('two replicas edit a SET, a MAP and a wide record while apart, and converge when back', async () => {
  const b = await launch();
  try {
    await b.page.evaluate(TRY);
    const r = await b.page.evaluate(async () => {
      const W = 1000;
      const ddl = `CREATE TABLE doc (id TEXT PRIMARY KEY, tags TEXT, meta TEXT) REPLICATED (SET tags, MAP meta);
                   CREATE TABLE node (id TEXT PRIMARY KEY, props TEXT) REPLICATED (MAP props);
                   CREATE TABLE prop (node TEXT, field TEXT, value ANY, PRIMARY KEY (node, field)) REPLICATED`;
      const out = {};
      const a = await cairn.open('records-apart-a', { sync: true });
      const c = await cairn.open('records-apart-c', { sync: true });
      await a.exec(ddl);
      await c.exec(ddl);
      await a.sync.authorize('doc', [await c.sync.id()]);
      await a.sync.authorize('node', [await c.sync.id()]);
      await a.sync.authorize('prop', [await c.sync.id()]);
      await c.sync.setOwner(await a.sync.id());
      const join = async () => [await a.sync.connectChannel('records-apart'), await c.sync.connectChannel('records-apart')];
      let links = await join();
      const [da, dc, na, nc] = [a.records('doc'), c.records('doc'), a.records('node'), c.records('node')];
      // The wide record, two ways: a MAP of W keys through records, and a row per field.
      const wide = {};
      for (let i = 0; i < W; i++) wide[`f${i}`] = i;
      await da.insert({ id: 'd', tags: ['x', 'y'], meta: { color: 'red', size: 1 } });
      await na.insert({ id: 'n', props: wide });
      const values = [];
      for (let i = 0; i < W; i++) values.push('n', `f${i}`, i);
      await a.run(`INSERT INTO prop (node, field, value) VALUES ${Array(W).fill('(?, ?, ?)').join(', ')}`, values);
      await until('c to have everything', async () => (await c.get('SELECT count(*) AS n FROM prop')).n === W &&
        Object.keys((await nc.get('n'))?.props ?? {}).length === W && (await dc.count()) === 1);
      // c writes once a's grants have reached it (a refused write writes nothing).
      await until('c to be authorized', async () => (await tryIt(async () => {
        for (const t of ['doc', 'node']) await c.run(`INSERT INTO ${t} (id) VALUES ('probe') ON CONFLICT DO NOTHING`);
        await c.run("INSERT INTO prop VALUES ('probe', 'x', 1) ON CONFLICT DO NOTHING");
      })).ok);
      for (const l of links) await l.close();
      const later = () => new Promise((res) => setTimeout(res, 20));

      // Apart. The set: c removes x; a removes y while c removes and adds it again (a new add
      // that a's remove did not observe: add wins); each adds one of its own.
      await da.remove('d', 'tags', 'y');
      await da.add('d', 'tags', 'z');
      await dc.remove('d', 'tags', 'x');
      await dc.remove('d', 'tags', 'y');
      await dc.add('d', 'tags', 'y');
      await dc.add('d', 'tags', 'w');
      // The map, whole objects written: only the keys that changed are recorded, and each key
      // merges on its own, the later write winning.
      await da.update('d', { meta: { color: 'blue', size: 1, a: 'A' } });
      await later();
      await dc.update('d', { meta: { size: 2, c: 'C' } }); // removes color, later than a's blue
      await later();
      const ma = (await da.get('d')).meta;
      await da.update('d', { meta: { ...ma, size: 3 } }); // later than c's size 2
      // The wide record: one field each, and one both write (c later).
      const pa = (await na.get('n')).props;
      await na.update('n', { props: { ...pa, f1: 'a1', f500: 'a500' } });
      await a.run("UPDATE prop SET value = 'a1' WHERE node = 'n' AND field = 'f1'");
      await a.run("UPDATE prop SET value = 'a500' WHERE node = 'n' AND field = 'f500'");
      await later();
      const pc = (await nc.get('n')).props;
      await nc.update('n', { props: { ...pc, f2: 'c2', f500: 'c500' } });
      await c.run("UPDATE prop SET value = 'c2' WHERE node = 'n' AND field = 'f2'");
      await c.run("UPDATE prop SET value = 'c500' WHERE node = 'n' AND field = 'f500'");
      out.apart = [(await da.get('d')).tags, (await dc.get('d')).tags];

      links = await join();
      const all = async (db) => JSON.stringify([
        await db.query('SELECT * FROM doc'), await db.query('SELECT * FROM node'),
        await db.query('SELECT * FROM prop ORDER BY node, field'),
      ]);
      await until('convergence', async () => (await all(a)) === (await all(c)) && (await a.sync.digest()) === (await c.sync.digest()), 25000);
      const [d1, d2] = [(await da.select({ where: { id: 'd' } }))[0], (await dc.select({ where: { id: 'd' } }))[0]];
      out.same = JSON.stringify(d1) === JSON.stringify(d2);
      out.tags = d1.tags;
      out.meta = d1.meta;
      const props = (await nc.select({ where: { id: 'n' } }))[0].props;
      out.props = { n: Object.keys(props).length, f0: props.f0, f1: props.f1, f2: props.f2, f500: props.f500, f999: props.f999 };
      out.rows = await c.query("SELECT field, value FROM prop WHERE field IN ('f0', 'f1', 'f2', 'f500', 'f999') ORDER BY field");
      out.rowCount = (await a.get("SELECT count(*) AS n FROM prop WHERE node = 'n'")).n;
      out.verify = [await a.sync.verify(), await c.sync.verify()];
      for (const l of links) await l.close();
      await a.close();
      await c.close();
      return out;
    });
    assert.deepEqual(r.apart, [['x', 'z'], ['w', 'y']], 'apart, each side sees only its own edits');
    assert.equal(r.same, true);
    assert.deepEqual(r.tags, ['w', 'y', 'z'], 'x removed, y re-added (add wins), w and z added');
    assert.deepEqual(r.meta, { a: 'A', c: 'C', size: 3 }, 'per key: color removed later, size 3 later than 2');
    assert.deepEqual(r.props, { n: 1000, f0: 0, f1: 'a1', f2: 'c2', f500: 'c500', f999: 999 });
    assert.deepEqual(r.rows, [
      { field: 'f0', value: 0 }, { field: 'f1', value: 'a1' }, { field: 'f2', value: 'c2' },
      { field: 'f500', value: 'c500' }, { field: 'f999', value: 999 },
    ]);
    assert.equal(r.rowCount, 1000);
    assert.deepEqual(r.verify, [[], []]);
  } finally {
    await b.close();
  }
});
