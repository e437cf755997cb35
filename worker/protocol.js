// What the page and cairn's Worker must agree on (docs/protocol.md), in one module that the build
// bundles into each side (cairn.js, cairn-worker.js, cairn-sync-worker.js): the messages and their
// status values, the modes of `execute`, the layout of the shared-memory channel, and the binary
// encoding of the values that cross that channel. The Worker hands a statement's parameters to the
// engine in the same encoding (`ParamReader` in crates/wasm/src/database.rs reads its tags).

// ---- Messages ----------------------------------------------------------------------------------
// A request is an array [id, op, session, ...args]; a reply is [id, OK, result] or
// [id, ERR, code, message, extra]. Buffers in either direction are transferred, not copied.
export const OK = 0;
export const ERR = 1;

// The Worker's first message, posted as soon as its script runs (before the engine loads):
// `[0, HELLO, PROTOCOL]`. The page takes no other message from a Worker before it, so a script
// that is not cairn's Worker, or one of another build's protocol (a stale cached copy), fails
// `open()` with a code instead of leaving it waiting. PROTOCOL changes with any message's shape.
export const HELLO = 'hello';
export const PROTOCOL = 1;

// Shared-memory channel replies: the request was not run (send it again by postMessage), or it ran
// and its reply comes by postMessage because it did not fit.
export const RESEND = 2;
export const REPLY_BY_POST = 3;

// What an `execute` returns: every row, the change count and last row id, or the first row only.
export const MODE_ROWS = 0;
export const MODE_RUN = 1;
export const MODE_FIRST = 2;

// How a result column crosses: a plain Array of values, or a typed array of numbers.
export const COL_ARRAY = 0;
export const COL_F64 = 1;
export const COL_I32 = 2;

// ---- The shared-memory channel -----------------------------------------------------------------
// Int32 slots at the start of the SharedArrayBuffer, then from HEADER the request, and the reply
// written over it.
export const REQ = 0; // bumped by the page once it has written a request
export const DONE = 1; // set by the Worker to the request's REQ once the reply is written
export const SERVED = 2; // how long the Worker took over the request, in microseconds
export const HEADER = 16;

/** The ops that may go through the channel: the ones a statement loop is made of. */
export const CHANNEL_OPS = /* @__PURE__ */ new Set(['ping', 'exec', 'execute', 'executePrepared', 'prepare', 'finalize', 'inTransaction']);

// ---- The channel's encoding --------------------------------------------------------------------
// A value is a tag byte and a payload, little-endian throughout. It covers exactly what requests
// and replies hold: null, booleans, numbers, bigints, strings, Uint8Arrays, Float64Arrays,
// Int32Arrays, arrays and plain objects.
export const T_NULL = 0;
export const T_TRUE = 1;
export const T_FALSE = 2;
export const T_I32 = 3;
export const T_F64 = 4;
export const T_STR = 5; // u32 length, UTF-8
export const T_BYTES = 6; // u32 length, bytes
export const T_BIGINT = 7;
export const T_ARRAY = 8; // u32 count, items
export const T_OBJECT = 9; // u32 count, then key (a string without tag) and value
export const T_F64S = 10; // u32 count, padding to the element size, elements
export const T_I32S = 11;
export const T_UNDEFINED = 12;
export const T_WIDE = 13; // a bigint outside 64 bits, in the parameters the Worker gives the engine

/** Thrown when a value does not fit in the buffer, or in the encoding (a bigint outside 64 bits);
 * the caller falls back to postMessage, which carries it whole. */
export class Full extends Error {}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class Writer {
  constructor(buffer, start) {
    this.u8 = new Uint8Array(buffer);
    this.dv = new DataView(buffer);
    this.pos = start;
  }
  need(n) {
    if (this.pos + n > this.u8.length) throw new Full();
  }
  u8v(v) {
    this.need(1);
    this.u8[this.pos++] = v;
  }
  u32(v) {
    this.need(4);
    this.dv.setUint32(this.pos, v, true);
    this.pos += 4;
  }
  align(n) {
    const pad = (n - (this.pos % n)) % n;
    this.need(pad);
    this.pos += pad;
  }
  str(s) {
    // Short ASCII strings (most column names and SQL) are copied byte by byte; others encoded.
    const n = s.length;
    if (n < 64) {
      let ascii = true;
      for (let i = 0; i < n; i++) if (s.charCodeAt(i) > 0x7f) { ascii = false; break; }
      if (ascii) {
        this.u32(n);
        this.need(n);
        for (let i = 0; i < n; i++) this.u8[this.pos + i] = s.charCodeAt(i);
        this.pos += n;
        return;
      }
    }
    const bytes = encoder.encode(s);
    this.u32(bytes.length);
    this.need(bytes.length);
    this.u8.set(bytes, this.pos);
    this.pos += bytes.length;
  }
  value(v) {
    switch (typeof v) {
      case 'number':
        if ((v | 0) === v && !Object.is(v, -0)) {
          this.u8v(T_I32);
          this.need(4);
          this.dv.setInt32(this.pos, v, true);
          this.pos += 4;
        } else {
          this.u8v(T_F64);
          this.need(8);
          this.dv.setFloat64(this.pos, v, true);
          this.pos += 8;
        }
        return;
      case 'string':
        this.u8v(T_STR);
        this.str(v);
        return;
      case 'boolean':
        this.u8v(v ? T_TRUE : T_FALSE);
        return;
      case 'bigint':
        if (BigInt.asIntN(64, v) !== v) {
          // The Worker's parameters for the engine mark it, for the engine's TYPE error.
          if (!this.wide) throw new Full();
          return this.u8v(T_WIDE);
        }
        this.u8v(T_BIGINT);
        this.need(8);
        this.dv.setBigInt64(this.pos, v, true);
        this.pos += 8;
        return;
      case 'undefined':
        this.u8v(T_UNDEFINED);
        return;
    }
    if (v === null) return this.u8v(T_NULL);
    if (v instanceof Uint8Array) {
      this.u8v(T_BYTES);
      this.u32(v.length);
      this.need(v.length);
      this.u8.set(v, this.pos);
      this.pos += v.length;
      return;
    }
    if (v instanceof Float64Array || v instanceof Int32Array) {
      const f = v instanceof Float64Array;
      this.u8v(f ? T_F64S : T_I32S);
      this.u32(v.length);
      this.align(f ? 8 : 4);
      this.need(v.byteLength);
      this.u8.set(new Uint8Array(v.buffer, v.byteOffset, v.byteLength), this.pos);
      this.pos += v.byteLength;
      return;
    }
    if (v instanceof ArrayBuffer) return this.value(new Uint8Array(v));
    if (Array.isArray(v)) {
      this.u8v(T_ARRAY);
      this.u32(v.length);
      for (const x of v) this.value(x);
      return;
    }
    if (typeof v === 'object') {
      const keys = Object.keys(v);
      this.u8v(T_OBJECT);
      this.u32(keys.length);
      for (const k of keys) {
        this.str(k);
        this.value(v[k]);
      }
      return;
    }
    throw new TypeError(`cannot send a ${typeof v}`);
  }
}

export class Reader {
  constructor(buffer, start) {
    this.u8 = new Uint8Array(buffer);
    this.dv = new DataView(buffer);
    this.pos = start;
  }
  u32() {
    const v = this.dv.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  str() {
    const n = this.u32();
    const at = this.pos;
    this.pos += n;
    if (n < 64) {
      let s = '';
      for (let i = 0; i < n; i++) {
        const c = this.u8[at + i];
        if (c > 0x7f) return decoder.decode(this.u8.slice(at, at + n));
        s += String.fromCharCode(c);
      }
      return s;
    }
    // TextDecoder refuses views of shared memory: decode a copy.
    return decoder.decode(this.u8.slice(at, at + n));
  }
  value() {
    const tag = this.u8[this.pos++];
    switch (tag) {
      case T_NULL: return null;
      case T_TRUE: return true;
      case T_FALSE: return false;
      case T_UNDEFINED: return undefined;
      case T_I32: {
        const v = this.dv.getInt32(this.pos, true);
        this.pos += 4;
        return v;
      }
      case T_F64: {
        const v = this.dv.getFloat64(this.pos, true);
        this.pos += 8;
        return v;
      }
      case T_BIGINT: {
        const v = this.dv.getBigInt64(this.pos, true);
        this.pos += 8;
        return v;
      }
      case T_STR: return this.str();
      case T_BYTES: {
        const n = this.u32();
        const v = this.u8.slice(this.pos, this.pos + n);
        this.pos += n;
        return v;
      }
      case T_F64S:
      case T_I32S: {
        const n = this.u32();
        const size = tag === T_F64S ? 8 : 4;
        this.pos += (size - (this.pos % size)) % size;
        const bytes = this.u8.slice(this.pos, this.pos + n * size);
        this.pos += n * size;
        return tag === T_F64S ? new Float64Array(bytes.buffer) : new Int32Array(bytes.buffer);
      }
      case T_ARRAY: {
        const n = this.u32();
        const out = new Array(n);
        for (let i = 0; i < n; i++) out[i] = this.value();
        return out;
      }
      case T_OBJECT: {
        const n = this.u32();
        const out = {};
        for (let i = 0; i < n; i++) {
          const k = this.str();
          out[k] = this.value();
        }
        return out;
      }
      default:
        throw new Error(`bad tag ${tag} at ${this.pos - 1} in a shared-memory message`);
    }
  }
}

/** Moves `r` past one value without building it. The Worker hands a statement's parameters from
 * the channel to the engine as they are: the bytes this passes over. */
export function skip(r) {
  const tag = r.u8[r.pos++];
  if (tag === T_I32) r.pos += 4;
  else if (tag === T_F64 || tag === T_BIGINT) r.pos += 8;
  else if (tag === T_STR || tag === T_BYTES) skipBytes(r);
  else if (tag === T_ARRAY || tag === T_OBJECT) {
    for (let n = r.u32(); n > 0; n--) {
      if (tag === T_OBJECT) skipBytes(r); // the key
      skip(r);
    }
  } else if (tag === T_F64S || tag === T_I32S) {
    const n = r.u32();
    const size = tag === T_F64S ? 8 : 4;
    r.pos += ((size - (r.pos % size)) % size) + n * size;
  } else if (tag > T_WIDE) throw new Error(`bad tag ${tag} at ${r.pos - 1} in a shared-memory message`);
}

function skipBytes(r) {
  const n = r.u32();
  r.pos += n;
}

// In the Worker, a statement's parameters that came by postMessage cross into wasm as one buffer
// in this encoding, which the engine reads (`ParamReader`, docs/protocol.md): not a call across the
// boundary for each value and each test of its type. A bigint outside 64 bits is marked for the
// engine's error.
const NO_PARAMS = /* @__PURE__ */ new Uint8Array(0);
let params = null; // one Writer, reused: a statement's parameters are read before the next's
export function paramBytes(p) {
  if (p === null || p === undefined) return NO_PARAMS;
  for (;;) {
    params ??= Object.assign(new Writer(new ArrayBuffer(4096), 0), { wide: true });
    params.pos = 0;
    try {
      params.value(p);
      return params.u8.subarray(0, params.pos);
    } catch (e) {
      if (!(e instanceof Full)) throw e;
      params = Object.assign(new Writer(new ArrayBuffer(params.u8.length * 2), 0), { wide: true });
    }
  }
}

/** Whether two results (docs/protocol.md, "Results") hold the same columns and values: a live
 * query's new result that is the same as the last one sent is not sent again. */
export function sameResult(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null ||
      a.constructor !== b.constructor || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (!sameResult(a[i], b[i])) return false;
  return true;
}
