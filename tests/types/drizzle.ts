// Compiled (not run) by the test command, on its own (tsconfig.drizzle.json): Drizzle's own
// declarations do not check clean without its optional peers (mysql2, gel, Node's Buffer), so
// this file is compiled with skipLibCheck, which the other files are not.
import { open } from '../../worker/cairn';
import { drizzle, migrate } from '../../worker/drizzle';
import { sqliteTable, integer, text } from 'drizzle-orm/sqlite-core';
import { eq } from 'drizzle-orm';

const notes = sqliteTable('notes', { id: integer('id').primaryKey(), body: text('body').notNull() });

async function withDrizzle(): Promise<void> {
  const d = drizzle(await open('d'), { schema: { notes } });
  await migrate(d, { journal: { entries: [{ idx: 0, when: 1, tag: '0000_init', breakpoints: true }] }, migrations: { m0000: 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)' } });
  const rows: Array<{ id: number; body: string }> = await d.select().from(notes).where(eq(notes.id, 1));
  // @ts-expect-error notes have no title
  void rows[0].title;
  await d.transaction(async (tx) => {
    await tx.insert(notes).values({ body: 'x' });
  });
  console.log(rows);
}

void withDrizzle;
