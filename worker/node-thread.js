// The browser globals the page side (worker/client.js) uses, for Node.js: esbuild injects these
// in place of the free names `Worker` and `navigator` when it bundles dist/node.js
// (scripts/build.mjs), so nothing global is touched in the host process.
import { Worker as Thread } from 'node:worker_threads';

/** No Web Locks: a database is held by the process that opened it (worker/node.js). */
export const navigator = {};

/**
 * A Web Worker's interface over a node:worker_threads thread that runs cairn-node-worker.js, or
 * for the sync Worker (the client names it 'cairn-sync-worker') cairn-node-sync-worker.js; the
 * URL the client gives is the browser's script and is not used. The thread keeps the process
 * alive only while a request waits for its reply: a database left open does not stop the process
 * from exiting.
 */
export class Worker {
  #thread;
  #waiting = 0;
  onmessage = null;
  onerror = null;
  onmessageerror = null;

  constructor(_url, options) {
    const sync = options?.name === 'cairn-sync-worker';
    const script = sync ? new URL('./cairn-node-sync-worker.js', import.meta.url) : new URL('./cairn-node-worker.js', import.meta.url);
    this.#thread = new Thread(script, {
      name: 'cairn',
      // The host's flags (--input-type, --eval) are not the thread's.
      execArgv: [],
    });
    this.#thread.unref();
    this.#thread.on('message', (data) => {
      // Every request gets one reply; notices (id 0) answer none.
      if (data[0] !== 0 && --this.#waiting === 0) this.#thread.unref();
      this.onmessage?.({ data });
    });
    this.#thread.on('messageerror', () => this.onmessageerror?.({}));
    const fail = (message) => this.onerror?.({ message, preventDefault() {} });
    this.#thread.on('error', (e) => fail(e?.message ?? String(e)));
    this.#thread.on('exit', (code) => fail(`the cairn thread exited (code ${code})`));
  }

  postMessage(message, transfer) {
    if (this.#waiting++ === 0) this.#thread.ref();
    this.#thread.postMessage(message, transfer);
  }

  terminate() {
    void this.#thread.terminate();
  }
}
