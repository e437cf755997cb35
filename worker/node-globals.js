// What the Worker's scripts expect of a browser Worker, in a node:worker_threads thread: `self`
// with postMessage, onmessage and close, `fetch` of the engine's file: URLs, the synchronous
// XMLHttpRequest that loads the rest of the engine (worker/split.js), and in the sync build a
// `WebSocket` for the relay transport. Evaluated before the Worker's own modules
// (worker/node-worker.js imports it first).
import { parentPort } from 'node:worker_threads';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

/** Closed when the thread stops itself (after an engine trap), as a browser closes a Worker's
 * OPFS handles: the next thread can open the file. */
export const openFiles = new Set();

globalThis.self = globalThis;
// Where the Worker's script is: the engine's files are found beside it (worker/engine.js).
self.location = { href: import.meta.url };
self.postMessage = (message, transfer) => parentPort.postMessage(message, transfer);
parentPort.on('message', (data) => self.onmessage?.({ data }));
self.close = () => {
  for (const f of openFiles) f.close();
  process.exit(0);
};

const readUrl = (url) => {
  const u = new URL(String(url));
  if (u.protocol !== 'file:') throw new TypeError(`${u}: in Node.js cairn loads its files from disk (file: URLs)`);
  return readFileSync(fileURLToPath(u));
};

const nativeFetch = globalThis.fetch;
globalThis.fetch = async (url, init) => {
  if (new URL(String(url)).protocol !== 'file:') return nativeFetch(url, init);
  try {
    return new Response(readUrl(url), { headers: { 'Content-Type': 'application/wasm' } });
  } catch (e) {
    return new Response(null, { status: e.code === 'ENOENT' ? 404 : 500, statusText: e.message });
  }
};

globalThis.XMLHttpRequest = class {
  status = 0;
  response = null;
  open(_method, url) {
    this.url = url;
  }
  send() {
    try {
      const b = readUrl(this.url);
      this.response = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
      this.status = 200;
    } catch (e) {
      this.status = e.code === 'ENOENT' ? 404 : 500;
    }
  }
};

/* global CAIRN_SYNC */
// Node.js 22 has a global WebSocket; on Node.js 20 the relay transport takes the `ws` package's
// (an optional dependency of cairn-db), whose client has the browser's interface. Without either,
// connecting to a relay fails with NO_WEBSOCKET; every other sync call works.
// Loaded synchronously: a top-level await here would let the page's first requests arrive
// before worker.js listens for them.
if (CAIRN_SYNC && typeof globalThis.WebSocket !== 'function') {
  try {
    const { WebSocket: Ws } = createRequire(import.meta.url)('ws');
    // A browser's WebSocket fires `error` at no one harmlessly (its `close` follows, which the
    // relay transport handles); ws's is an EventEmitter's, which throws without a listener.
    globalThis.WebSocket = class extends Ws {
      constructor(...args) {
        super(...args);
        this.on('error', () => {});
      }
    };
  } catch {
    globalThis.WebSocket = class {
      constructor() {
        throw Object.assign(new Error(`Node.js ${process.version} has no WebSocket: install the ws package (npm install ws) or use Node.js 22`), { code: 'NO_WEBSOCKET' });
      }
    };
  }
}
