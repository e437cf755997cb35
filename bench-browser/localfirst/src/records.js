// The to-do records every library keeps: a title, a done flag, a priority, an owner and a counter.
// Ids and fields come from a seeded generator, so every library stores the same records.
export function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

const OWNERS = ['ada', 'grace', 'alan', 'barbara', 'edsger', 'donald', 'frances', 'john'];
const WORDS = ['buy', 'milk', 'call', 'fix', 'write', 'review', 'plan', 'ship', 'test', 'read', 'the', 'report', 'bike', 'garden', 'tax', 'draft'];

export const idOf = (i) => `todo-${String(i).padStart(7, '0')}`;

export function record(i) {
  const r = rng(i * 2654435761 + 1);
  const words = 3 + Math.floor(r() * 4);
  let title = '';
  for (let w = 0; w < words; w++) title += (w ? ' ' : '') + WORDS[Math.floor(r() * WORDS.length)];
  return { id: idOf(i), title, done: r() < 0.5, priority: 1 + Math.floor(r() * 5), owner: OWNERS[Math.floor(r() * OWNERS.length)], count: 0 };
}

export const records = (from, n) => Array.from({ length: n }, (_, k) => record(from + k));

/** The fields a record reads back with, in a fixed order, for comparisons. */
export const same = (a, b) => !!a && !!b && a.id === b.id && a.title === b.title && !!a.done === !!b.done
  && Number(a.priority) === Number(b.priority) && a.owner === b.owner && Number(a.count) === Number(b.count);

/** Resolves once the write transactions queued on these IndexedDB stores before it have completed:
 * transactions on overlapping stores run in the order they were created. */
export function idbBarrier(db, stores) {
  return new Promise((resolve, reject) => {
    const t = db.transaction(stores, 'readonly');
    t.oncomplete = () => resolve();
    t.onerror = () => reject(t.error);
    t.onabort = () => reject(t.error || new Error('aborted'));
  });
}

/** A tiny promise API over one IndexedDB object store with auto-increment keys (an append log). */
export async function idbLog(name) {
  const db = await new Promise((resolve, reject) => {
    const req = indexedDB.open(name, 1);
    req.onupgradeneeded = () => req.result.createObjectStore('log', { autoIncrement: true });
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
  const tx = (mode, f) => new Promise((resolve, reject) => {
    const t = db.transaction(['log'], mode);
    const out = f(t.objectStore('log'));
    t.oncomplete = () => resolve(out && 'result' in out ? out.result : undefined);
    t.onerror = () => reject(t.error);
  });
  return {
    append: (bytes) => tx('readwrite', (s) => { s.add(bytes); }),
    all: () => tx('readonly', (s) => s.getAll()),
    close: () => db.close(),
  };
}

export async function until(what, f, ms = 30000) {
  const t0 = performance.now();
  for (;;) {
    if (await f()) return;
    if (performance.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 0));
  }
}
