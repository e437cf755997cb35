// A database with no file: `open(':memory:')`. The engine takes any object with the methods of a
// `FileSystemSyncAccessHandle` that it calls (`read`, `write`, `getSize`, `truncate`, `flush`,
// `close`; crates/store/src/opfs.rs), so a memory one is a growable buffer with those methods.
// It lives as long as the Worker that opened it; nothing is written anywhere.

/** The name that opens a database in memory, in the browser and in Node.js. */
export const MEMORY = ':memory:';

/** A block file in memory, as a sync access handle. */
export function memoryHandle() {
  let bytes = new Uint8Array(0);
  let len = 0;
  const room = (n) => {
    if (n <= bytes.length) return;
    const grown = new Uint8Array(Math.max(n, bytes.length * 2, 64 * 1024));
    grown.set(bytes.subarray(0, len));
    bytes = grown;
  };
  return {
    getSize: () => len,
    read(buf, { at = 0 } = {}) {
      const n = Math.max(0, Math.min(buf.length, len - at));
      buf.set(bytes.subarray(at, at + n));
      return n;
    },
    write(buf, { at = 0 } = {}) {
      room(at + buf.length);
      bytes.set(buf, at);
      len = Math.max(len, at + buf.length);
      return buf.length;
    },
    // As a file's: growing adds zeros, shrinking forgets the tail.
    truncate(n) {
      room(n);
      if (n < len) bytes.fill(0, n, len);
      len = n;
    },
    flush() {},
    close() {},
  };
}
