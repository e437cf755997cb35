// A static file server for the playground and the browser tests, on 127.0.0.1 only.
// It serves the repository's files (`/` is the playground, www/index.html) and, unless
// `isolated: false`, sends the headers that make a page cross-origin isolated (precise timers,
// SharedArrayBuffer). cairn itself works without them.
//
//   node scripts/serve.mjs [--port N] [--no-isolation]
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { dirname, extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const types = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm',
  '.json': 'application/json; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ts': 'text/plain; charset=utf-8',
};

export function startServer({ port = 0, host = '127.0.0.1', isolated = true, root: base = root } = {}) {
  const server = createServer(async (req, res) => {
    const headers = { 'Cache-Control': 'no-cache' };
    if (isolated) {
      headers['Cross-Origin-Opener-Policy'] = 'same-origin';
      headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
      headers['Cross-Origin-Resource-Policy'] = 'same-origin';
    }
    let path;
    try {
      path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      // A path that is not a URL's (`//`) or a broken escape (`%E0%A4`): refused, not a crash.
      res.writeHead(400, headers).end('bad request');
      return;
    }
    if (path === '/' && base === root) path = '/www/index.html';
    if (path.endsWith('/')) path += 'index.html';
    const file = normalize(join(base, path));
    if (!file.startsWith(base + sep) || file.includes(`${sep}.`) || file.includes(`${sep}node_modules${sep}`)) {
      res.writeHead(403, headers).end('forbidden');
      return;
    }
    try {
      if (!(await stat(file)).isFile()) throw new Error('not a file');
      const body = await readFile(file);
      res.writeHead(200, { ...headers, 'Content-Type': types[extname(file)] ?? 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404, headers).end('not found');
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const { port: p } = server.address();
      resolve({ server, url: `http://${host}:${p}`, close: () => new Promise((r) => server.close(r)) });
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const i = args.indexOf('--port');
  const port = i >= 0 ? Number(args[i + 1]) : Number(process.env.PORT ?? 8080);
  const { url } = await startServer({ port, isolated: !args.includes('--no-isolation') });
  console.log(`cairn playground: ${url}/`);
}
