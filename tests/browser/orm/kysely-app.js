// A page's use of Kysely over cairn (`cairn-db/kysely`), bundled by tests/browser/orm.test.mjs.
// Each step returns what it saw; the test asserts on it.
import { Kysely, sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import { CairnDialect } from 'cairn-db/kysely';

const migrations = {
  '001_people': {
    async up(db) {
      await db.schema.createTable('person')
        .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('born', 'integer')
        .execute();
    },
  },
  '002_pets': {
    async up(db) {
      await db.schema.createTable('pet')
        .addColumn('id', 'integer', (c) => c.primaryKey())
        .addColumn('owner_id', 'integer', (c) => c.notNull().references('person.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('species', 'text', (c) => c.defaultTo('cat'))
        .execute();
      await db.schema.createIndex('pet_owner').on('pet').column('owner_id').execute();
    },
  },
};

export async function run(cairn) {
  const out = {};
  const database = await cairn.open('kysely-app');
  const db = new Kysely({ dialect: new CairnDialect({ database }) });
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const first = await migrator.migrateToLatest();
  out.migrated = first.results.map((r) => `${r.migrationName}:${r.status}`);
  out.migrateError = first.error ? String(first.error) : null;
  if (first.error) throw first.error;
  out.again = (await migrator.migrateToLatest()).results.length;

  const ada = await db.insertInto('person').values({ name: 'Ada', born: 1815 }).executeTakeFirstOrThrow();
  out.adaId = Number(ada.insertId);
  const [alan] = await db.insertInto('person').values({ name: 'Alan', born: 1912 }).returning(['id', 'name']).execute();
  out.alan = alan;
  const inserted = await db.insertInto('pet').values([
    { owner_id: out.adaId, name: 'Lovelace' },
    { owner_id: alan.id, name: 'Enigma', species: 'dog' },
    { owner_id: alan.id, name: 'Bombe', species: 'dog' },
  ]).executeTakeFirstOrThrow();
  out.petsInserted = Number(inserted.numInsertedOrUpdatedRows);

  out.joined = await db.selectFrom('pet')
    .innerJoin('person', 'person.id', 'pet.owner_id')
    .select(['person.name as owner', 'pet.name as pet', 'pet.species'])
    .orderBy('pet.name')
    .execute();
  out.counts = await db.selectFrom('person')
    .leftJoin('pet', 'pet.owner_id', 'person.id')
    .select(['person.name', (eb) => eb.fn.count('pet.id').as('pets')])
    .groupBy('person.name')
    .orderBy('person.name')
    .execute();

  const updated = await db.updateTable('pet').set({ species: 'cat' }).where('name', '=', 'Bombe').executeTakeFirst();
  out.updated = Number(updated.numUpdatedRows);
  const deleted = await db.deleteFrom('pet').where('species', '=', 'dog').executeTakeFirst();
  out.deleted = Number(deleted.numDeletedRows);

  // A transaction that throws: what it wrote is gone, and the error is the caller's.
  try {
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('person').values({ name: 'Grace', born: 1906 }).execute();
      await trx.updateTable('person').set({ born: 0 }).execute();
      // Inside the transaction its own writes are seen.
      out.seenInside = (await trx.selectFrom('person').select('name').where('name', '=', 'Grace').execute()).length;
      throw new Error('changed my mind');
    });
  } catch (e) {
    out.thrown = e.message;
  }
  // A constraint failure inside a transaction rolls it back too.
  try {
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('person').values({ name: 'Edsger' }).execute();
      await trx.insertInto('person').values({ name: 'Ada' }).execute();
    });
  } catch (e) {
    out.constraint = e.code;
  }
  // A query made outside an open transaction waits for it instead of running inside it: issued
  // while the transaction holds an uncommitted row, it runs after the rollback and sees none.
  let held;
  const holding = new Promise((r) => { held = r; });
  const undone = db.transaction().execute(async (trx) => {
    await trx.insertInto('person').values({ name: 'Temp' }).execute();
    held();
    await new Promise((r) => setTimeout(r, 200));
    throw new Error('undo');
  }).catch((e) => e.message);
  await holding;
  out.outside = (await db.selectFrom('person').select('name').where('name', '=', 'Temp').execute()).length;
  out.undone = await undone;
  out.people = await db.selectFrom('person').select(['name', 'born']).orderBy('id').execute();
  // A controlled transaction, committed, with a savepoint rolled back inside it.
  const trx = await db.startTransaction().execute();
  await trx.insertInto('person').values({ name: 'Barbara', born: 1939 }).execute();
  const sp = await trx.savepoint('inner').execute();
  await sp.insertInto('person').values({ name: 'Niklaus', born: 1934 }).execute();
  const back = await sp.rollbackToSavepoint('inner').execute();
  await back.commit().execute();
  out.afterCommit = (await db.selectFrom('person').select('name').orderBy('id').execute()).map((r) => r.name);

  // An fts5 table is listed as SQLite lists it, with its declared columns (without SQLite's
  // shadow tables, which cairn has none of).
  await sql`CREATE VIRTUAL TABLE person_fts USING fts5(name, content='person')`.execute(db);
  const tables = await db.introspection.getTables();
  out.tables = tables.map((t) => ({ name: t.name, columns: t.columns.map((c) => `${c.name}:${c.dataType}:${c.isNullable ? 'null' : 'notnull'}:${c.isAutoIncrementing ? 'auto' : ''}:${c.hasDefaultValue ? 'default' : ''}`) }));
  out.raw = (await sql`select count(*) as n from ${sql.table('person')}`.execute(db)).rows;
  await db.destroy();
  return out;
}
