// Compiled (not run) by the test command: the shipped types must describe the API as documented.
import { open, create, destroy, importDatabase, CairnError, type Database, type Row } from '../../worker/cairn';

async function example(): Promise<void> {
  const db: Database = await open('app', { durability: 'full', channel: 'auto', busyTimeout: 1000, preloadRest: 'wait' });
  await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)');
  const info = await db.run('INSERT INTO t (name) VALUES (?)', ['ada']);
  const id: number | bigint = info.lastInsertRowid;
  const rows: Row[] = await db.query('SELECT * FROM t WHERE id = :id', { ':id': id });
  const flat = await db.query('SELECT * FROM t', [], { rowMode: 'array' });
  const n: number = flat.rowCount + flat.values.length + rows.length;
  const stmt = db.prepare('SELECT name FROM t WHERE id = ?');
  const one = await stmt.get([1]);
  await stmt.finalize();
  const total = await db.transaction(async (tx) => {
    await tx.run('DELETE FROM t WHERE id = ?', [n]);
    await tx.transaction(async (sp) => sp.run('DELETE FROM t WHERE id = ?', [n + 1]));
    return (await tx.get('SELECT count(*) AS c FROM t'))?.c;
  });
  const problems: string[] = await db.check();
  const relay = await db.sync.connectRelay(['wss://a.example/', new URL('wss://b.example/')], { token: async () => 'jwt' });
  await db.sync.connectRelay('ws://127.0.0.1:7070/', { token: 'for-tests' });
  const off = db.sync.on('status', (s) => {
    const up = s.relays.filter((r) => r.state === 'connected').length;
    console.log(up, s.pending === 0 && s.lastSyncedAt !== null, s.relays[0]?.lastError?.code, s.relays[0]?.retryInMs);
  });
  const status = await db.sync.status();
  await db.sync.authorize('todo', [await db.sync.id()]);
  await db.sync.revoke('todo', new Set(['a1b2']));
  off();
  await relay.close();
  void status.lastSyncedAt;
  const bytes: Uint8Array = await db.export();
  await db.close();
  await importDatabase('copy', bytes);
  const seen: number[] = [];
  const again: Uint8Array = await db.export({ onProgress: ({ done, total }) => seen.push(done, total ?? 0) });
  await importDatabase('copy', again, { replace: true, onProgress: (p) => seen.push(p.done) });
  const stream = new ReadableStream<Uint8Array>({ start: (c) => { c.enqueue(bytes); c.close(); } });
  await importDatabase('streamed', stream, { total: bytes.length, workerUrl: '/cairn-worker.js' });
  await importDatabase('pieces', (async function* () { yield bytes; })());
  await importDatabase('file', new File([new Uint8Array(bytes)], 'backup.cairn'), { onProgress: (p) => seen.push(p.total ?? 0) });
  (await open(':memory:')).close();
  await destroy('copy');
  (await create('other')).close();
  try {
    await db.query('SELEC');
  } catch (e) {
    if (e instanceof CairnError && e.code === 'SYNTAX') console.log(e.line, e.column, one, total, problems);
  }
}
void example;
