// A development server: serves the app (dist/app.js rebuilt on every page load) and passes
// /v1/* (HTTP and the /v1/client WebSocket) through to a running bridge LAN server
// or relay, so the app is same-origin with it without rebuilding the Rust binary.
//
//   node web/tools/devserver.mjs --backend http://127.0.0.1:18478 [--port 18480]
//
// Then open the pairing link with its origin replaced by http://127.0.0.1:18480.

import http from 'node:http';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import WebSocket, { WebSocketServer } from 'ws';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const backend = new URL(args.backend ?? 'http://127.0.0.1:18478');
const port = Number(args.port ?? 18480);
const web = join(dirname(fileURLToPath(import.meta.url)), '..');
const types = { '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html; charset=utf-8' };

const server = http.createServer(async (req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  if (path.startsWith('/v1/')) {
    const chunks = [];
    for await (const ch of req) chunks.push(ch);
    try {
      const r = await fetch(new URL(req.url, backend), {
        method: req.method,
        headers: { 'content-type': req.headers['content-type'] ?? 'application/json' },
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      });
      res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/octet-stream' });
      res.end(Buffer.from(await r.arrayBuffer()));
    } catch (e) {
      res.writeHead(502).end(String(e));
    }
    return;
  }
  const file = path === '/' || path === '/pair' ? 'index.html' : path.slice(1);
  if (!['index.html', 'app.js', 'style.css'].includes(file)) return res.writeHead(404).end();
  if (file === 'index.html') execFileSync(process.execPath, [join(web, 'build.mjs')], { stdio: 'ignore' });
  res.writeHead(200, {
    'content-type': types[file.slice(file.lastIndexOf('.'))],
    'cache-control': 'no-cache',
    'content-security-policy':
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  });
  // Only the script is built; the page and its style sheet are served as written.
  res.end(readFileSync(file === 'app.js' ? join(web, 'dist', file) : join(web, file)));
});

const wss = new WebSocketServer({ noServer: true });
server.on('upgrade', (req, socket, head) => {
  if (!req.url.startsWith('/v1/client')) return socket.destroy();
  wss.handleUpgrade(req, socket, head, (client) => {
    const up = new WebSocket(new URL(req.url, backend.href.replace(/^http/, 'ws')));
    const pending = [];
    up.on('open', () => pending.splice(0).forEach((m) => up.send(m)));
    up.on('message', (m, isBinary) => client.readyState === 1 && client.send(isBinary ? m : m.toString()));
    up.on('close', () => client.close());
    up.on('error', () => client.close());
    client.on('message', (m, isBinary) => {
      const data = isBinary ? m : m.toString();
      if (up.readyState === 1) up.send(data);
      else pending.push(data);
    });
    client.on('close', () => up.close());
  });
});

server.listen(port, '127.0.0.1', () => console.log(`dev server on http://127.0.0.1:${port} → ${backend.origin}`));
