// The page side of cairn: starts the Worker and turns replies into promises.
import { OK } from './protocol.js';

/** Every error cairn reports: a stable `code`, and a message a person can act on. */
export class CairnError extends Error {
  constructor(code, message, extra) {
    super(message);
    this.name = 'CairnError';
    this.code = code;
    if (extra !== undefined) Object.assign(this, extra);
  }
}

const defaultWorkerUrl = () => new URL('./cairn-worker.js', import.meta.url);
const defaultWasmUrl = () => new URL('./cairn.wasm', import.meta.url);

/** A running Worker and the requests waiting for its replies. */
export class EngineWorker {
  #worker;
  #pending = new Map();
  #nextId = 1;
  #dead = null;

  constructor(options = {}) {
    this.#worker = new Worker(options.workerUrl ?? defaultWorkerUrl(), { type: 'module', name: 'cairn' });
    this.#worker.onmessage = (e) => this.#reply(e.data);
    this.#worker.onerror = (e) => {
      e.preventDefault();
      this.#die('WORKER_ERROR', `the cairn Worker failed: ${e.message || 'it could not start (check workerUrl)'}`);
    };
    this.#worker.onmessageerror = () => this.#die('WORKER_ERROR', 'a reply from the cairn Worker could not be read');
    this.ready = this.call('init', [String(options.wasmUrl ?? defaultWasmUrl())]);
  }

  #reply(msg) {
    const [id, status, a, b, extra] = msg;
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    if (status === OK) p.resolve(a);
    else {
      const err = new CairnError(a, b, extra);
      // The Worker stops itself after an internal error; no reply will come for anything else.
      if (a === 'INTERNAL') this.#die('INTERNAL', b);
      p.reject(err);
    }
  }

  #die(code, message) {
    if (this.#dead) return;
    this.#dead = new CairnError(code, message);
    for (const p of this.#pending.values()) p.reject(new CairnError(code, message));
    this.#pending.clear();
  }

  /** Sends one request; `transfer` lists buffers handed to the Worker (they become unusable here). */
  call(op, args = [], transfer = []) {
    if (this.#dead) return Promise.reject(new CairnError(this.#dead.code, this.#dead.message));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage([id, op, ...args], transfer);
    });
  }

  /** Kills the Worker at once, as a crash would: pending requests fail with `TERMINATED`. */
  terminate() {
    this.#worker.terminate();
    this.#die('TERMINATED', 'the cairn Worker was terminated');
  }
}

/** An OPFS file opened by the engine inside the Worker (the storage layer's block file). */
export class EngineFile {
  constructor(worker, handle, name) {
    this.worker = worker;
    this.handle = handle;
    this.name = name;
  }
  read(at, len) {
    return this.worker.call('fileRead', [this.handle, at, len]);
  }
  /** Writes `bytes` (a Uint8Array) at `at`. The bytes are copied so the caller keeps its array. */
  write(at, bytes) {
    const copy = bytes.slice();
    return this.worker.call('fileWrite', [this.handle, at, copy.buffer], [copy.buffer]);
  }
  len() {
    return this.worker.call('fileLen', [this.handle]);
  }
  setLen(len) {
    return this.worker.call('fileSetLen', [this.handle, len]);
  }
  flush() {
    return this.worker.call('fileFlush', [this.handle]);
  }
  close() {
    return this.worker.call('fileClose', [this.handle]);
  }
}

/** Starts a Worker and waits until its engine is loaded. */
export async function startWorker(options = {}) {
  const w = new EngineWorker(options);
  await w.ready;
  return w;
}

/** Opens an OPFS file through `worker` (default: create it when missing). */
export async function openFile(worker, name, { create = true } = {}) {
  const handle = await worker.call('fileOpen', [name, create]);
  return new EngineFile(worker, handle, name);
}
