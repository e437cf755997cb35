import type { ArrayRows, CairnError, ColumnRows, Database, Params, Row } from './cairn.js';

export interface QueryState<T> {
  /** The latest result; undefined until the first. */
  data: T | undefined;
  /** The query's last error, cleared by the next result. */
  error: CairnError | undefined;
  /** True until the first result or error (and again when the query or its parameters change). */
  loading: boolean;
}

/** The result of `sql` on `db`, re-rendered when a commit (this tab's, another tab's, a sync
 * apply) changes it. `db` may be null while the database opens. */
export function useQuery(db: Database | null | undefined, sql: string, params?: Params, options?: { rowMode?: 'object' }): QueryState<Row[]>;
export function useQuery(db: Database | null | undefined, sql: string, params: Params | undefined, options: { rowMode: 'array' }): QueryState<ArrayRows>;
export function useQuery(db: Database | null | undefined, sql: string, params: Params | undefined, options: { rowMode: 'columns' }): QueryState<ColumnRows>;
