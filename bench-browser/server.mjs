// A tiny static server on 127.0.0.1 that sends the cross-origin isolation headers on every
// response (so performance.now() is precise) and logs every file it serves (download sizes).
import http from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { extname, join, normalize, sep } from 'node:path';

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript',
  '.wasm': 'application/wasm', '.json': 'application/json', '.css': 'text/css', '.png': 'image/png',
  '.svg': 'image/svg+xml', '.data': 'application/octet-stream',
};

/** mounts: { '/prefix/': '/abs/dir' }, longest prefix wins. Returns { url, log, close }. */
export async function serve(mounts, { cache = true } = {}) {
  const prefixes = Object.keys(mounts).sort((a, b) => b.length - a.length);
  const log = [];
  const server = http.createServer((req, res) => {
    const headers = {
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
      'Cross-Origin-Resource-Policy': 'same-origin',
    };
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const prefix = prefixes.find((p) => path.startsWith(p));
    let file = null;
    if (prefix) {
      const root = mounts[prefix];
      const rel = path.slice(prefix.length) || 'index.html';
      const f = normalize(join(root, rel));
      if (f === root || f.startsWith(root.endsWith(sep) ? root : root + sep)) file = f;
    }
    let st = null;
    try { if (file) st = statSync(file); if (st && st.isDirectory()) { file = join(file, 'index.html'); st = statSync(file); } } catch { st = null; }
    if (!st) {
      res.writeHead(404, { ...headers, 'Content-Type': 'text/plain' });
      res.end('not found');
      log.push({ path, status: 404, bytes: 0 });
      return;
    }
    // A warm HTTP cache is part of what "reopen" measures: let the browser keep what it fetched.
    const etag = `"${st.size}-${Math.floor(st.mtimeMs)}"`;
    Object.assign(headers, {
      'Content-Type': TYPES[extname(file)] || 'application/octet-stream',
      'Cache-Control': cache ? 'max-age=3600' : 'no-store',
      ETag: etag,
    });
    if (cache && req.headers['if-none-match'] === etag) {
      res.writeHead(304, headers);
      res.end();
      log.push({ path, file, status: 304, bytes: 0 });
      return;
    }
    headers['Content-Length'] = st.size;
    res.writeHead(200, headers);
    createReadStream(file).pipe(res);
    log.push({ path, file, status: 200, bytes: st.size });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, log, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }) };
}
