// The rest of the engine. cairn.wasm holds the code that opening a database and running the
// common statements use; the rest of it (EXPLAIN, integrity checks, export and import, ALTER
// TABLE, most error messages, the rarer functions) is in cairn-rest.wasm (docs/size.md, "The
// split module").
//
// The Worker fetches, compiles and instantiates the rest in the background once the engine is
// loaded (`fetchRest`), so that no statement waits on the network. The engine asks for it from
// inside a statement, through the import `cairn.load`, and goes on once it returns: by then the
// rest is an instance, and `load` only marks it in use. When it is not there yet (still on its
// way, or it could not be had), `load` traps, and the Worker, which saved the engine's state
// before the statement (engine.js, `saveState`), puts it back: the statement fails or waits for
// the fetch under way, and the database stays as it was. The build's glue passes `splitImports`
// as the import namespace `cairn`.

let primary = null; // the engine instance's exports
let source = null; // where the rest comes from: its URL, or a function that returns its bytes
let rest = null; // the rest's instance, once fetched
let fetching = null; // the fetch under way, if any
let failed = null; // why the last fetch failed, until one succeeds
let missing = false; // the engine asked for the rest when it was not there
let loadedBy = null; // the stack that first called for it: which call of the engine needed it

/** Where the rest of the engine whose exports are `exports` comes from (a URL or a function). */
export function restFrom(exports, from) {
  primary = exports;
  source = from;
  rest = null;
  fetching = null;
  failed = null;
  missing = false;
  loadedBy = null;
}

/** Whether the engine has called for the rest of itself (it runs in it from then on). */
export const restLoaded = () => primary !== null && primary.loaded.value === 1;

/** Whether the rest is there for the engine to call (fetched, compiled and instantiated). */
export const restReady = () => rest !== null;

/** Why the last fetch of the rest failed, or null. */
export const restFailure = () => failed;

/** Whether a fetch of the rest is under way. */
export const restFetching = () => fetching !== null;

/** The stack of the call that first needed the rest (wasm function indices), or null. */
export const restLoadedBy = () => loadedBy;

/** Whether the last trap was the engine calling for a rest that was not there (and forgets it). */
export function takeMissing() {
  const m = missing;
  missing = false;
  return m;
}

/** The engine's module, compiled as it downloads when the server says it is wasm (the glue's own
 * loader does the same, with more code for cases a Worker does not meet). */
export async function compile(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`HTTP ${r.status}`);
  if (r.headers.get('Content-Type')?.startsWith('application/wasm')) return WebAssembly.compileStreaming(r);
  return WebAssembly.compile(await r.arrayBuffer());
}

/** Fetches, compiles and instantiates the rest unless it is there or on its way; resolves once
 * that attempt has ended, to null or to why it failed (a later call tries again). */
export function fetchRest() {
  if (rest !== null) return Promise.resolve(null);
  if (!primary) return Promise.resolve('the engine is not loaded');
  fetching ??= (async () => {
    try {
      const module = typeof source === 'function' ? new WebAssembly.Module(source()) : await compile(source);
      // Instantiating writes the rest's constants into the engine's memory and its functions into
      // the engine's table: both are places only the rest uses, so it may happen between any two
      // calls of the engine.
      rest = await WebAssembly.instantiate(module, { p: primary });
      failed = null;
    } catch (e) {
      failed = `${source}: ${e && e.message ? e.message : e}`;
    } finally {
      fetching = null;
    }
    return failed;
  })();
  return fetching;
}

export const splitImports = {
  load() {
    if (primary?.loaded.value === 1) return;
    if (!primary) throw new WebAssembly.RuntimeError('the engine asked for the rest of itself before it was ready');
    // Node runs the split's check over bytes at hand (scripts/split.mjs): read them now.
    if (rest === null && typeof source === 'function') rest = new WebAssembly.Instance(new WebAssembly.Module(source()), { p: primary });
    if (rest === null) {
      missing = true;
      throw new WebAssembly.RuntimeError(`the rest of the engine (${source}) is not loaded`);
    }
    loadedBy = new Error('loaded by').stack;
    primary.loaded.value = 1;
  },
};
