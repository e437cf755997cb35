// Reads a statement's result as the engine encodes it in wasm memory (`Encoder` in
// crates/wasm/src/database.rs) and builds the result the page gets (docs/protocol.md, "Results"):
// one flat array, so that cloning it to the page is one array of numbers and strings.
import { MODE_RUN, COL_F64, COL_I32 } from './protocol.js';

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

/** The result at `ptr` in `memory` (a WebAssembly.Memory), for an `execute` of `mode`. */
export function readResult(memory, ptr, mode) {
  if (memory.buffer !== buffer) {
    buffer = memory.buffer; // memory grew: views of the old buffer are detached
    view = new DataView(buffer);
    bytes = new Uint8Array(buffer);
  }
  at = ptr;
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
