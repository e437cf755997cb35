// The rest of the engine. cairn.wasm holds the code that opening a database and running the
// common statements use; the rest of it (EXPLAIN, integrity checks, export and import, ALTER
// TABLE, most error messages, the rarer functions) is in cairn-rest.wasm, fetched and
// instantiated the first time the engine calls into it (docs/size.md, "The split module").
//
// The engine asks for it from inside a statement, through the import `cairn.load`, and goes on
// once it returns, so the fetch is synchronous: a synchronous XMLHttpRequest, which a Worker may
// make. The build's glue passes `splitImports` as the import namespace `cairn`.

let primary = null; // the engine instance's exports
let source = null; // where the rest comes from: its URL, or a function that returns its bytes
let rest = null; // the rest's instance, once loaded
let loadedBy = null; // the stack that loaded it: which call of the engine needed it

/** Where the rest of the engine whose exports are `exports` comes from (a URL or a function). */
export function restFrom(exports, from) {
  primary = exports;
  source = from;
  rest = null;
  loadedBy = null;
}

/** Whether the rest of the engine has been loaded. */
export const restLoaded = () => rest !== null;

/** The stack of the call that loaded the rest (wasm function indices), or null. */
export const restLoadedBy = () => loadedBy;

function fetchSync(url) {
  const xhr = new XMLHttpRequest();
  xhr.open('GET', String(url), false);
  xhr.responseType = 'arraybuffer';
  xhr.send();
  if (xhr.status !== 200) throw new Error(`${url}: HTTP ${xhr.status}`);
  return xhr.response;
}

export const splitImports = {
  load() {
    if (rest) return;
    loadedBy = new Error('loaded by').stack;
    try {
      if (!primary) throw new Error('the engine asked for it before it was ready');
      const bytes = typeof source === 'function' ? source() : fetchSync(source);
      rest = new WebAssembly.Instance(new WebAssembly.Module(bytes), { p: primary });
      primary.loaded.value = 1;
    } catch (e) {
      // The engine is in the middle of a statement and cannot go on: it stops as it stops on a
      // panic, and the Worker reports INTERNAL and reopens the database at its last commit.
      globalThis.__cairnPanic = `could not load the rest of the engine (cairn-rest.wasm): ${e && e.message ? e.message : e}`;
      throw new WebAssembly.RuntimeError(globalThis.__cairnPanic);
    }
  },
};
