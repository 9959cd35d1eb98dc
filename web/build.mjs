// Builds web/dist/app.js from web/src/: one bundled, minified ES module (and
// web/dist/sw.js, the service worker, from web/src/sw/main.js). The page
// (index.html) and its style sheet (style.css) need no build: they are served from
// web/ as written. The output is deterministic (no timestamps, no absolute paths), so
// `npm ci && node build.mjs` reproduces the committed dist/app.js byte for byte. Run
// with `npm run build` in web/.

import { build } from 'esbuild';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
mkdirSync(dist, { recursive: true });

await build({
  absWorkingDir: root,
  entryPoints: ['src/main.js'],
  outfile: 'dist/app.js',
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2020'],
  minify: true,
  sourcemap: false,
  legalComments: 'eof',
  charset: 'ascii',
  logLevel: 'warning',
});
// The service worker (push handling, web/src/sw/): a classic script, so an IIFE.
await build({
  absWorkingDir: root,
  entryPoints: ['src/sw/main.js'],
  outfile: 'dist/sw.js',
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: ['es2020'],
  minify: true,
  sourcemap: false,
  legalComments: 'eof',
  charset: 'ascii',
  logLevel: 'warning',
});
console.log('built web/dist/app.js and web/dist/sw.js');
