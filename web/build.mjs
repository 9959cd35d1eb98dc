// Builds web/dist/app.js from web/src/ (one bundled, minified ES module) and
// web/dist/sw.js from web/src/sw/main.js (the service worker, a classic script). The page
// (index.html) and its style sheet (style.css) need no build: they are served from
// web/ as written. The output is deterministic (no timestamps, no absolute paths), so
// `npm ci && node build.mjs` reproduces the committed dist/ byte for byte. Run
// with `npm run build` in web/.

import { build } from 'esbuild';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
mkdirSync(dist, { recursive: true });

// xterm.js (the terminal view) styles itself in two ways the page's
// Content-Security-Policy (`style-src 'self'`) blocks, and which this rewrites in the
// pinned version, failing the build when the code is not found as expected (a new
// xterm.js version: check how it styles itself):
// - a cell's 24-bit colour is written to its `style` attribute: rewritten to the same
//   declarations written through the CSSOM, which the policy allows;
// - its rules (theme colours, row sizes, the scroll bar) go into `<style>` elements it
//   creates (three places): created as inert `<xterm-style>` elements instead, whose
//   text src/xterm-style.js applies as constructed style sheets (no policy violation
//   reported, nothing applied twice).
const XTERM_ADD_STYLE = '_addStyle(t,e){t.setAttribute("style",`${t.getAttribute("style")||""}${e};`)}';
const XTERM_STYLE_ELEMENT = 'createElement("style")';
const XTERM_STYLE_ELEMENTS = 3;
const xtermUnderCsp = {
  name: 'xterm-under-csp',
  setup(b) {
    b.onLoad({ filter: /[\\/]@xterm[\\/]xterm[\\/]lib[\\/]xterm\.mjs$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      const found = source.split(XTERM_ADD_STYLE).length - 1;
      if (found !== 1) throw new Error(`@xterm/xterm: expected its _addStyle once, found it ${found} times (see build.mjs)`);
      const elements = source.split(XTERM_STYLE_ELEMENT).length - 1;
      if (elements !== XTERM_STYLE_ELEMENTS) {
        throw new Error(`@xterm/xterm: expected ${XTERM_STYLE_ELEMENTS} <style> elements created, found ${elements} (see build.mjs)`);
      }
      const contents = source
        .replace(XTERM_ADD_STYLE, () => '_addStyle(t,e){t.style.cssText+=`${e};`}')
        .split(XTERM_STYLE_ELEMENT)
        .join('createElement("xterm-style")');
      return { contents, loader: 'js' };
    });
  },
};

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
// xterm.css is bundled as text (src/xterm-style.js applies it).
await build({
  ...common,
  entryPoints: ['src/main.js'],
  outfile: 'dist/app.js',
  format: 'esm',
  loader: { '.css': 'text' },
  plugins: [xtermUnderCsp],
});
console.log('built web/dist/app.js');
// The service worker (served at /sw.js, scope /): a classic script, which every
// browser with service workers runs.
await build({ ...common, entryPoints: ['src/sw/main.js'], outfile: 'dist/sw.js', format: 'iife' });
console.log('built web/dist/sw.js');
