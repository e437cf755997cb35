// cairn's dedicated Worker: owns the wasm engine and the OPFS handles it opens, and answers the
// page's requests one at a time, in the order they arrive.
import init, * as engine from '../build/wasm/cairn_wasm.js';
import { OK, ERR } from './protocol.js';

let ready = null;
let stopped = null; // set to the panic message once the engine has trapped

// Each op takes the request's arguments and returns [result, transferList?].
const ops = {
  ping: () => [null],
  fileOpen: (name, create) => engine.fileOpen(String(name), !!create).then((h) => [h]),
  fileRead: (h, at, len) => {
    const bytes = engine.fileRead(h, at, len);
    return [bytes, [bytes.buffer]];
  },
  fileWrite: (h, at, bytes) => [engine.fileWrite(h, at, new Uint8Array(bytes))],
  fileLen: (h) => [engine.fileLen(h)],
  fileSetLen: (h, len) => [engine.fileSetLen(h, len)],
  fileFlush: (h) => [engine.fileFlush(h)],
  fileClose: (h) => [engine.fileClose(h)],
  fileRemove: (name) => engine.fileRemove(String(name)).then(() => [null]),
  fileList: () => engine.fileList().then((names) => [names]),
  conformanceCases: () => [engine.conformanceCases()],
  conformanceRun: (testCase, file) => engine.conformanceRun(testCase, file).then((r) => [r ?? null]),
  debugPanic: (message) => [engine.debugPanic(String(message))],
};

function fail(id, code, message) {
  self.postMessage([id, ERR, code, message]);
}

async function handle(msg) {
  const [id, op, ...args] = msg;
  if (op === 'init') {
    ready ??= init({ module_or_path: args[0] ?? new URL('./cairn.wasm', import.meta.url) });
    try {
      await ready;
      self.postMessage([id, OK, null]);
    } catch (e) {
      ready = null;
      fail(id, 'LOAD_FAILED', `could not load the engine: ${e && e.message ? e.message : e}`);
    }
    return;
  }
  if (stopped !== null) {
    fail(id, 'INTERNAL', `the engine stopped after an internal error: ${stopped}`);
    return;
  }
  const fn = ops[op];
  if (!fn) {
    fail(id, 'UNKNOWN_OP', `unknown request ${JSON.stringify(op)}`);
    return;
  }
  if (!ready) {
    fail(id, 'NOT_READY', 'the engine is not loaded: send init first');
    return;
  }
  try {
    await ready;
    const [result, transfer] = await fn(...args);
    self.postMessage([id, OK, result], transfer ?? []);
  } catch (e) {
    if (e instanceof WebAssembly.RuntimeError) {
      // A trap leaves the module's memory in an unknown state: report it, then stop for good so
      // the OPFS handles are released and the page can start a new Worker.
      stopped = self.__cairnPanic ?? e.message;
      fail(id, 'INTERNAL', `internal error: ${stopped}`);
      self.close();
      return;
    }
    fail(id, (e && e.code) || 'INTERNAL', (e && e.message) || String(e));
  }
}

let queue = Promise.resolve();
self.onmessage = (event) => {
  queue = queue.then(() => handle(event.data));
};
