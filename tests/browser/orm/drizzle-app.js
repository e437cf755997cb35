// A page's use of Drizzle over cairn (`cairn-db/drizzle`), bundled by tests/browser/orm.test.mjs.
// The migrations are as drizzle-kit writes them for an app that bundles them (`migrations.js`).
import { eq, sql, asc, count } from 'drizzle-orm';
import { sqliteTable, integer, text } from 'drizzle-orm/sqlite-core';
import { drizzle, migrate } from 'cairn-db/drizzle';

const authors = sqliteTable('authors', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  name: text('name').notNull().unique(),
});
const books = sqliteTable('books', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  authorId: integer('author_id').notNull().references(() => authors.id),
  title: text('title').notNull(),
  done: integer('done', { mode: 'boolean' }).notNull().default(false),
});

const config = {
  journal: {
    entries: [
      { idx: 0, when: 1765000000000, tag: '0000_authors', breakpoints: true },
      { idx: 1, when: 1765000001000, tag: '0001_books', breakpoints: true },
    ],
  },
  migrations: {
    m0000: 'CREATE TABLE `authors` (\n\t`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,\n\t`name` text NOT NULL\n);\n' +
      '--> statement-breakpoint\nCREATE UNIQUE INDEX `authors_name_unique` ON `authors` (`name`);',
    m0001: 'CREATE TABLE `books` (\n\t`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,\n\t`author_id` integer NOT NULL,\n' +
      '\t`title` text NOT NULL,\n\t`done` integer DEFAULT false NOT NULL,\n' +
      '\tFOREIGN KEY (`author_id`) REFERENCES `authors`(`id`) ON UPDATE no action ON DELETE no action\n);\n',
  },
};

export async function run(cairn) {
  const out = {};
  const database = await cairn.open('drizzle-app');
  const db = drizzle(database, { schema: { authors, books } });
  await migrate(db, config);
  await migrate(db, config); // nothing left to run
  out.migrations = (await database.query('SELECT hash, created_at FROM __drizzle_migrations ORDER BY id')).length;

  const [le] = await db.insert(authors).values({ name: 'Ursula K. Le Guin' }).returning();
  out.le = le;
  const [pr] = await db.insert(authors).values({ name: 'Terry Pratchett' }).returning({ id: authors.id });
  await db.insert(books).values([
    { authorId: le.id, title: 'The Dispossessed', done: true },
    { authorId: le.id, title: 'The Lathe of Heaven' },
    { authorId: pr.id, title: 'Small Gods' },
  ]);
  out.joined = await db.select({ author: authors.name, title: books.title, done: books.done })
    .from(books).innerJoin(authors, eq(books.authorId, authors.id)).orderBy(asc(books.title));
  out.perAuthor = await db.select({ name: authors.name, n: count(books.id) })
    .from(authors).leftJoin(books, eq(books.authorId, authors.id)).groupBy(authors.name).orderBy(authors.name);
  out.first = await db.select().from(authors).where(eq(authors.id, pr.id)).get();

  try {
    await db.insert(authors).values({ name: 'Terry Pratchett' });
  } catch (e) {
    out.duplicate = e.cause?.code;
  }
  const upd = await db.update(books).set({ done: true }).where(eq(books.title, 'Small Gods')).returning({ id: books.id });
  out.updated = upd.length;
  await db.delete(books).where(eq(books.title, 'The Lathe of Heaven'));
  out.books = (await db.select({ title: books.title, done: books.done }).from(books).orderBy(books.id));

  try {
    await db.transaction(async (tx) => {
      await tx.insert(authors).values({ name: 'N. K. Jemisin' });
      await tx.delete(books);
      out.seenInside = (await tx.select().from(books)).length;
      throw new Error('roll it back');
    });
  } catch (e) {
    out.thrown = e.message;
  }
  // A query made outside an open transaction waits for it instead of running inside it.
  let held;
  const holding = new Promise((r) => { held = r; });
  const undone = db.transaction(async (tx) => {
    await tx.insert(authors).values({ name: 'Temp' });
    held();
    await new Promise((r) => setTimeout(r, 200));
    throw new Error('undo');
  }).catch((e) => e.message);
  await holding;
  out.outside = (await db.select().from(authors).where(eq(authors.name, 'Temp'))).length;
  out.undone = await undone;
  out.afterRollback = {
    authors: (await db.select({ name: authors.name }).from(authors).orderBy(authors.id)).map((r) => r.name),
    books: (await db.select().from(books)).length,
  };
  // Nested: the inner one (a savepoint) rolls back, the outer commits.
  await db.transaction(async (tx) => {
    await tx.insert(authors).values({ name: 'Iain M. Banks' });
    await tx.transaction(async (inner) => {
      await inner.insert(authors).values({ name: 'Nobody' });
      inner.rollback();
    }).catch(() => {});
  });
  out.afterNested = (await db.select({ name: authors.name }).from(authors).orderBy(authors.id)).map((r) => r.name);
  // Raw SQL through the driver: rows come as arrays, as the proxy's callback gives them.
  out.tables = (await db.values(sql`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)).map((r) => r[0]);
  out.columns = await db.values(sql`SELECT name, type, "notnull", pk FROM pragma_table_info('books') ORDER BY cid`);
  await database.close();
  return out;
}
