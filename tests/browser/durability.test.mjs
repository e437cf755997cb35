// With full durability, a write whose promise resolved survives the page, the Worker and the
// whole browser being killed; a transaction that had not committed leaves no trace. The rows
// carry a full-text index, written in the same commits: after the kill it agrees with them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { launch } from './harness.mjs';

// Writes rows one commit each, opens a transaction that never commits, and reports which
// writes resolved.
async function writeThenLeaveOpen(page) {
  return page.evaluate(async () => {
    const db = await cairn.open('durable');
    await db.exec('CREATE TABLE IF NOT EXISTS w (id INTEGER PRIMARY KEY, note TEXT)');
    await db.exec("CREATE VIRTUAL TABLE IF NOT EXISTS wf USING fts5(note, content='w', content_rowid='id')");
    const resolved = [];
    for (let i = 1; i <= 50; i++) {
      await db.run('INSERT INTO w (id, note) VALUES (?, ?)', [i, `write ${i}`]);
      resolved.push(i);
    }
    await db.exec('BEGIN');
    await db.run("INSERT INTO w (id, note) VALUES (1000, 'uncommitted')");
    await db.run("UPDATE w SET note = 'uncommitted' WHERE id = 1");
    return resolved;
  });
}

async function readBack(page) {
  return page.evaluate(async () => {
    const db = await cairn.open('durable', { create: false });
    const rows = await db.query('SELECT id, note FROM w ORDER BY id');
    const found = async (q) => (await db.query('SELECT rowid AS id FROM wf WHERE wf MATCH ? ORDER BY rowid', [q])).map((r) => r.id);
    return { rows, check: await db.check(), written: await found('write'), uncommitted: await found('uncommitted') };
  });
}

function expectExactly(resolved, after) {
  assert.deepEqual(after.check, []);
  assert.deepEqual(after.rows.map((r) => r.id), resolved, 'committed writes lost, or uncommitted ones kept');
  assert.ok(after.rows.every((r) => r.note === `write ${r.id}`), 'an uncommitted update survived');
  assert.deepEqual(after.written, resolved, 'the full-text index lost committed rows');
  assert.deepEqual(after.uncommitted, [], 'the full-text index kept uncommitted rows');
}

test('writes survive the page (and its Worker) being killed', async () => {
  const b = await launch();
  try {
    const resolved = await writeThenLeaveOpen(b.page);
    // A reload tears the page down with its Worker mid-transaction, as closing the tab does.
    await b.page.reload();
    await b.page.waitForFunction(() => window.cairnReady === true);
    expectExactly(resolved, await readBack(b.page));
  } finally {
    await b.close();
  }
});

test('writes survive the whole browser being killed', async () => {
  const b = await launch({ ownBrowser: true });
  let profile = b.profile;
  try {
    const resolved = await writeThenLeaveOpen(b.page);
    // SIGKILL every process of this browser: no shutdown, no flush, as a crash or power cut.
    // (The bracket keeps the pattern from matching the shell that runs pkill.)
    const pattern = profile.replace(/cairn-profile/, '[c]airn-profile');
    execSync(`pkill -9 -f -- '${pattern}'`);
    await b.context.close().catch(() => {});
    await b.server.close();
    const again = await launch({ profile, port: Number(new URL(b.server.url).port) });
    try {
      expectExactly(resolved, await readBack(again.page));
    } finally {
      await again.close({ keepProfile: true });
    }
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
});
