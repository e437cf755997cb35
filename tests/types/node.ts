// Compiled (not run) by the test command: `cairn-db/node`'s types, the browser's API over files.
import { open, create, destroy, importDatabase, CairnError, type Database, type Row } from '../../worker/node';

async function example(): Promise<void> {
  const db: Database = await open('data/app.cairn', { durability: 'full', busyTimeout: 1000 });
  const mem = await create(':memory:');
  await db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)');
  await db.run('INSERT INTO t (name) VALUES (?)', ['ada']);
  const rows: Row[] = await db.transaction(async (tx) => tx.query('SELECT * FROM t'));
  const bytes = await db.export({ onProgress: (p) => console.log(p.done, p.total) });
  await importDatabase('copy.cairn', bytes, { replace: true, onProgress: ({ done }) => console.log(done) });
  await destroy('copy.cairn');
  await Promise.all([db.close(), mem.close()]);
  try {
    const synced = await open('x.cairn', { sync: true });
    await synced.sync.connectRelay('ws://127.0.0.1:9000/');
  } catch (e) {
    if (e instanceof CairnError && e.code === 'BUSY') console.log(rows);
  }
}
void example;
