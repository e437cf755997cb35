// The test build's page module (dist/test/cairn.js): the shipped one and the storage layer's
// block files, for the storage tests. The Worker has those ops only in the test build.
export * from './client.js';

/** An OPFS file opened by the engine inside the Worker. */
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

/** Opens an OPFS file through `worker` (default: create it when missing). */
export async function openFile(worker, name, { create = true } = {}) {
  const handle = await worker.call('fileOpen', [name, create]);
  return new EngineFile(worker, handle, name);
}
