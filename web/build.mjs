// Builds web/dist/ from web/src/: one bundled, minified ES module (app.js) plus
// index.html and style.css copied as they are. The output is deterministic (no
// timestamps, no absolute paths), so `npm ci && node build.mjs` reproduces the
// committed dist/ byte for byte. Run with `npm run build` in web/.

import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
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
for (const f of ['index.html', 'style.css']) copyFileSync(join(root, f), join(dist, f));
console.log('built web/dist: app.js, index.html, style.css');
