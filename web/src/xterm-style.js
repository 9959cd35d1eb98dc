// xterm.js's styles under the page's Content-Security-Policy (`style-src 'self'`, no
// inline styles; web/assets.rs). Its style sheet (`@xterm/xterm/css/xterm.css`) is
// bundled into app.js as text and applied as a constructed style sheet, which the
// policy does not govern. xterm also writes rules into style elements of its own (the
// theme's colours, the row sizes, the scroll bar), which the bundle makes inert
// `<xterm-style>` elements (web/build.mjs: a `<style>` one would be blocked): each is
// applied here as a constructed sheet of its own, kept in step by a MutationObserver.
// (Its per-cell `style` attributes for 24-bit colours are rewritten at bundle time to
// CSSOM writes, which the policy allows.)

import xtermCss from '@xterm/xterm/css/xterm.css';

let base = null;

function adopt(sheet) {
  if (!document.adoptedStyleSheets.includes(sheet)) document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
}

function drop(sheet) {
  document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
}

/** Applies xterm.css once. */
export function adoptXtermCss() {
  if (base) return;
  base = new CSSStyleSheet();
  // The inert elements holding xterm's own rules are never shown.
  base.replaceSync(`${xtermCss}\nxterm-style { display: none !important; }\n`);
  adopt(base);
}

/**
 * Applies every `<xterm-style>` element under `root` (xterm's) as constructed sheets
 * while the terminal lives. Returns the function that stops and removes them.
 */
export function mirrorStyles(root) {
  const sheets = new Map();
  const sync = () => {
    const seen = new Set();
    for (const el of root.querySelectorAll('xterm-style')) {
      seen.add(el);
      let entry = sheets.get(el);
      if (!entry) {
        entry = { sheet: new CSSStyleSheet(), text: null };
        sheets.set(el, entry);
        adopt(entry.sheet);
      }
      const text = el.textContent ?? '';
      if (text !== entry.text) {
        entry.text = text;
        entry.sheet.replaceSync(text);
      }
    }
    for (const [el, entry] of sheets) {
      if (!seen.has(el)) {
        drop(entry.sheet);
        sheets.delete(el);
      }
    }
  };
  const observer = new MutationObserver(sync);
  observer.observe(root, { subtree: true, childList: true, characterData: true });
  sync();
  return () => {
    observer.disconnect();
    for (const entry of sheets.values()) drop(entry.sheet);
    sheets.clear();
  };
}
