// Syntax highlighting, shared by every view that shows code (the Files view's text
// files; chat code blocks may use it too): highlight.js's core with 13 languages
// registered (docs/web-client.md, "Files and Changes", states what it costs; CSS and
// C++ are left out, 7 KB gzipped together: C++ files are shown as C).
//
// highlight.js answers an HTML string in which it escaped the source; that string
// never reaches innerHTML here: `toLines` reads it as a token stream (its `<span
// class>` and `</span>` tags and five entities, anything else is text) and builds the
// DOM with text nodes, one element per source line, so a line-numbered view can count
// lines and a multi-line token (a block comment) is split at each newline.

import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';
import { h } from './dom.js';

const LANGUAGES = { bash, c, diff, go, ini, javascript, json, markdown, python, rust, typescript, xml, yaml };
for (const [name, def] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, def);

/** Texts longer than this are shown plain: highlighting 256 KiB on a phone takes too long. */
export const MAX_HIGHLIGHT_CHARS = 128 * 1024;

const BY_EXTENSION = {
  rs: 'rust',
  js: 'javascript',
  mjs: 'javascript',
  cjs: 'javascript',
  jsx: 'javascript',
  ts: 'typescript',
  tsx: 'typescript',
  py: 'python',
  json: 'json',
  sh: 'bash',
  bash: 'bash',
  zsh: 'bash',
  html: 'xml',
  htm: 'xml',
  xml: 'xml',
  svg: 'xml',
  md: 'markdown',
  markdown: 'markdown',
  toml: 'ini',
  ini: 'ini',
  cfg: 'ini',
  yaml: 'yaml',
  yml: 'yaml',
  go: 'go',
  c: 'c',
  h: 'c',
  cc: 'c',
  cpp: 'c',
  hpp: 'c',
  diff: 'diff',
  patch: 'diff',
};

/**
 * The registered language for a file name (`src/main.rs` → `rust`) or a code block's
 * tag (`rs`, `rust`, `sh`), or null.
 */
export function languageFor(nameOrTag) {
  const s = String(nameOrTag ?? '').toLowerCase();
  if (!s) return null;
  if (!s.includes('.') && !s.includes('/')) {
    const tag = canonical(s);
    if (tag) return tag;
  }
  const base = s.split('/').pop();
  if (base === 'dockerfile' || base === 'makefile') return null;
  const dot = base.lastIndexOf('.');
  const ext = dot >= 0 ? base.slice(dot + 1) : base;
  return BY_EXTENSION[ext] ?? null;
}

function canonical(tag) {
  const lang = hljs.getLanguage(tag);
  if (!lang) return null;
  return Object.keys(LANGUAGES).find((k) => hljs.getLanguage(k) === lang) ?? null;
}

const TOKEN = /<span class="([^"<>]*)">|<\/span>|&(amp|lt|gt|quot|#x27);|[^<&]+|[<&]/g;
const ENTITY = { amp: '&', lt: '<', gt: '>', quot: '"', '#x27': "'" };

/**
 * `text` as one element per line (`<span class="line">`), highlighted as `lang` when
 * it is registered and the text is not too long. Returns `{lines, highlighted}`.
 */
export function highlightLines(text, lang) {
  const source = String(text ?? '');
  let html = null;
  if (lang && hljs.getLanguage(lang) && source.length <= MAX_HIGHLIGHT_CHARS) {
    try {
      html = hljs.highlight(source, { language: lang, ignoreIllegals: true }).value;
    } catch {
      html = null;
    }
  }
  if (html == null) {
    const lines = source.split('\n');
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    return { lines: lines.map((l) => h('span', { class: 'line' }, l)), highlighted: false };
  }
  return { lines: toLines(html), highlighted: true };
}

/** highlight.js's escaped output → line elements, built with text nodes only. */
export function toLines(html) {
  const lines = [];
  // The classes of the spans open at this point, outermost first.
  const open = [];
  let line = null;
  let stack = null;
  const newLine = () => {
    line = h('span', { class: 'line' });
    lines.push(line);
    stack = [line];
    for (const cls of open) {
      const el = h('span', { class: cls });
      stack[stack.length - 1].appendChild(el);
      stack.push(el);
    }
  };
  const addText = (t) => {
    const parts = t.split('\n');
    parts.forEach((p, i) => {
      if (i > 0) newLine();
      if (p) stack[stack.length - 1].appendChild(document.createTextNode(p));
    });
  };
  newLine();
  TOKEN.lastIndex = 0;
  let m;
  while ((m = TOKEN.exec(html))) {
    if (m[1] != null) {
      const cls = m[1]
        .split(/\s+/)
        .filter((k) => /^[A-Za-z0-9_-]+$/.test(k))
        .map((k) => (k.startsWith('hljs-') ? k : `hljs-${k}`))
        .join(' ');
      open.push(cls);
      const el = h('span', { class: cls });
      stack[stack.length - 1].appendChild(el);
      stack.push(el);
    } else if (m[0] === '</span>') {
      if (open.length) {
        open.pop();
        stack.pop();
      }
    } else if (m[2] != null) {
      addText(ENTITY[m[2]]);
    } else {
      addText(m[0]);
    }
  }
  // A final newline ends the last line; it does not start an empty one.
  if (lines.length > 1 && !lines[lines.length - 1].textContent) lines.pop();
  return lines;
}

/** A `<code>` of `text` highlighted as `lang` (a tag or file name), one line element per line. */
export function highlightedCode(text, lang) {
  const { lines, highlighted } = highlightLines(text, languageFor(lang));
  const code = h('code', { class: highlighted ? 'hljs' : null });
  lines.forEach((l, i) => {
    code.appendChild(l);
    if (i < lines.length - 1) code.appendChild(document.createTextNode('\n'));
  });
  return code;
}

/** Escapes text for HTML. */
function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]);
}

/**
 * `code` as an HTML string highlighted as `languageOrFilename` (a tag or file name):
 * highlight.js's output, which escapes every character of the code and adds only
 * `<span class="hljs-…">`; unknown languages and texts over MAX_HIGHLIGHT_CHARS come
 * back escaped. The page builds DOM with `highlightedCode` instead; this is for callers
 * that need the string.
 */
export function highlight(code, languageOrFilename) {
  const text = typeof code === 'string' ? code : '';
  const lang = languageFor(languageOrFilename);
  if (!lang || text.length > MAX_HIGHLIGHT_CHARS) return escapeHtml(text);
  try {
    return hljs.highlight(text, { language: lang, ignoreIllegals: true }).value;
  } catch {
    return escapeHtml(text);
  }
}
