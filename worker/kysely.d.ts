import type { DatabaseIntrospector, Dialect, DialectAdapter, Driver, Kysely, QueryCompiler } from 'kysely';
import type { Database } from './cairn.js';

export interface CairnDialectConfig {
  /** An open cairn database, or a function that opens one (called on Kysely's first query). */
  database: Database | (() => Promise<Database>);
  /** Whether `kysely.destroy()` closes the database (default true). */
  closeOnDestroy?: boolean;
}

/** A Kysely dialect over a cairn database: `new Kysely<DB>({ dialect: new CairnDialect({ database: db }) })`. */
export declare class CairnDialect implements Dialect {
  constructor(config: CairnDialectConfig);
  createDriver(): Driver;
  createQueryCompiler(): QueryCompiler;
  createAdapter(): DialectAdapter;
  createIntrospector(db: Kysely<any>): DatabaseIntrospector;
}
