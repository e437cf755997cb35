// A statement's result as the engine encodes it in wasm memory (`Encoder` in
// crates/wasm/src/database.rs), made into the result the page gets (docs/protocol.md, "Results"):
// one flat array, so that cloning it to the page is one array of numbers and strings
// (`readResult`, for postMessage); or that array's encoding on the shared-memory channel, written
// from the engine's bytes without building it (`writeResult`).
import {
  MODE_RUN, COL_ARRAY, COL_F64, COL_I32,
  T_NULL as W_NULL, T_F64 as W_F64, T_BIGINT as W_BIGINT, T_STR as W_STR, T_BYTES as W_BYTES,
  T_ARRAY as W_ARRAY, T_F64S as W_F64S, T_I32S as W_I32S,
} from './protocol.js'; // W_: the channel's tags; T_ below: the engine's

const T_NULL = 0;
const T_NUMBER = 1;
const T_BIGINT = 2;
const T_TEXT = 3;

const utf8 = new TextDecoder();
let buffer = null;
let view = null;
let bytes = null;
let at = 0;

function u32() {
  const n = view.getUint32(at, true);
  at += 4;
  return n;
}

function f64() {
  const x = view.getFloat64(at, true);
  at += 8;
  return x;
}

// Short ASCII text (column names, most values) is built directly: TextDecoder costs more than
// the loop below for a few characters.
function text(n) {
  const end = at + n;
  if (n <= 16) {
    let s = '';
    let i = at;
    for (; i < end; i++) {
      const b = bytes[i];
      if (b > 0x7f) break;
      s += String.fromCharCode(b);
    }
    if (i === end) {
      at = end;
      return s;
    }
  }
  const s = utf8.decode(bytes.subarray(at, end));
  at = end;
  return s;
}

function value() {
  const tag = bytes[at++];
  if (tag === T_NULL) return null;
  if (tag === T_NUMBER) return f64();
  if (tag === T_BIGINT) {
    const v = view.getBigInt64(at, true);
    at += 8;
    return v;
  }
  const n = u32();
  if (tag === T_TEXT) return text(n);
  at += n;
  return bytes.slice(at - n, at); // a blob: a copy, owned by the page
}

function start(memory, ptr) {
  if (memory.buffer !== buffer) {
    buffer = memory.buffer; // memory grew: views of the old buffer are detached
    view = new DataView(buffer);
    bytes = new Uint8Array(buffer);
  }
  at = ptr;
}

/** The result at `ptr` in `memory` (a WebAssembly.Memory), for an `execute` of `mode`. */
export function readResult(memory, ptr, mode) {
  start(memory, ptr);
  if (mode === MODE_RUN) {
    const changes = f64();
    return [changes, value()];
  }
  const rowCount = u32();
  const changes = f64();
  const lastInsertRowid = value();
  const n = u32();
  const out = [rowCount, changes, lastInsertRowid, n];
  for (let c = 0; c < n; c++) out.push(text(u32()));
  if (bytes[at++] === 0) {
    out.push(null);
    for (let i = rowCount * n; i > 0; i--) out.push(value());
    return out;
  }
  const kinds = new Uint8Array(n);
  out.push(kinds);
  for (let c = 0; c < n; c++) {
    const kind = (kinds[c] = bytes[at++]);
    if (kind === COL_I32 || kind === COL_F64) {
      const size = kind === COL_I32 ? 4 : 8;
      const copy = buffer.slice(at, at + rowCount * size);
      at += rowCount * size;
      out.push(kind === COL_I32 ? new Int32Array(copy) : new Float64Array(copy));
    } else {
      const col = new Array(rowCount);
      for (let r = 0; r < rowCount; r++) col[r] = value();
      out.push(col);
    }
  }
  return out;
}

// The channel's tag for each of the engine's value tags. The payloads match: a number is an f64
// and a bigint an i64 in both; text and blob are a u32 length and the bytes, as the channel's
// string and bytes are.
const CHANNEL_TAG = [W_NULL, W_F64, W_BIGINT, W_STR, W_BYTES];

/** Copies the next `n` bytes to `w`. */
function copy(w, n) {
  w.need(n);
  if (n < 32) for (let i = 0; i < n; i++) w.u8[w.pos + i] = bytes[at + i];
  else w.u8.set(bytes.subarray(at, at + n), w.pos);
  w.pos += n;
  at += n;
}

function copyValue(w) {
  const tag = bytes[at++];
  w.u8v(CHANNEL_TAG[tag]);
  copy(w, tag === T_NULL ? 0 : tag < T_TEXT ? 8 : 4 + view.getUint32(at, true));
}

/** Writes what `readResult` would return to `w` (a protocol.js Writer over the shared-memory
 * channel), as the Writer would encode it, without building it; the page reads it with Reader.
 * Throws `Full` when it does not fit. */
export function writeResult(memory, ptr, mode, w) {
  start(memory, ptr);
  w.u8v(W_ARRAY);
  if (mode === MODE_RUN) {
    w.u32(2);
    w.u8v(W_F64);
    copy(w, 8);
    return copyValue(w);
  }
  // The array's length, once the layout says how many values follow.
  const length = w.pos;
  w.u32(0);
  const rowCount = u32();
  w.value(rowCount);
  w.u8v(W_F64);
  copy(w, 8);
  copyValue(w);
  const n = u32();
  w.value(n);
  for (let c = 0; c < n; c++) {
    w.u8v(W_STR);
    copy(w, 4 + view.getUint32(at, true));
  }
  let values = n;
  if (bytes[at++] === 0) {
    w.u8v(W_NULL);
    values = rowCount * n;
    for (let i = values; i > 0; i--) copyValue(w);
  } else {
    // The kinds, one byte a column, come first on the channel and before each column here.
    w.u8v(W_BYTES);
    w.u32(n);
    w.need(n);
    const kinds = w.pos;
    w.pos += n;
    for (let c = 0; c < n; c++) {
      const kind = (w.u8[kinds + c] = bytes[at++]);
      w.u8v(kind === COL_ARRAY ? W_ARRAY : kind === COL_F64 ? W_F64S : W_I32S);
      w.u32(rowCount);
      if (kind === COL_ARRAY) for (let r = rowCount; r > 0; r--) copyValue(w);
      else {
        const size = kind === COL_I32 ? 4 : 8;
        w.align(size);
        copy(w, rowCount * size);
      }
    }
  }
  w.dv.setUint32(length, 5 + n + values, true);
}
