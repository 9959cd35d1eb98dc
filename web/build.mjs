// Builds web/dist/app.js from web/src/ (one bundled, minified ES module) and
// web/dist/sw.js from web/src/sw/main.js (the service worker, a classic script). The page
// (index.html) and its style sheet (style.css) need no build: they are served from
// web/ as written. The output is deterministic (no timestamps, no absolute paths), so
// `npm ci && node build.mjs` reproduces the committed dist/ byte for byte. Run
// with `npm run build` in web/.

import { build } from 'esbuild';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
mkdirSync(dist, { recursive: true });

const common = {
  absWorkingDir: root,
  bundle: true,
  platform: 'browser',
  target: ['es2020'],
  minify: true,
  sourcemap: false,
  legalComments: 'eof',
  charset: 'ascii',
  logLevel: 'warning',
};

// The page's script: an ES module.
await build({ ...common, entryPoints: ['src/main.js'], outfile: 'dist/app.js', format: 'esm' });
console.log('built web/dist/app.js');
// The service worker (served at /sw.js, scope /): a classic script, which every
// browser with service workers runs.
await build({ ...common, entryPoints: ['src/sw/main.js'], outfile: 'dist/sw.js', format: 'iife' });
console.log('built web/dist/sw.js');
