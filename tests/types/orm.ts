// Compiled (not run) by the test command: rows typed through query<T>, get<T>, prepare<T>; the
// error code union; migrations; and the Kysely entry with Kysely's own types (Drizzle's: drizzle.ts).
import { open, CairnError, type CairnErrorCode, type Migration } from '../../worker/cairn';
import { CairnDialect } from '../../worker/kysely';
import { Kysely, type Generated } from 'kysely';

interface Todo {
  id: number;
  title: string;
  done: 0 | 1;
}

async function typed(): Promise<void> {
  const migrations: Migration[] = [
    'CREATE TABLE todo (id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER DEFAULT 0)',
    { version: 2, up: 'CREATE INDEX todo_done ON todo (done)' },
    { version: 3, up: async (tx) => { await tx.run("UPDATE todo SET title = trim(title)"); } },
  ];
  const db = await open('app', { migrations });
  const todos: Todo[] = await db.query<Todo>('SELECT id, title, done FROM todo');
  const one: Todo | undefined = await db.get<Todo>('SELECT * FROM todo WHERE id = ?', [1]);
  const stmt = db.prepare<Todo>('SELECT * FROM todo WHERE done = ?');
  const open_: Todo[] = await stmt.all([0]);
  const first: Todo | undefined = await stmt.get([0]);
  await db.transaction(async (tx) => {
    const inTx: Todo[] = await tx.query<Todo>('SELECT * FROM todo');
    return inTx.length;
  });
  // @ts-expect-error a row typed as Todo has no `body`
  void todos[0].body;
  try {
    await db.run('INSERT INTO todo (title) VALUES (?)', [null]);
  } catch (e) {
    if (e instanceof CairnError) {
      const code: CairnErrorCode = e.code;
      if (code === 'MIGRATION') console.log(e.version);
      // @ts-expect-error not a documented code
      if (e.code === 'NO_SUCH_CODE') console.log(code);
    }
  }
  console.log(one?.title, open_.length, first?.done);
}

interface KyselyDB {
  person: { id: Generated<number>; name: string; born: number | null };
}

async function withKysely(): Promise<void> {
  const k = new Kysely<KyselyDB>({ dialect: new CairnDialect({ database: await open('k') }) });
  const rows: Array<{ name: string }> = await k.selectFrom('person').select('name').execute();
  await k.insertInto('person').values({ name: 'Ada', born: 1815 }).execute();
  const lazy = new Kysely<KyselyDB>({ dialect: new CairnDialect({ database: () => open('k'), closeOnDestroy: false }) });
  await lazy.destroy();
  console.log(rows);
}

void typed;
void withKysely;
