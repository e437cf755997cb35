import type { DrizzleConfig } from 'drizzle-orm';
import type { SqliteRemoteDatabase } from 'drizzle-orm/sqlite-proxy';
import type { Database } from './cairn.js';

/** A Drizzle database over the open cairn database `db`. */
export declare function drizzle<TSchema extends Record<string, unknown> = Record<string, never>>(
  db: Database,
  config?: Pick<DrizzleConfig<TSchema>, 'schema' | 'logger' | 'casing'>,
): SqliteRemoteDatabase<TSchema>;

/** What drizzle-kit generates for bundled migrations (`migrations.js`). */
export interface MigrationConfig {
  journal: { entries: Array<{ idx: number; when: number; tag: string; breakpoints: boolean }> };
  migrations: Record<string, string>;
  /** The table that records the migrations run (default `__drizzle_migrations`). */
  migrationsTable?: string;
}

/** Runs the migrations `db` has not had, in one transaction. */
export declare function migrate<TSchema extends Record<string, unknown>>(
  db: SqliteRemoteDatabase<TSchema>,
  config: MigrationConfig,
): Promise<void>;
