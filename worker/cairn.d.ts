/** Every error cairn reports carries a stable `code` and a message a person can act on. */
export class CairnError extends Error {
  readonly code: string;
  constructor(code: string, message: string, extra?: Record<string, unknown>);
}

export interface WorkerOptions {
  /** Where the Worker script is served from (default: next to this module). */
  workerUrl?: string | URL;
  /** Where the wasm engine is served from (default: next to this module). */
  wasmUrl?: string | URL;
}

/** A running cairn Worker. */
export class EngineWorker {
  constructor(options?: WorkerOptions);
  readonly ready: Promise<void>;
  call(op: string, args?: unknown[], transfer?: Transferable[]): Promise<unknown>;
  /** Kills the Worker at once; pending requests fail with code `TERMINATED`. */
  terminate(): void;
}

/** An OPFS file opened by the engine inside the Worker. */
export class EngineFile {
  readonly name: string;
  read(at: number, len: number): Promise<Uint8Array>;
  write(at: number, bytes: Uint8Array): Promise<void>;
  len(): Promise<number>;
  setLen(len: number): Promise<void>;
  flush(): Promise<void>;
  close(): Promise<void>;
}

export function startWorker(options?: WorkerOptions): Promise<EngineWorker>;
export function openFile(worker: EngineWorker, name: string, options?: { create?: boolean }): Promise<EngineFile>;
