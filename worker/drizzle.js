// `cairn-db/drizzle`: Drizzle ORM over a cairn database, on Drizzle's SQLite proxy driver
// (its async SQLite dialect and session, fed by a callback). Two things differ from the plain
// proxy: a transaction is a `db.transaction()`, a session of its own, so that queries made
// outside it wait for it in the Worker instead of running inside it; and `migrate` takes the
// migrations bundled with the app (drizzle-kit's `migrations.js`: `{ journal, migrations }`),
// as a page has no folder to read them from.
import { entityKind, extractTablesRelationalConfig, createTableRelationsHelpers, DefaultLogger, sql } from 'drizzle-orm';
import { SQLiteAsyncDialect } from 'drizzle-orm/sqlite-core';
import { SqliteRemoteDatabase, SQLiteRemoteSession, SQLiteProxyTransaction } from 'drizzle-orm/sqlite-proxy';

// The proxy's callback over `q` (the database or a transaction). Drizzle asks for `run` (no
// rows), `all` and `values` (rows as arrays, in the select's column order) or `get` (one such row).
const callback = (q) => async (sql, params, method) => {
  if (method === 'run') return { rows: [], ...(await q.run(sql, params)) };
  const { rowCount, columns, values } = await q.query(sql, params, { rowMode: 'array' });
  const n = columns.length;
  const rows = new Array(rowCount);
  for (let i = 0; i < rowCount; i++) rows[i] = values.slice(i * n, i * n + n);
  return { rows: method === 'get' ? rows[0] : rows };
};

// `db.batch([...])`: every query in one transaction.
const batch = (q) => (queries) => q.transaction(async (tx) => {
  const run = callback(tx);
  const out = [];
  for (const { sql, params, method } of queries) out.push(await run(sql, params, method));
  return out;
});

class CairnSession extends SQLiteRemoteSession {
  static [entityKind] = 'CairnSession';
  constructor(q, dialect, schema, options) {
    super(callback(q), dialect, schema, batch(q), options);
    this.q = q;
    this.options = options;
  }
  async transaction(fn) {
    return this.q.transaction((tx) => fn(new SQLiteProxyTransaction('async', this.dialect,
      new CairnSession(tx, this.dialect, this.schema, this.options), this.schema)));
  }
}

/** `drizzle(db, { schema, logger, casing })`: a Drizzle database over the open cairn database `db`. */
export function drizzle(db, config = {}) {
  const dialect = new SQLiteAsyncDialect({ casing: config.casing });
  let schema;
  if (config.schema) {
    const tables = extractTablesRelationalConfig(config.schema, createTableRelationsHelpers);
    schema = { fullSchema: config.schema, schema: tables.tables, tableNamesMap: tables.tableNamesMap };
  }
  const logger = config.logger === true ? new DefaultLogger() : config.logger || undefined;
  const session = new CairnSession(db, dialect, schema, { logger });
  return new SqliteRemoteDatabase('async', dialect, session, schema);
}

/**
 * Runs the migrations not yet applied, all in one transaction, recording them in
 * `__drizzle_migrations` as Drizzle's migrators do. `config` is what drizzle-kit generates for
 * bundled migrations (`migrations.js`: `{ journal, migrations }`, each migration's statements
 * split by `--> statement-breakpoint`), plus `migrationsTable` to rename that table.
 */
export async function migrate(db, { journal, migrations, migrationsTable }) {
  const list = journal.entries.map((entry) => {
    const sql = migrations[`m${String(entry.idx).padStart(4, '0')}`];
    if (typeof sql !== 'string') throw new Error(`missing migration: ${entry.tag}`);
    return { sql: sql.split('--> statement-breakpoint'), bps: entry.breakpoints, folderMillis: entry.when, hash: '' };
  });
  // Drizzle declares the table's `id SERIAL PRIMARY KEY` and inserts no id: SQLite lets such a
  // key be NULL, cairn does not. An INTEGER PRIMARY KEY, made first, gives each row its id; the
  // columns are Drizzle's, and its `CREATE TABLE IF NOT EXISTS` then leaves the table alone.
  const table = `"${(migrationsTable ?? '__drizzle_migrations').replace(/"/g, '""')}"`;
  await db.session.run(sql.raw(`CREATE TABLE IF NOT EXISTS ${table} (id INTEGER PRIMARY KEY, hash text NOT NULL, created_at numeric)`));
  await db.dialect.migrate(list, db.session, { migrationsTable });
}
