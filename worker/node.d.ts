// cairn in Node.js: the browser's API (./cairn.d.ts), over files.
import type { Database, OpenOptions, ImportOptions, ImportSource, WorkerOptions } from './cairn.js';
export type { Database, OpenOptions, ImportOptions, ImportSource, Progress, ExportOptions, Statement, Transaction, Row, SqlValue, Params, RunResult } from './cairn.js';
export { CairnError } from './cairn.js';

/** The browser's options; `{ sync: true }` syncs as there (a relay needs Node.js 22's WebSocket or
 * the `ws` package). The engine's files are the package's own: the URL options are ignored. */
export type NodeOpenOptions = OpenOptions;

/** Opens the database in the file `path` (relative to the working directory), or in memory
 * with `':memory:'`; the file is created unless `create: false`. */
export function open(path: string, options?: NodeOpenOptions): Promise<Database>;
/** Creates (or opens) the database in the file `path`. */
export function create(path: string, options?: NodeOpenOptions): Promise<Database>;
/** Writes `source` (bytes, a web ReadableStream or a Node.js stream) as the database file `path`;
 * the old file stays whole until the new one is checked and in place. */
export function importDatabase(path: string, source: ImportSource, options?: ImportOptions): Promise<void>;
export { importDatabase as import };
/** Deletes the database file `path`; BUSY while this process has it open. */
export function destroy(path: string, options?: WorkerOptions): Promise<void>;
