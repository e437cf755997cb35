/** Every code in docs/protocol.md's table ("Error codes"); tests/docs checks the two agree. */
export type CairnErrorCode =
  | 'SYNTAX' | 'UNKNOWN_TABLE' | 'UNKNOWN_COLUMN' | 'UNKNOWN_INDEX' | 'UNKNOWN_FUNCTION'
  | 'AMBIGUOUS_COLUMN' | 'ALREADY_EXISTS' | 'PARAM_COUNT' | 'TYPE' | 'CONSTRAINT_NOT_NULL'
  | 'CONSTRAINT_UNIQUE' | 'CONSTRAINT_PRIMARY_KEY' | 'CONSTRAINT_CHECK' | 'CONSTRAINT_FOREIGN_KEY' | 'INTEGER_OVERFLOW' | 'JSON'
  | 'TRANSACTION' | 'UNSUPPORTED' | 'INVALID' | 'NOT_REPLICABLE' | 'COLUMN_KIND' | 'BUSY' | 'NOT_A_DATABASE'
  | 'CORRUPT' | 'UNSUPPORTED_VERSION' | 'QUOTA_EXCEEDED' | 'TOO_LARGE' | 'NEEDS_REOPEN'
  | 'INVALID_NAME' | 'NOT_FOUND' | 'OUT_OF_BOUNDS' | 'CLOSED' | 'IO' | 'INVALID_INPUT'
  | 'SYNC_REFUSED' | 'SYNC_HAS_HISTORY' | 'SYNC_BAD_KEY' | 'SYNC_NO_LINK' | 'SYNC_LAYOUT' | 'SYNC'
  | 'ERASE_PENDING' | 'MALFORMED' | 'SCHEMA_MISMATCH' | 'BAD_SIGNATURE' | 'REPLAY' | 'CHAIN_GAP'
  | 'FORK' | 'UNAUTHORIZED' | 'CLOCK_SKEW' | 'UNSOLICITED' | 'COMPACTED' | 'CONNECTION'
  | 'TOKEN_UNAVAILABLE' | 'RATE_LIMITED' | 'FINALIZED' | 'OWNER_GONE' | 'NOT_OWNER' | 'NO_SYNC'
  | 'NO_WEBSOCKET' | 'IMPORT_INCOMPLETE' | 'UNKNOWN_OP' | 'NOT_READY' | 'NOT_OPEN'
  | 'ALREADY_OPEN' | 'LOAD_FAILED' | 'REST_UNAVAILABLE' | 'MIGRATION' | 'INTERNAL' | 'WORKER_ERROR' | 'WORKER_MISMATCH'
  | 'TERMINATED' | 'UNSUPPORTED_BROWSER' | 'UNKNOWN_FIELD' | 'FIELD_TYPE' | 'NOT_COUNTER' | 'NOT_SET'
  | 'NO_TEXT_INDEX';

/** Every error cairn reports carries a stable `code` and a message a person can act on. */
export class CairnError extends Error {
  readonly name: 'CairnError';
  /** Stable, machine-readable: `SYNTAX`, `CONSTRAINT_UNIQUE`, `BUSY`, `QUOTA_EXCEEDED`, ... (docs/protocol.md). */
  readonly code: CairnErrorCode;
  /** For `SYNTAX`: where in the statement (1-based). */
  readonly line?: number;
  readonly column?: number;
  /** For `MIGRATION`: the version of the step that failed (its error is `cause`). */
  readonly version?: number;
  /** For the records API's errors (`UNKNOWN_FIELD`, `FIELD_TYPE`, `NOT_COUNTER`, `NOT_SET`, ...):
   * the field at fault. */
  readonly field?: string;
  constructor(code: CairnErrorCode, message: string, extra?: Record<string, unknown>);
}

/** A SQL value as it reaches the page: INTEGERs beyond ±2^53 are bigints, BLOBs Uint8Arrays. */
export type SqlValue = null | number | bigint | string | Uint8Array;
/** A value a statement may be given: booleans become 0 or 1, ArrayBuffers BLOBs. */
export type SqlParam = SqlValue | boolean | undefined | ArrayBuffer;
/** Positional (`?`, `?NNN`) or named (`{':id': 1}`, prefix included) parameters. */
export type Params = SqlParam[] | Record<string, SqlParam>;
export type Row = Record<string, SqlValue>;

export interface RunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

/** Rows as `rowMode: 'array'` gives them: `values` is flat and row-major. */
export interface ArrayRows {
  columns: string[];
  rowCount: number;
  values: SqlValue[];
  changes: number;
  lastInsertRowid: number | bigint;
}

/** Rows as `rowMode: 'columns'` gives them: one array (or typed array) per column. */
export interface ColumnRows {
  columns: string[];
  rowCount: number;
  values: Array<SqlValue[] | Float64Array | Int32Array>;
  changes: number;
  lastInsertRowid: number | bigint;
}

export interface WorkerOptions {
  /** Where the Worker script, cairn-worker.js, is served from (default: next to this module). */
  workerUrl?: string | URL;
  /** Where the wasm engine is served from (default: next to this module). */
  wasmUrl?: string | URL;
  /**
   * Where cairn-rest.wasm is served from (default: beside the engine). It holds the engine's less
   * used code (EXPLAIN, check(), export and import, ALTER TABLE, most error messages), and the
   * Worker fetches it in the background once the engine is loaded (see `preloadRest`).
   */
  restWasmUrl?: string | URL;
  /** Load cairn-sync.wasm (replication) instead of cairn.wasm. Needed to write to REPLICATED tables. */
  sync?: boolean;
  /** Where cairn-sync.wasm is served from (default: beside cairn.js). */
  syncWasmUrl?: string | URL;
  /** Where cairn-sync-worker.js, the Worker script that runs cairn-sync.wasm and carries the sync
   * transports, is served from (default: beside cairn.js). */
  syncWorkerUrl?: string | URL;
  /** Where cairn-sync-rest.wasm, the rest of cairn-sync.wasm, is served from (default: beside it). */
  syncRestWasmUrl?: string | URL;
  /** 'auto' (default) uses a SharedArrayBuffer channel when the page is cross-origin isolated. */
  channel?: 'auto' | 'postMessage';
  /** Size of the shared-memory channel in bytes (default 1 MiB). */
  channelBytes?: number;
}

export interface OpenOptions extends WorkerOptions {
  /** Create the database when it does not exist (default true for open and create). */
  create?: boolean;
  /** 'full' (default): a write has resolved only once it is on disk. 'relaxed': flushed later, in order. */
  durability?: 'full' | 'relaxed';
  /** Page cache size in 4 KiB pages (default 2048, 8 MiB). */
  cachePages?: number;
  /** How long a statement waits for another caller's transaction before failing with BUSY (ms, default 5000). */
  busyTimeout?: number;
  /**
   * When the Worker has cairn-rest.wasm (cairn-sync-rest.wasm), the engine's less used code.
   * 'background' (default): fetched and compiled as soon as the engine is loaded; a statement that
   * needs it before it has arrived waits for that fetch, and one that needs it when it could not
   * be had fails with REST_UNAVAILABLE, the database open and unchanged. 'wait': open() resolves
   * only once it is there, and fails with REST_UNAVAILABLE when it cannot be had, so that no
   * statement after open() ever waits on the network.
   */
  preloadRest?: 'background' | 'wait';
  /**
   * The schema's versions, run at open when the database is behind (its `PRAGMA user_version`):
   * each missing one in order, in a transaction of its own that also sets `user_version` to its
   * version. A SQL script at index i is version i + 1; `{ version, up }` gives the version (rising
   * integers) and `up` a SQL script or a function that runs statements on the transaction. One tab
   * runs them while other tabs opening the database wait. A step that fails is rolled back, the
   * database stays at the version before it, and open() rejects with `MIGRATION`.
   */
  migrations?: Migration[];
}

export type Migration = string | { version: number; up: string | ((tx: Transaction) => Promise<unknown>) };

/**
 * The row type a query is given (`query<Todo>(...)`) is taken on trust: cairn does not check the
 * rows against it. Without one, a row is a `Row`.
 */
interface Queries {
  /** Runs a parameter-free script of one or more statements. */
  exec(sql: string): Promise<void>;
  query<T = Row>(sql: string, params?: Params, options?: { rowMode?: 'object' }): Promise<T[]>;
  query(sql: string, params: Params | undefined, options: { rowMode: 'array' }): Promise<ArrayRows>;
  query(sql: string, params: Params | undefined, options: { rowMode: 'columns' }): Promise<ColumnRows>;
  run(sql: string, params?: Params): Promise<RunResult>;
  /** The first row, or undefined. */
  get<T = Row>(sql: string, params?: Params): Promise<T | undefined>;
  prepare<T = Row>(sql: string): Statement<T>;
}

export interface Transaction extends Queries {
  /** Runs `fn(tx)` in a savepoint of this transaction: released when it resolves; when it throws,
   * what it did is rolled back and the transaction goes on (the error is rethrown). Nests. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
}

export interface Statement<T = Row> {
  readonly sql: string;
  run(params?: Params): Promise<RunResult>;
  all(params?: Params, options?: { rowMode?: 'object' }): Promise<T[]>;
  all(params: Params | undefined, options: { rowMode: 'array' }): Promise<ArrayRows>;
  get(params?: Params): Promise<T | undefined>;
  finalize(): Promise<void>;
}

export interface SchemaEntry {
  type: 'table' | 'index';
  name: string;
  table: string;
  sql: string;
}

export interface SyncEvent {
  /** `applied`, `rejected`, `fork`, `peer_rejected`, `row_refused`, `error`. */
  kind: string;
  /** A stable code: the sync reason (`BAD_SIGNATURE`, `CHAIN_GAP`, `UNAUTHORIZED`, ...) or a SQL error code. */
  code: string;
  detail: string;
}

/** A relay URL's connection, in `SyncStatus.relays`. */
export interface RelayStatus {
  url: string;
  /** `connecting` (asking for a token, opening, authenticating), `connected` (syncing),
   * `waiting` (for the next attempt, or to be back online), `closed` (let go of; listed once). */
  state: 'connecting' | 'connected' | 'waiting' | 'closed';
  /** The last refusal or failure on this URL: a relay ERROR code, `CONNECTION` or
   * `TOKEN_UNAVAILABLE`; `retryAfterMs` when the relay asked for a wait. */
  lastError?: { code: string; message: string; retryAfterMs?: number };
  /** On the URL tried next: the time until that attempt (none while offline). */
  retryInMs?: number;
  /** The last time (`Date.now()`) this relay held everything this database had written. */
  lastSyncedAt?: number;
}

/** What `sync.status()` returns and `sync.on('status')` is called with (docs/sync.md 10b). */
export interface SyncStatus {
  relays: RelayStatus[];
  /** The peers linked now: ports given to `connect`, databases met on the channels, and relays
   * connected. */
  links: number;
  /** This database's records no relay is known to hold yet (0: synced). */
  pending: number;
  /** The last time (`Date.now()`) a relay held everything this database had written, or null. */
  lastSyncedAt: number | null;
}

export interface RelayOptions {
  /** Sent to the relay before each authentication: a string (suits tests), or a function called
   * for a fresh token before each connection attempt (suits apps: tokens expire). */
  token?: string | (() => string | Promise<string>);
}

/** A database's replica (docs/sync.md). */
export interface Sync {
  /** This database's author id: 64 hex digits. */
  id(): Promise<string>;
  /** The secret key pair, kept in the database's key file (never in `export()`): to move this
   * identity to another database. */
  exportKey(): Promise<Uint8Array>;
  /** Signs as the author of `bytes` (from `exportKey`); refused once this database wrote
   * changes under its own key. */
  importKey(bytes: Uint8Array | ArrayBuffer): Promise<void>;
  /** Writes go to the scopes this author owns (default: this database's own id; for a database
   * imported or copied from another, which signs with a key of its own, that database's author). */
  setOwner(ownerId: string): Promise<void>;
  /** As the owner of `scope`, lets these authors write to it. */
  authorize(scope: string, writerIds: Iterable<string>): Promise<void>;
  /** As the owner of `scope`, removes these authors from its writers: each keeps what this
   * database holds of its writes there; its later records are refused on every replica. */
  revoke(scope: string, writerIds: Iterable<string>): Promise<void>;
  digest(): Promise<string>;
  /** Records committed here and not yet signed; they are sealed before they leave on a link,
   * or once statements have been idle for a second. */
  pending(): Promise<number>;
  verify(): Promise<string[]>;
  events(): Promise<SyncEvent[]>;
  /** Runs the sync protocol over `port` inside the Worker (the owner tab only). */
  connect(port: MessagePort): Promise<{ link: number; close(): Promise<boolean> }>;
  /** Syncs with every database that joins the BroadcastChannel `name` (same origin). Any tab may
   * ask: it runs in the owner tab's Worker, once however many tabs ask, until the last of them
   * closes it or goes away; a tab that takes over, or whose engine restarts, joins again. */
  connectChannel(name: string): Promise<{ readonly link: number; close(): Promise<boolean> }>;
  /** Syncs through a relay over WebSocket, or one of several relays sharing one database (tried
   * in turn); after a cut, waits (backoff with jitter, the relay's `retry_after_ms`, not while
   * offline) and tries the next. Any tab may ask, shared and carried over a take-over or an
   * engine restart as `connectChannel` is. */
  connectRelay(urls: string | URL | Array<string | URL>, options?: RelayOptions): Promise<{ readonly link: number; close(): Promise<boolean> }>;
  /** The relays' connections and what is left to sync. */
  status(): Promise<SyncStatus>;
  /** Drops the history every known peer has acknowledged, up to the owner's attestations
   * (docs/sync.md sec. 8); resolves to the number of records dropped. */
  compact(): Promise<number>;
  /** Deletes the row of the replicated table `table` whose primary key is `key` (a value, or the
   * values of a key of several columns) and erases its values from the history held here; a
   * signed tombstone makes every replica do the same. Resolves to whether the row existed;
   * `ERASE_PENDING` when the purge committed but zeroing free pages failed. */
  purge(table: string, key: SqlValue | SqlValue[]): Promise<boolean>;
  /** Calls `fn` each time the status changes (in any tab): the Worker pushes each change as a
   * notice, nothing is polled from the page; returns the function that stops it. */
  on(type: 'status', fn: (status: SyncStatus) => void): () => void;
  /** Calls `fn` for each sync event (in any tab), as `events()` lists them: the Worker pushes
   * them as notices (within a quarter of a second of the step that made them); `events()`
   * still lists them (the last 1,000 not yet taken). Returns the function that stops it. */
  on(type: 'event', fn: (event: SyncEvent) => void): () => void;
}

/** What one commit (or a sync apply) changed, as `onChange` gets it. */
export interface Change {
  /** Per table, the rows inserted, updated and deleted. */
  tables: { table: string; inserted: number; updated: number; deleted: number }[];
  /** Commits counted (1, or more for a sync apply of several). */
  commits: number;
  /** Whether a table or an index was made, altered or dropped. */
  schema: boolean;
  /** This tab's commit, another tab's, or rows a peer sent. */
  origin: 'local' | 'tab' | 'sync';
}

export interface WatchOptions<M extends 'object' | 'array' | 'columns' = 'object'> {
  rowMode?: M;
  /** The query's errors (when it starts, or when it runs again after a commit). Without it they
   * are thrown as the page's uncaught errors. */
  onError?: (error: CairnError) => void;
}

/** Stops a live query or a change listener. */
export type Unsubscribe = () => void;

/** A condition on one field in a records query (docs/records.md). `$ne` is null-safe (a NULL
 * field differs from a value); `$text` is an fts5 query, searched in the field through an fts5
 * table whose `content=` is this table (`NO_TEXT_INDEX` when none indexes the field). */
export interface FieldCondition<V> {
  $eq?: V | null;
  $ne?: V | null;
  $gt?: V;
  $gte?: V;
  $lt?: V;
  $lte?: V;
  $in?: V[];
  $like?: string;
  $text?: string;
}

/** Fields and what each must be: a value (null: IS NULL) or conditions, all of them ANDed.
 * `S` names the fts5 tables over this table (`db.records<Todo, 'todo_fts'>('todo')`): such a
 * name takes `$text` alone, searched in all of that table's columns. */
export type Where<T, S extends string = never> = { [K in keyof T]?: T[K] | null | FieldCondition<T[K]> } & { [K in S]?: { $text: string } };

type FieldName<T> = keyof T & string;

/** What `select` and `watch` take. */
export interface RecordQuery<T, S extends string = never> {
  where?: Where<T, S>;
  /** A field, or a list of fields and `[field, 'asc' | 'desc']`. */
  orderBy?: FieldName<T> | Array<FieldName<T> | [FieldName<T>, 'asc' | 'desc']>;
  limit?: number;
  offset?: number;
}

/**
 * The records of one table keyed by one column (`db.records<Todo>('todo')`): each call is one
 * statement, so one round trip and at most one commit (docs/records.md has the SQL of each).
 * Records come back frozen: the page-side cache shares them. The record type is taken on trust.
 */
export interface Records<T extends object = Row, S extends string = never> {
  /** Inserts `record`; resolves to its key (a version 7 UUID for a text key given no value and
   * no default, a row id for an INTEGER key given none). */
  insert(record: Partial<T>): Promise<SqlValue>;
  /** The record, or undefined; from the page's cache when the page has read or written it and
   * no commit to the table has been heard of since. */
  get(id: SqlValue): Promise<Readonly<T> | undefined>;
  has(id: SqlValue): Promise<boolean>;
  /** Writes only the fields given; resolves to whether the record exists. */
  update(id: SqlValue, fields: Partial<T>): Promise<boolean>;
  /** The whole record: the fields given, every other column its default; inserted if missing. */
  set(id: SqlValue, record: Partial<T>): Promise<void>;
  /** Writes `next` only when the stored fields equal `expected` (`IS`: null equals null), in one
   * statement; resolves to whether it wrote. */
  swap(id: SqlValue, expected: Partial<T>, next: Partial<T>): Promise<boolean>;
  /** Adds `n` (default 1) to a counter column; resolves to its new value, undefined when there
   * is no such record. */
  inc(id: SqlValue, field: FieldName<T>, n?: number | bigint): Promise<number | bigint | undefined>;
  /** Adds `value` to a SET column; resolves to whether the record exists. */
  add(id: SqlValue, field: FieldName<T>, value: SqlValue): Promise<boolean>;
  /** Removes `value` from a SET column; resolves to whether the record exists. */
  remove(id: SqlValue, field: FieldName<T>, value: SqlValue): Promise<boolean>;
  /** Resolves to whether there was such a record. */
  delete(id: SqlValue): Promise<boolean>;
  select(query?: RecordQuery<T, S>): Promise<Readonly<T>[]>;
  count(where?: Where<T, S>): Promise<number>;
  /** A live `select` (on `db.watch`): `cb(records)` now, then after each commit that changes
   * them; returns the function that stops it. */
  watch(query: RecordQuery<T, S> | undefined, cb: (records: Readonly<T>[]) => void, options?: { onError?: (error: CairnError) => void }): Unsubscribe;
}

export interface Database extends Queries {
  /** The records of `table` (docs/records.md); its code is in cairn-extra.js, loaded on the first
   * call. */
  records<T extends object = Row, S extends string = never>(table: string): Records<T, S>;
  /** A live query: `cb` gets the result now, then after each commit (this tab's, another tab's,
   * a sync apply) that changed a table it reads, when the result differs from the last. */
  watch(sql: string, params: Params | undefined, cb: (rows: Row[]) => void, options?: WatchOptions<'object'>): Unsubscribe;
  watch(sql: string, params: Params | undefined, cb: (rows: ArrayRows) => void, options: WatchOptions<'array'>): Unsubscribe;
  watch(sql: string, params: Params | undefined, cb: (rows: ColumnRows) => void, options: WatchOptions<'columns'>): Unsubscribe;
  /** Calls `cb` after each commit with the tables it changed and where it came from. */
  onChange(cb: (change: Change) => void): Unsubscribe;
  readonly sync: Sync;
  readonly name: string;
  /** Whether this tab owns the database (its Worker holds the file) or goes through the tab that does. */
  readonly isOwner: boolean;
  /** How statements reach the engine. */
  readonly channel: 'sharedMemory' | 'postMessage' | 'owner tab';
  /** Commits when `fn` resolves, rolls back when it throws. Use `tx`, not the database, inside. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /** Every problem the integrity check finds (pages, checksums, rows, indexes); empty when sound. */
  check(): Promise<string[]>;
  schema(): Promise<SchemaEntry[]>;
  /** The engine's memory: the size of the wasm instance's linear memory in bytes. */
  memory(): Promise<{ wasmBytes: number }>;
  /** The database file as of the last commit; with `onProgress`, fetched in pieces and reported
   * after each. */
  export(options?: ExportOptions): Promise<Uint8Array>;
  close(): Promise<void>;
}

/** Bytes done and the total (null when a stream's length was not given). */
export interface Progress {
  done: number;
  total: number | null;
}

export interface ExportOptions {
  onProgress?: (progress: Progress) => void;
}

export interface ImportOptions extends WorkerOptions {
  /** Called after each piece the Worker received, in order; the last has `done === total`. */
  onProgress?: (progress: Progress) => void;
  /** Replace a database of that name (default: refuse with ALREADY_EXISTS). It stays as it was
   * when the import fails. */
  replace?: boolean;
  /** A stream's length in bytes: the progress's total, and a stream that ends short of it fails
   * with IMPORT_INCOMPLETE. */
  total?: number;
}

/** What `importDatabase` takes: the file's bytes, a Blob (a File: read as a stream of its size), or a stream of bytes. */
export type ImportSource = Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

/** Opens the database `name` in this origin's OPFS (created unless `create: false`); `':memory:'`
 * opens a database in memory, with no file, this tab's alone. */
export function open(name: string, options?: OpenOptions): Promise<Database>;
/** Creates (or opens) the database `name`. */
export function create(name: string, options?: OpenOptions): Promise<Database>;
/** Writes `source` as the database `name`, in pieces; refuses bytes that are not a sound cairn
 * database (before anything is written), and an existing name unless `replace`. */
export function importDatabase(name: string, source: ImportSource, options?: ImportOptions): Promise<void>;
export { importDatabase as import };
/** Deletes the database `name`; fails with BUSY while a tab has it open. */
export function destroy(name: string, options?: WorkerOptions): Promise<void>;

/** A running cairn Worker (low level: the storage layer's block files). */
export class EngineWorker {
  constructor(options?: WorkerOptions);
  readonly ready: Promise<void>;
  readonly channel: 'sharedMemory' | 'postMessage';
  call(op: string, args?: unknown[], transfer?: Transferable[]): Promise<unknown>;
  /** Kills the Worker at once; pending requests fail with code `TERMINATED`. */
  terminate(): void;
}

export function startWorker(options?: WorkerOptions): Promise<EngineWorker>;
