// `cairn-db/kysely`: a Kysely dialect over a cairn database. Kysely's own SQLite adapter, query
// compiler and introspector (cairn reads SQLite's dialect and answers `sqlite_master` and
// `pragma_table_info` as SQLite does); the driver is cairn's: a query goes to the database as
// `query` with `rowMode: 'array'` (rows and the changes in one round trip), and a transaction is
// a `db.transaction()`, a session of its own, so that Kysely queries outside it wait for it in
// the Worker instead of running inside it.
import { SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler } from 'kysely';

/** `new Kysely({ dialect: new CairnDialect({ database: db }) })`. `database` is an open cairn
 * database, or a function that opens one (called once, on Kysely's first query). */
export class CairnDialect {
  #config;
  constructor(config) {
    this.#config = config;
  }
  createDriver() {
    return new CairnDriver(this.#config);
  }
  createQueryCompiler() {
    return new SqliteQueryCompiler();
  }
  createAdapter() {
    return new CairnAdapter();
  }
  createIntrospector(db) {
    return new SqliteIntrospector(db);
  }
}

// SQLite's adapter, but DDL runs inside a transaction (Kysely's migrator then runs the pending
// migrations in one), and connections are sessions, which the Worker keeps apart.
class CairnAdapter extends SqliteAdapter {
  get supportsTransactionalDdl() {
    return true;
  }
  get supportsMultipleConnections() {
    return true;
  }
}

class CairnDriver {
  #config;
  #db = null;
  constructor(config) {
    this.#config = config;
  }
  async init() {
    const { database } = this.#config;
    this.#db = typeof database === 'function' ? await database() : database;
  }
  async acquireConnection() {
    return new CairnConnection(this.#db);
  }
  async beginTransaction(conn) {
    await conn.begin();
  }
  async commitTransaction(conn) {
    await conn.end(true);
  }
  async rollbackTransaction(conn) {
    await conn.end(false);
  }
  async savepoint(conn, name) {
    await conn.exec(`SAVEPOINT ${quote(name)}`);
  }
  async rollbackToSavepoint(conn, name) {
    await conn.exec(`ROLLBACK TO ${quote(name)}`);
  }
  async releaseSavepoint(conn, name) {
    await conn.exec(`RELEASE ${quote(name)}`);
  }
  async releaseConnection() {}
  async destroy() {
    if (this.#config.closeOnDestroy !== false) await this.#db?.close();
  }
}

const quote = (name) => `"${String(name).replace(/"/g, '""')}"`;

const ROLLBACK = Symbol('rollback');

class CairnConnection {
  #db;
  #q; // where statements go: the database, or the open transaction
  #end = null; // (commit) => settles the open transaction
  #tx = null; // the promise of db.transaction()
  constructor(db) {
    this.#db = db;
    this.#q = db;
  }

  // The transaction is `db.transaction(fn)` with `fn` waiting for Kysely's commit or rollback:
  // it has begun once `fn` is called.
  begin() {
    return new Promise((started, failed) => {
      this.#tx = this.#db.transaction((tx) => new Promise((resolve, reject) => {
        this.#q = tx;
        this.#end = (commit) => (commit ? resolve() : reject(ROLLBACK));
        started();
      }));
      this.#tx.catch(failed);
    });
  }

  async end(commit) {
    // Kysely rolls back after a commit that failed: that transaction has already ended.
    if (this.#end === null) return;
    const tx = this.#tx;
    this.#end(commit);
    this.#q = this.#db;
    this.#end = this.#tx = null;
    try {
      await tx;
    } catch (e) {
      if (e !== ROLLBACK) throw e;
    }
  }

  exec(sql) {
    return this.#q.exec(sql);
  }

  async executeQuery({ sql, parameters, query }) {
    const r = await this.#q.query(sql, parameters, { rowMode: 'array' });
    const { columns, rowCount, values } = r;
    const n = columns.length;
    const rows = new Array(rowCount);
    for (let i = 0; i < rowCount; i++) {
      const row = {};
      for (let c = 0; c < n; c++) row[columns[c]] = values[i * n + c];
      rows[i] = row;
    }
    const writes = query !== undefined && query.kind !== 'SelectQueryNode' && query.kind !== 'RawNode';
    return writes || r.changes > 0
      ? { rows, numAffectedRows: BigInt(r.changes), insertId: BigInt(r.lastInsertRowid) }
      : { rows };
  }

  async *streamQuery(compiled) {
    const { rows } = await this.executeQuery(compiled);
    for (const row of rows) yield { rows: [row] };
  }
}
