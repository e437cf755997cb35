// The message shapes between the page and cairn's Worker (docs/protocol.md).
// A request is an array [id, op, ...args]; a reply is [id, OK, result] or
// [id, ERR, code, message, extra]. Buffers in either direction are transferred, not copied.
export const OK = 0;
export const ERR = 1;
