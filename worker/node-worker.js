// cairn's Worker in Node.js (cairn-node-worker.js): the browser's Worker scripts in a
// node:worker_threads thread, with databases in node:fs files instead of OPFS. A database's name
// is the file's absolute path (worker/node.js resolves it). The engine reads and writes the file
// through an object with a sync access handle's methods over a file descriptor, and flushes it
// with fdatasync where it flushes an OPFS file: a commit is durable when it resolves.
//
// In the sync build (cairn-node-sync-worker.js) a replicated database's secret key is kept in
// `<file>-key` beside it, never in the database's file, as the browser keeps it in
// `cairn-keys/<name>` (docs/sync.md 10b): created empty, held while the database is open, removed
// with the database and by an import over it.
//
// As an OPFS sync access handle is exclusive, a database file is held by one process at a time:
// `<file>.lock` holds the process id of its holder, and another process's open, import over it or
// destroy is BUSY while that process lives (a lock left by a process that died is taken over).
import { openFiles } from './node-globals.js';
import { storage, err } from './engine.js';
import './worker.js';
import { closeSync, constants, fdatasyncSync, fstatSync, ftruncateSync, fsyncSync, openSync, readFileSync, readSync, renameSync, statSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

// The platform's error as the engine maps a browser's (crates/store/src/opfs.rs, by `name`).
const NAMES = { ENOSPC: 'QuotaExceededError', EDQUOT: 'QuotaExceededError', EBADF: 'InvalidStateError' };
function fsCall(path, f) {
  try {
    return f();
  } catch (e) {
    throw Object.assign(new Error(`${e.message} (${path})`), { name: NAMES[e.code] ?? 'Error' });
  }
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
};

const unlinkQuietly = (file) => {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
};

/** Takes the lock of the database file `path` for this process, or fails with BUSY. A lock of
 * this process is its own to take again: within the process, worker/node.js lets one open
 * database hold a file. */
function lock(path) {
  const file = `${path}.lock`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      return () => unlinkQuietly(file);
    } catch (e) {
      if (e.code === 'ENOENT') throw err('NOT_FOUND', `${path}: no such directory`);
      if (e.code !== 'EEXIST') throw err('IO', `${file}: ${e.message}`);
    }
    let pid;
    try {
      pid = Number(readFileSync(file, 'utf8'));
    } catch {
      continue; // let go meanwhile
    }
    if (pid !== process.pid && pid > 0 && alive(pid)) {
      throw err('BUSY', `${path} is open in process ${pid} (its lock: ${file}); close it there first`);
    }
    unlinkQuietly(file);
  }
  throw err('BUSY', `${path}: its lock ${file} keeps changing hands`);
}

/** An open file as the engine's block file: the methods of a sync access handle it calls. */
function fileHandle(path, fd, unlock) {
  const h = {
    getSize: () => fsCall(path, () => fstatSync(fd).size),
    read: (buf, { at = 0 } = {}) => fsCall(path, () => {
      let n = 0;
      while (n < buf.length) {
        const got = readSync(fd, buf, n, buf.length - n, at + n);
        if (got === 0) break;
        n += got;
      }
      return n;
    }),
    write: (buf, { at = 0 } = {}) => fsCall(path, () => {
      let n = 0;
      while (n < buf.length) n += writeSync(fd, buf, n, buf.length - n, at + n);
      return n;
    }),
    truncate: (len) => fsCall(path, () => ftruncateSync(fd, len)),
    flush: () => fsCall(path, () => fdatasyncSync(fd)),
    close() {
      if (!openFiles.delete(h)) return;
      closeSync(fd);
      unlock();
    },
  };
  openFiles.add(h);
  return h;
}

/** Makes a file's creation or rename durable: its directory's entry is flushed too. */
function syncDir(path) {
  let fd;
  try {
    fd = openSync(dirname(path), 'r');
    fsyncSync(fd);
  } catch {
    // Not every platform lets a directory be opened or flushed; the file's own flush stands.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function openFile(path, create, unlock = () => {}) {
  let fd;
  try {
    fd = openSync(path, constants.O_RDWR | (create ? constants.O_CREAT : 0), 0o644);
  } catch (e) {
    unlock();
    if (e.code === 'ENOENT') throw err('NOT_FOUND', `${path}: no such database${create ? ' (nor its directory)' : ''}`);
    if (e.code === 'EISDIR') throw err('INVALID_NAME', `${path} is a directory`);
    throw err('IO', `${path}: ${e.message}`);
  }
  if (create) syncDir(path);
  return fileHandle(path, fd, unlock);
}

/** Runs `f` holding the lock of `path`. */
async function locked(path, f) {
  const unlock = lock(path);
  try {
    return await f();
  } finally {
    unlock();
  }
}

/* global CAIRN_SYNC */
const keyOf = (path) => `${path}-key`;

Object.assign(storage, {
  async open(path, create) {
    const handle = openFile(path, create, lock(path));
    if (!CAIRN_SYNC) return { handle };
    try {
      return { handle, keyHandle: openFile(keyOf(path), true) };
    } catch (e) {
      handle.close();
      throw e;
    }
  },
  async exists(path) {
    try {
      return statSync(path).isFile();
    } catch {
      return false;
    }
  },
  // Written beside the file under a temporary name, flushed, then renamed over it: the file
  // under `path` is the old one or the whole new one, also after a crash.
  write: (path, data) => locked(path, () => {
    const tmp = join(dirname(path), `.${basename(path)}.import-${process.pid}`);
    const h = openFile(tmp, true);
    try {
      h.truncate(0);
      h.write(data, { at: 0 });
      h.flush();
      h.close();
      fsCall(path, () => renameSync(tmp, path));
      // An imported database signs with a key of its own until `importKey`.
      unlinkQuietly(keyOf(path));
      syncDir(path);
    } catch (e) {
      h.close();
      unlinkQuietly(tmp);
      throw e.code ? e : err(e.name === 'QuotaExceededError' ? 'QUOTA_EXCEEDED' : 'IO', e.message);
    }
  }),
  remove: (path) => locked(path, () => {
    try {
      unlinkSync(path);
    } catch (e) {
      if (e.code === 'ENOENT') throw err('NOT_FOUND', `${path}: no such database`);
      throw err('IO', `${path}: ${e.message}`);
    }
    unlinkQuietly(keyOf(path));
  }),
});
