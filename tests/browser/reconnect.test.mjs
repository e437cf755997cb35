// The relay client as a good citizen (docs/sync.md 10b, "Relays"): it comes back after a relay
// restart and syncs what was written meanwhile, moves on from a dead relay to the next URL,
// waits at least what a relay's refusal asks, sends the page's token before AUTH (asking the
// page's function again after a refusal, from a follower tab too), and reports all of it in
// `sync.status()` and `sync.on('status')`. Orders and states are asserted, never durations.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch, skipUnless } from './harness.mjs';
import { startRelay, deadPort, fakeRelay, challengeFrame, errorFrame, relayFrame, readFrame } from './relays.mjs';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const DDL = `CREATE TABLE IF NOT EXISTS todo (id TEXT PRIMARY KEY DEFAULT (uuid7()), title TEXT NOT NULL) REPLICATED`;

/** Opens the database `shared` with sync in `page`, records its status notices (`window.seen`:
 * per relay URL, its states in order, repeats dropped; `window.statuses`: every status), and
 * returns its author id. */
function setup(page, name = 'shared') {
  return page.evaluate(async ([ddl, name]) => {
    window.db = await cairn.open(name, { sync: true });
    await db.exec(ddl);
    window.statuses = [];
    window.seen = {};
    db.sync.on('status', (s) => {
      statuses.push(s);
      for (const r of s.relays) {
        const states = (seen[r.url] ??= []);
        if (states.at(-1) !== r.state) states.push(r.state);
      }
    });
    return db.sync.id();
  }, [DDL, name]);
}

/** Whether `want` appears in `states` in order (other states may come between). */
function inOrder(states, want) {
  let i = 0;
  for (const s of states) if (s === want[i]) i++;
  return i === want.length;
}

/** Waits (in Node) until `f()` is truthy; a deadline turns a hang into a failure. */
async function waitFor(what, f, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('a relay killed and restarted: the client waits, comes back, and syncs what was written meanwhile', async () => {
  let relay = await startRelay();
  const one = await launch();
  const two = await launch();
  try {
    const id1 = await setup(one.page);
    const id2 = await setup(two.page);
    await one.page.evaluate((id2) => db.sync.authorize('todo', [id2]), id2);
    void id1;
    await one.page.evaluate((url) => db.sync.connectRelay(url), relay.url);
    await one.page.evaluate(() => db.run("INSERT INTO todo (id, title) VALUES ('a1', 'before the cut')"));
    const first = await one.page.evaluate(() => until('the first row acknowledged', async () => {
      const s = await db.sync.status();
      return s.relays[0].state === 'connected' && s.pending === 0 && s.lastSyncedAt !== null && s;
    }));
    assert.equal(first.relays[0].url, relay.url);

    await relay.stop({ keepData: true });
    await one.page.evaluate(() => until('the cut seen', async () => (await db.sync.status()).relays[0].state === 'waiting'));
    await one.page.evaluate(() => db.run("INSERT INTO todo (id, title) VALUES ('b1', 'during the cut'), ('b2', 'also')"));
    const cut = await one.page.evaluate(() => db.sync.status());
    assert.ok(cut.pending >= 1, `records written while the relay is down are pending: ${JSON.stringify(cut)}`);
    assert.equal(cut.lastSyncedAt, first.lastSyncedAt);

    relay = await startRelay({ port: relay.port, data: relay.data });
    const back = await one.page.evaluate((was) => until('everything acknowledged again', async () => {
      const s = await db.sync.status();
      return s.relays[0].state === 'connected' && s.pending === 0 && s.lastSyncedAt > was && s;
    }), first.lastSyncedAt);
    assert.equal(back.relays[0].lastSyncedAt, back.lastSyncedAt);

    // What was written during the cut reached the relay: a second browser gets it from there.
    await two.page.evaluate((url) => db.sync.connectRelay(url), relay.url);
    await two.page.evaluate(() => until('the rows from one', async () => (await db.get('SELECT count(*) AS n FROM todo')).n === 3));
    const seen = await one.page.evaluate(() => seen);
    assert.ok(inOrder(seen[relay.url], ['connecting', 'connected', 'waiting', 'connecting', 'connected']), JSON.stringify(seen));
    const events = await one.page.evaluate(() => db.sync.events());
    assert.ok(events.some((e) => e.kind === 'relay' && e.code === 'CONNECTION'), JSON.stringify(events));
    assert.deepEqual([one.errors, two.errors], [[], []]);
  } finally {
    await one.close();
    await two.close();
    await relay.stop();
  }
});

test('several relay URLs: a dead one is passed over for the next', async () => {
  const relay = await startRelay();
  const b = await launch();
  try {
    await setup(b.page);
    const dead = `ws://127.0.0.1:${await deadPort()}/`;
    await b.page.evaluate(([dead, live]) => db.sync.connectRelay([dead, live]), [dead, relay.url]);
    await b.page.evaluate(() => db.run("INSERT INTO todo (title) VALUES ('x')"));
    const s = await b.page.evaluate(() => until('the second relay to acknowledge', async () => {
      const s = await db.sync.status();
      return s.relays[1].state === 'connected' && s.pending === 0 && s.lastSyncedAt !== null && s;
    }));
    assert.deepEqual(s.relays.map((r) => r.url), [dead, relay.url]);
    assert.equal(s.relays[0].state, 'waiting');
    assert.equal(s.relays[0].lastError.code, 'CONNECTION');
    const seen = await b.page.evaluate(() => seen);
    assert.ok(inOrder(seen[dead], ['connecting', 'waiting']), JSON.stringify(seen));
    assert.ok(inOrder(seen[relay.url], ['connecting', 'connected']), JSON.stringify(seen));
    // The dead URL failed before the live one was tried.
    const statuses = await b.page.evaluate(() => statuses);
    const deadFailed = statuses.findIndex((x) => x.relays[0]?.lastError?.code === 'CONNECTION');
    const liveTried = statuses.findIndex((x) => x.relays[1]?.state === 'connecting');
    assert.ok(deadFailed >= 0 && deadFailed < liveTried, JSON.stringify(statuses));
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
    await relay.stop();
  }
});

test("a fatal ERROR's retry_after_ms is the least wait before the next attempt", async () => {
  const HINT = 60000;
  const fake = await fakeRelay((conn) => {
    conn.send(challengeFrame());
    conn.onFrame = (f) => {
      if (readFrame(f).type !== 2) return;
      conn.send(errorFrame(true, 'INTERNAL', 'the store is down', HINT));
      conn.close();
    };
  });
  const b = await launch();
  try {
    await setup(b.page);
    await b.page.evaluate((url) => (window.relay = db.sync.connectRelay(url)), fake.url);
    const s = await b.page.evaluate(() => until('the wait after the refusal', () =>
      statuses.find((s) => s.relays[0].state === 'waiting' && s.relays[0].lastError?.code === 'INTERNAL')));
    assert.ok(s.relays[0].retryInMs >= HINT, JSON.stringify(s));
    assert.deepEqual(s.relays[0].lastError, { code: 'INTERNAL', message: 'the store is down', retryAfterMs: HINT });
    // Still waiting: no second connection was made.
    assert.equal(fake.connections.length, 1);
    const events = await b.page.evaluate(() => db.sync.events());
    assert.ok(events.some((e) => e.kind === 'relay' && e.code === 'INTERNAL'), JSON.stringify(events));
    // Closed: the relay's entry is reported closed once, then gone.
    await b.page.evaluate(async () => (await relay).close());
    const after = await b.page.evaluate(() => until('the closed notice', () => statuses.find((s) => s.relays[0]?.state === 'closed')));
    assert.equal(after.relays[0].retryInMs, undefined);
    assert.deepEqual((await b.page.evaluate(() => db.sync.status())).relays, []);
  } finally {
    await b.close();
    await fake.stop();
  }
});

/** A fake relay that refuses the first connection with `code` once AUTH comes, and leaves the
 * later ones waiting after their AUTH. */
function refusingRelay(code) {
  return fakeRelay((conn) => {
    conn.send(challengeFrame());
    conn.onFrame = (f) => {
      if (readFrame(f).type === 2 && conn === fake.connections[0]) {
        conn.send(errorFrame(true, code, 'refused by the test'));
        conn.close();
      }
    };
  }).then((f) => (fake = f));
}
let fake;

/** The relay frames a fake relay's connection received: TOKEN (with its token) and AUTH. */
const framesOf = (conn) => conn.frames.map(readFrame).map((f) => (f.type === 5 ? `TOKEN ${f.token}${f.rest ? ' +' : ''}` : f.type === 2 ? 'AUTH' : f.type));

test('a token function is called before each attempt, and TOKEN goes before AUTH', async () => {
  await refusingRelay('TOKEN_EXPIRED');
  const b = await launch();
  try {
    await setup(b.page);
    await b.page.evaluate((url) => {
      window.calls = 0;
      window.relay = db.sync.connectRelay(url, { token: async () => `token-${++calls}` });
    }, fake.url);
    await waitFor('a second attempt with its AUTH', () => fake.connections[1]?.frames.some((f) => readFrame(f).type === 2));
    assert.deepEqual(framesOf(fake.connections[0]), ['TOKEN token-1', 'AUTH']);
    assert.deepEqual(framesOf(fake.connections[1]), ['TOKEN token-2', 'AUTH']);
    assert.equal(await b.page.evaluate(() => calls), 2);
    const s = await b.page.evaluate(() => db.sync.status());
    assert.equal(s.relays[0].state, 'connecting');
    assert.equal(s.relays[0].lastError.code, 'TOKEN_EXPIRED');
    await b.page.evaluate(async () => (await relay).close());
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
    await fake.stop();
  }
});

test('a string token is sent again as it is; no token, no TOKEN frame', async () => {
  await refusingRelay('BAD_TOKEN');
  const b = await launch();
  try {
    await setup(b.page);
    await b.page.evaluate((url) => (window.relay = db.sync.connectRelay(url, { token: 'for-tests' })), fake.url);
    await waitFor('a second attempt with its AUTH', () => fake.connections[1]?.frames.some((f) => readFrame(f).type === 2));
    assert.deepEqual(framesOf(fake.connections[0]), ['TOKEN for-tests', 'AUTH']);
    assert.deepEqual(framesOf(fake.connections[1]), ['TOKEN for-tests', 'AUTH']);
    await b.page.evaluate(async () => (await relay).close());
    await fake.stop();

    await refusingRelay('FORBIDDEN');
    await b.page.evaluate((url) => db.sync.connectRelay(url), fake.url);
    await waitFor('the AUTH', () => fake.connections[0]?.frames.some((f) => readFrame(f).type === 2));
    assert.deepEqual(framesOf(fake.connections[0]), ['AUTH']);
    // Bad options are refused in the page.
    const bad = await b.page.evaluate((url) => attempt(() => db.sync.connectRelay(url, { token: 42 })), fake.url);
    assert.equal(bad.code, 'INVALID_INPUT');
    const badUrl = await b.page.evaluate(() => attempt(() => db.sync.connectRelay(['http://example.com/'])));
    assert.equal(badUrl.code, 'INVALID_INPUT');
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
    await fake.stop();
  }
});

test("a follower tab's token function answers through the owner tab, and after a take-over", async () => {
  await refusingRelay('TOKEN_EXPIRED');
  const b = await launch();
  try {
    await setup(b.page, 'tabs');
    const second = await b.context.newPage();
    await second.goto(`${b.server.url}/tests/browser/page.html`);
    await second.waitForFunction(() => window.cairnReady === true);
    await setup(second, 'tabs');
    assert.deepEqual(await Promise.all([b.page, second].map((p) => p.evaluate(() => db.isOwner))), [true, false]);
    await second.evaluate((url) => {
      window.calls = 0;
      return db.sync.connectRelay(url, { token: () => `follower-${++calls}` });
    }, fake.url);
    await waitFor('a second attempt with its AUTH', () => fake.connections[1]?.frames.some((f) => readFrame(f).type === 2));
    assert.deepEqual(framesOf(fake.connections[0]), ['TOKEN follower-1', 'AUTH']);
    assert.deepEqual(framesOf(fake.connections[1]), ['TOKEN follower-2', 'AUTH']);
    // The follower sees the status too (the owner passes the notices on).
    const seen = await second.evaluate(() => until('a status in the follower', () => seen[Object.keys(seen)[0]]?.length >= 2 && seen));
    assert.ok(inOrder(seen[fake.url], ['connecting', 'waiting', 'connecting']), JSON.stringify(seen));
    assert.deepEqual(b.errors, []);
    // The owner tab goes: the follower takes the database over, joins the relay again in its
    // own Worker, and its function is asked there.
    await b.page.close();
    await second.evaluate(() => until('the take-over', () => db.isOwner));
    await waitFor('an attempt from the new owner', () => fake.connections[2]?.frames.some((f) => readFrame(f).type === 2));
    assert.deepEqual(framesOf(fake.connections[2]), ['TOKEN follower-3', 'AUTH']);
  } finally {
    await b.close();
    await fake.stop();
  }
});

test('offline: no attempt until the browser is back online, then one at once', {
  // Firefox's offline emulation (BiDi emulation.setNetworkConditions) sets navigator.onLine in
  // the page but not in its Workers, where the relay transport looks.
  skip: skipUnless(['chromium'], "the driver's offline emulation does not reach navigator.onLine in Workers"),
}, async () => {
  const relay = await startRelay();
  const b = await launch();
  try {
    await setup(b.page);
    await b.context.setOffline(true);
    await b.page.evaluate((url) => db.sync.connectRelay(url), relay.url);
    // Offline: waiting, with no time set for an attempt.
    const s = await b.page.evaluate(() => db.sync.status());
    assert.deepEqual(s.relays, [{ url: s.relays[0].url, state: 'waiting' }]);
    await b.context.setOffline(false);
    await b.page.evaluate(() => until('connected', async () => (await db.sync.status()).relays[0].state === 'connected'));
    const seen = await b.page.evaluate(() => seen);
    assert.deepEqual(seen[relay.url].slice(0, 3), ['waiting', 'connecting', 'connected']);
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
    await relay.stop();
  }
});

test('a token function that throws: TOKEN_UNAVAILABLE, and no connection without a token', async () => {
  await refusingRelay('TOKEN_EXPIRED');
  const b = await launch();
  try {
    await setup(b.page);
    await b.page.evaluate((url) => {
      window.calls = 0;
      window.relay = db.sync.connectRelay(url, {
        token: () => {
          if (++calls === 1) throw new Error('the sign-in server is down');
          return `token-${calls}`;
        },
      });
    }, fake.url);
    const s = await b.page.evaluate(() => until('the failed attempt', () => statuses.find((s) => s.relays[0].lastError)));
    assert.equal(s.relays[0].state, 'waiting');
    assert.equal(s.relays[0].lastError.code, 'TOKEN_UNAVAILABLE');
    assert.match(s.relays[0].lastError.message, /the sign-in server is down/);
    // The next attempt asks again, and only then connects.
    await waitFor('an attempt with a token', () => fake.connections[0]?.frames.some((f) => readFrame(f).type === 2));
    assert.deepEqual(framesOf(fake.connections[0]), ['TOKEN token-2', 'AUTH']);
    await b.page.evaluate(async () => (await relay).close());
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
    await fake.stop();
  }
});

test('failures in a row wait within a bound that doubles from 500 ms', async () => {
  // A relay that refuses every connection at once, with no hint.
  const refuser = await fakeRelay((conn) => {
    conn.send(errorFrame(true, 'TOO_MANY_ERRORS', 'go away'));
    conn.close();
  });
  const b = await launch();
  try {
    await setup(b.page);
    await b.page.evaluate((url) => (window.relay = db.sync.connectRelay(url)), refuser.url);
    const waits = await b.page.evaluate(() => until('four waits', () => {
      const w = statuses.filter((s) => s.relays[0]?.state === 'waiting' && s.relays[0].retryInMs !== undefined);
      return w.length >= 4 && w.slice(0, 4).map((s) => s.relays[0].retryInMs);
    }, 60000));
    // Full jitter: the k-th wait in a row is drawn from [0, 500 ms x 2^k).
    waits.forEach((w, k) => assert.ok(w >= 0 && w <= 500 * 2 ** k, `wait ${k}: ${w} ms (${waits})`));
    assert.ok(refuser.connections.length >= 4);
    await b.page.evaluate(async () => (await relay).close());
  } finally {
    await b.close();
    await refuser.stop();
  }
});

test('a connection that stayed up starts the waits again from 500 ms', async () => {
  // Five refusals, then a connection welcomed and held for 7 s (past the 5 s that count as
  // staying up), then refusals again.
  const STAYS = 5;
  await fakeRelay((conn) => {
    if (held.connections.length - 1 !== STAYS) {
      conn.send(errorFrame(true, 'TOO_MANY_ERRORS', 'go away'));
      return conn.close();
    }
    conn.send(challengeFrame());
    conn.onFrame = (f) => {
      if (readFrame(f).type !== 2) return;
      conn.send(relayFrame(3, Buffer.alloc(32)));
      setTimeout(() => conn.close(), 7000);
    };
  }).then((f) => (held = f));
  const b = await launch();
  try {
    await setup(b.page);
    await b.page.evaluate((url) => (window.relay = db.sync.connectRelay(url)), held.url);
    const waits = await b.page.evaluate((n) => until('the wait after the held connection', () => {
      const w = statuses.filter((s) => s.relays[0]?.state === 'waiting' && s.relays[0].retryInMs !== undefined);
      return w.length > n && w.map((s) => s.relays[0].retryInMs);
    }, 90000), STAYS);
    const seen = await b.page.evaluate(() => seen);
    assert.ok(inOrder(seen[held.url], ['connecting', 'waiting', 'connecting', 'connected', 'waiting']), JSON.stringify(seen));
    // Without the reset this wait would be drawn from [0, 16 s): at most 500 ms one time in 32.
    assert.ok(waits[STAYS] <= 500, `the wait after the held connection: ${waits[STAYS]} ms (${waits})`);
    await b.page.evaluate(async () => (await relay).close());
  } finally {
    await b.close();
    await held.stop();
  }
});
let held;

/** An HS256 JWT for `sub`, valid for an hour, signed with `secret` (as an app server makes one). */
function jwt(secret, sub) {
  const b64 = (x) => Buffer.from(typeof x === 'string' ? x : JSON.stringify(x)).toString('base64url');
  const body = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub, exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`;
}

test("the real relay with tokens: the app's token lets a device in, a forged one is BAD_TOKEN", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cairn-secret-'));
  // As text: the relay strips a trailing line break from the file, which random bytes may end in.
  const secret = randomBytes(32).toString('hex');
  writeFileSync(join(dir, 'secret'), secret);
  const relay = await startRelay({ args: ['--auth-secret', join(dir, 'secret')] });
  const one = await launch();
  const two = await launch();
  try {
    const id1 = await setup(one.page);
    const id2 = await setup(two.page);
    await one.page.evaluate((id2) => db.sync.authorize('todo', [id2]), id2);
    await two.page.evaluate((id1) => db.sync.setOwner(id1), id1);
    const good = jwt(secret, 'alice');
    await one.page.evaluate(([url, token]) => db.sync.connectRelay(url, { token: async () => token }), [relay.url, good]);
    await one.page.evaluate(() => db.run("INSERT INTO todo (id, title) VALUES ('t1', 'through a token')"));
    await one.page.evaluate(() => until('acknowledged through the relay', async () => {
      const s = await db.sync.status();
      return s.relays[0].state === 'connected' && s.pending === 0 && s.lastSyncedAt !== null;
    }));
    // The second device, with a token signed by another secret: refused, nothing synced.
    const forged = jwt(randomBytes(32), 'alice');
    await two.page.evaluate(async ([url, token]) => {
      window.forgedRelay = await db.sync.connectRelay(url, { token });
    }, [relay.url, forged]);
    const refused = await two.page.evaluate(() => until('refused', async () => {
      const r = (await db.sync.status()).relays[0];
      return r.lastError && r;
    }));
    assert.equal(refused.lastError.code, 'BAD_TOKEN');
    assert.notEqual(refused.state, 'connected');
    assert.deepEqual(await two.page.evaluate(() => db.query('SELECT id FROM todo')), []);
    // With a token the app made for it, it gets in and syncs.
    await two.page.evaluate(() => window.forgedRelay.close());
    await two.page.evaluate(([url, token]) => db.sync.connectRelay(url, { token }), [relay.url, jwt(secret, 'bob')]);
    await two.page.evaluate(() => until('the row arrives', async () => (await db.query('SELECT id FROM todo')).length === 1));
  } finally {
    await one.close();
    await two.close();
    await relay.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
