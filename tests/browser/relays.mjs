// Relays for the browser tests: the real cairn-relay binary (built with cargo, found through
// CARGO_TARGET_DIR), and a fake one made here over Node's HTTP upgrade, which speaks just enough
// of docs/relay.md to record what a client sends and to refuse it as a test needs.
import { spawn, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Builds and starts a relay on a loopback port (`port` 0: a free one), over the data directory
 * `data` (default: a new one), with more flags in `args`; resolves to { url, port, data, stop({ keepData }) }. `stop`
 * kills the process (SIGKILL: as a crash would) and waits for it to be gone.
 */
export async function startRelay({ port = 0, data, args = [] } = {}) {
  execFileSync('cargo', ['build', '-q', '-p', 'cairn-relay', '--bin', 'cairn-relay'], { cwd: ROOT, stdio: 'inherit' });
  const dir = data ?? mkdtempSync(join(tmpdir(), 'cairn-relay-'));
  const bin = join(resolve(ROOT, process.env.CARGO_TARGET_DIR ?? 'target'), 'debug/cairn-relay');
  const child = spawn(bin, ['--listen', `127.0.0.1:${port}`, '--data', dir, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((res) => child.on('exit', res));
  const addr = await new Promise((res, rej) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (\S+)/.exec(out);
      if (m) res(m[1]);
    });
    child.on('exit', (code) => rej(new Error(`the relay exited (${code}) before listening: ${out}`)));
  });
  return {
    url: `ws://${addr}/`,
    port: Number(addr.split(':').pop()),
    data: dir,
    async stop({ keepData = false } = {}) {
      child.kill('SIGKILL');
      await exited;
      if (!keepData) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A loopback port nothing listens on (bound, then let go). */
export async function deadPort() {
  const s = createServer();
  await new Promise((res) => s.listen(0, '127.0.0.1', res));
  const { port } = s.address();
  await new Promise((res) => s.close(res));
  return port;
}

/** A relay frame: 'C' 'R', version 1, `type`, `body`. */
export const relayFrame = (type, ...body) => Buffer.concat([Buffer.from([0x43, 0x52, 1, type]), ...body.map((b) => Buffer.from(b))]);

/** `text`: varint length (LEB128) and UTF-8 bytes. */
export function text(s) {
  const bytes = Buffer.from(s, 'utf8');
  const len = [];
  let n = bytes.length;
  while (n >= 0x80) {
    len.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  len.push(n);
  return Buffer.concat([Buffer.from(len), bytes]);
}

/** An ERROR frame: fatal or not, a code, a message, `retry_after_ms`. */
export function errorFrame(fatal, code, message, retryAfterMs = 0) {
  const retry = Buffer.alloc(4);
  retry.writeUInt32LE(retryAfterMs);
  return relayFrame(4, [fatal ? 1 : 0], text(code), text(message), retry);
}

/** A CHALLENGE frame: a nonce, a relay id, the largest frame accepted. */
export function challengeFrame() {
  const max = Buffer.alloc(4);
  max.writeUInt32LE(1 << 20);
  return relayFrame(1, randomBytes(32), randomBytes(32), max);
}

/**
 * A fake relay: a WebSocket server (RFC 6455, binary messages only, no fragments) on a loopback
 * port that calls `onConnection(conn)` for each client; `conn.send(bytes)`, `conn.close()`,
 * `conn.frames` (every binary message received, in order), `conn.onFrame(bytes)`. Resolves to
 * { url, connections, stop() }.
 */
export async function fakeRelay(onConnection) {
  const connections = [];
  const server = createServer((req, res) => res.writeHead(404).end());
  server.on('upgrade', (req, socket) => {
    const accept = createHash('sha1').update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    const conn = {
      frames: [],
      onFrame: () => {},
      send(bytes) {
        const n = bytes.length;
        const head = n < 126 ? Buffer.from([0x82, n]) : Buffer.from([0x82, 126, n >> 8, n & 0xff]);
        socket.write(Buffer.concat([head, bytes]));
      },
      close() {
        socket.end(Buffer.from([0x88, 0]));
      },
    };
    connections.push(conn);
    let buf = Buffer.alloc(0);
    socket.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (buf.length < 2) return;
        const op = buf[0] & 0x0f;
        let n = buf[1] & 0x7f;
        let at = 2;
        if (n === 126) {
          if (buf.length < 4) return;
          n = buf.readUInt16BE(2);
          at = 4;
        } else if (n === 127) {
          if (buf.length < 10) return;
          n = Number(buf.readBigUInt64BE(2));
          at = 10;
        }
        if (buf.length < at + 4 + n) return;
        const mask = buf.subarray(at, at + 4);
        const payload = Buffer.from(buf.subarray(at + 4, at + 4 + n));
        for (let i = 0; i < n; i++) payload[i] ^= mask[i & 3];
        buf = buf.subarray(at + 4 + n);
        if (op === 8) {
          socket.end();
          return;
        }
        if (op === 2) {
          conn.frames.push(payload);
          conn.onFrame(payload);
        }
      }
    });
    socket.on('error', () => {});
    onConnection(conn);
  });
  await new Promise((res) => server.listen(0, '127.0.0.1', res));
  const sockets = new Set();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return {
    url: `ws://127.0.0.1:${server.address().port}/`,
    connections,
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise((res) => server.close(res));
    },
  };
}

/** A relay frame's type and, for TOKEN, its token: { type, token? }. */
export function readFrame(bytes) {
  if (bytes[0] !== 0x43 || bytes[1] !== 0x52) return { type: 'sync' };
  const type = bytes[3];
  if (type !== 5) return { type };
  let n = 0, shift = 0, at = 4, b;
  do {
    b = bytes[at++];
    n |= (b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  return { type, token: bytes.subarray(at, at + n).toString('utf8'), rest: bytes.length - at - n };
}
