// Syntax highlighting: highlight.js core (pinned in package.json) with ten grammars
// agents write most (Rust, TypeScript/JavaScript, Python, Go, shell, JSON, YAML,
// TOML/INI, HTML/XML, diff), chosen to keep the bundle small (docs/web-client.md states the
// cost). `highlight(code, languageOrFilename)` returns HTML: highlight.js escapes
// every character of the code it is given and only adds `<span class="hljs-…">`, so
// the result may be set as innerHTML; an unknown language returns the code escaped.

import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

const LANGUAGES = { bash, diff, go, ini, json, python, rust, typescript, xml, yaml };
for (const [name, lang] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, lang);
// TypeScript's grammar covers JavaScript: one grammar for both keeps 5 KB out of the bundle.
hljs.registerAliases(['javascript', 'js', 'jsx', 'mjs', 'cjs', 'node'], { languageName: 'typescript' });

/** File extensions and names to a registered language. */
const BY_EXTENSION = {
  sh: 'bash', bash: 'bash', zsh: 'bash', console: 'bash', shell: 'bash',
  diff: 'diff', patch: 'diff', go: 'go',
  toml: 'ini', ini: 'ini', cfg: 'ini', conf: 'ini',
  js: 'typescript', mjs: 'typescript', cjs: 'typescript', jsx: 'typescript',
  json: 'json', jsonl: 'json',
  py: 'python', rs: 'rust', ts: 'typescript', tsx: 'typescript', mts: 'typescript',
  html: 'xml', htm: 'xml', xml: 'xml', svg: 'xml', yml: 'yaml', yaml: 'yaml',
};

/** Code bigger than this is shown escaped, not highlighted (highlighting is linear, but a phone is slow). */
const MAX_HIGHLIGHT_CHARS = 100_000;

/** The registered language for a fence's info string or a file name, or null. */
export function languageOf(languageOrFilename) {
  if (typeof languageOrFilename !== 'string' || !languageOrFilename) return null;
  const s = languageOrFilename.trim().toLowerCase();
  if (hljs.getLanguage(s)) return hljs.getLanguage(s).name ? canonical(s) : s;
  const base = s.split(/[\\/]/).pop();
  if (base === 'dockerfile' || base === 'makefile') return 'bash';
  const ext = base.includes('.') ? base.split('.').pop() : base;
  return BY_EXTENSION[ext] ?? null;
}

/** A language name or alias (`js`, `py`, `sh`…) to the name it was registered under. */
function canonical(s) {
  for (const name of Object.keys(LANGUAGES)) if (name === s || hljs.getLanguage(name) === hljs.getLanguage(s)) return name;
  return s;
}

/** Escapes text for HTML. */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]);
}

/** `code` as highlighted HTML (spans with `hljs-*` classes), or escaped when the language is unknown. */
export function highlight(code, languageOrFilename) {
  const text = typeof code === 'string' ? code : '';
  const language = languageOf(languageOrFilename);
  if (!language || text.length > MAX_HIGHLIGHT_CHARS) return escapeHtml(text);
  try {
    return hljs.highlight(text, { language, ignoreIllegals: true }).value;
  } catch {
    return escapeHtml(text);
  }
}
