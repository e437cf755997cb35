// The message shapes between the page and cairn's Worker (docs/protocol.md).
// A request is an array [id, op, session, ...args]; a reply is [id, OK, result] or
// [id, ERR, code, message, extra]. Buffers in either direction are transferred, not copied.
export const OK = 0;
export const ERR = 1;

// What an `execute` returns: every row, the change count and last row id, or the first row only.
export const MODE_ROWS = 0;
export const MODE_RUN = 1;
export const MODE_FIRST = 2;

// How a result column crosses: a plain Array of values, or a typed array of numbers.
export const COL_ARRAY = 0;
export const COL_F64 = 1;
export const COL_I32 = 2;

// Shared-memory channel replies: the request was not run (send it again by postMessage), or it ran
// and its reply comes by postMessage because it did not fit.
export const RESEND = 2;
export const REPLY_BY_POST = 3;
