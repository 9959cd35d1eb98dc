// The chat's card logic, DOM-free: line and word diffs (new file without a stray "+",
// unified patches, context), safe links and bare URLs, the tool kind of each adapter's
// tool names, shell exit status and search counts, highlighting that escapes.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lineDiff, parseUnified, withContext, wordDiff, markWords, diffStats } from '../src/diff.js';
import { splitInline, safeHref } from '../src/markdown.js';
import { toolKind, commandOf, toolSummary, exitStatus, matchCount, displayName } from '../src/tools.js';
import { highlight, languageFor } from '../src/highlight.js';

test('a new file is every line added, numbered, with no empty last line', () => {
  const d = lineDiff(null, 'a\nb\n');
  assert.deepEqual(d, [
    { kind: 'add', old: null, new: 1, text: 'a' },
    { kind: 'add', old: null, new: 2, text: 'b' },
  ]);
});

test('a changed line is removed then added, with old and new line numbers', () => {
  const d = lineDiff('one\ntwo\nthree\n', 'one\nTWO\nthree\nfour\n');
  assert.deepEqual(
    d.map((l) => [l.kind, l.old, l.new, l.text]),
    [
      ['ctx', 1, 1, 'one'],
      ['del', 2, null, 'two'],
      ['add', null, 2, 'TWO'],
      ['ctx', 3, 3, 'three'],
      ['add', null, 4, 'four'],
    ],
  );
  assert.deepEqual(diffStats(d), { added: 2, removed: 1 });
});

test('far unchanged lines are folded into one skip line', () => {
  const old = Array.from({ length: 50 }, (_, i) => `l${i}`).join('\n');
  const now = old.replace('l25', 'L25');
  const shown = withContext(lineDiff(old, now), 3);
  assert.deepEqual(shown[0], { kind: 'skip', count: 22 });
  assert.equal(shown.filter((l) => l.kind !== 'skip').length, 3 + 2 + 3);
  assert.deepEqual(shown[shown.length - 1], { kind: 'skip', count: 21 });
});

test('a huge diff does not stall: past the bound the middle is removed then added', () => {
  const a = Array.from({ length: 3000 }, (_, i) => `a${i}`).join('\n');
  const b = Array.from({ length: 3000 }, (_, i) => `b${i}`).join('\n');
  const d = lineDiff(a, b);
  assert.equal(d.length, 6000);
  assert.equal(d[0].kind, 'del');
  assert.equal(d[5999].kind, 'add');
});

test('a unified patch takes its line numbers from the hunk header and drops the file lines', () => {
  const d = parseUnified('--- a/x\n+++ b/x\n@@ -10,3 +10,3 @@ fn\n ctx\n-old\n+new\n\\ No newline at end of file\n');
  assert.deepEqual(
    d.map((l) => [l.kind, l.old, l.new, l.text]),
    [
      ['hunk', null, null, '@@ -10,3 +10,3 @@ fn'],
      ['ctx', 10, 10, 'ctx'],
      ['del', 11, null, 'old'],
      ['add', null, 11, 'new'],
    ],
  );
});

test('the word diff marks only the words that changed', () => {
  const w = wordDiff('format!("Hello, {}!", name)', 'format!("Hello there, {name}!")');
  const changed = (side) => side.filter((p) => p.changed).map((p) => p.text);
  assert.ok(changed(w.new).join('').includes('there'));
  assert.ok(!changed(w.new).join('').includes('format'));
  assert.equal(w.old.map((p) => p.text).join(''), 'format!("Hello, {}!", name)');
  assert.equal(w.new.map((p) => p.text).join(''), 'format!("Hello there, {name}!")');
  assert.equal(wordDiff('completely different', 'nothing alike here'), null);
  const marked = markWords(lineDiff('let a = 1;\n', 'let a = 2;\n'));
  assert.deepEqual(marked[0].words.filter((p) => p.changed).map((p) => p.text), ['1']);
  assert.deepEqual(marked[1].words.filter((p) => p.changed).map((p) => p.text), ['2']);
});

test('links: [text](url) and bare URLs with a safe scheme; others stay text', () => {
  assert.deepEqual(splitInline('see [docs](https://e.com/a_(b)) now'), [
    { kind: 'text', text: 'see ' },
    { kind: 'link', text: 'docs', href: 'https://e.com/a_(b)' },
    { kind: 'text', text: ' now' },
  ]);
  assert.deepEqual(splitInline('at https://e.com/x.'), [
    { kind: 'text', text: 'at ' },
    { kind: 'link', text: 'https://e.com/x', href: 'https://e.com/x' },
    { kind: 'text', text: '.' },
  ]);
  assert.deepEqual(splitInline('(https://e.com/p)').map((s) => s.kind), ['text', 'link', 'text']);
  assert.deepEqual(splitInline('[x](javascript:alert(1))'), [{ kind: 'text', text: 'x' }]);
  assert.deepEqual(splitInline('[m](mailto:a@b.c)'), [{ kind: 'link', text: 'm', href: 'mailto:a@b.c' }]);
  assert.deepEqual(splitInline('`https://in.code`'), [{ kind: 'code', text: 'https://in.code' }]);
  for (const bad of ['javascript:alert(1)', 'data:text/html,x', 'file:///etc/passwd', 'vbscript:x', '/relative', 'JAVASCRIPT:x'])
    assert.equal(safeHref(bad), null, bad);
  assert.equal(safeHref('HTTPS://E.com'), 'https://e.com/');
});

test('tool kinds from each adapter\'s names, then from the input', () => {
  const cases = [
    ['Bash', { command: 'ls' }, 'shell'],
    ['shell', { command: ['bash', '-lc', 'ls -la'] }, 'shell'],
    ['run_shell_command', { command: 'ls' }, 'shell'],
    ['Execute', { command: 'echo hello' }, 'shell'],
    ['execute', {}, 'shell'],
    ['Edit', { file_path: 'a', old_string: 'x', new_string: 'y' }, 'edit'],
    ['replace', {}, 'edit'],
    ['apply_patch', { changes: [] }, 'edit'],
    ['edit', { filePath: 'a', oldString: 'x', newString: 'y' }, 'edit'],
    ['Write', { file_path: 'a', content: 'x' }, 'write'],
    ['write_file', {}, 'write'],
    ['Read', { file_path: 'a' }, 'read'],
    ['read_file', {}, 'read'],
    ['Grep', { pattern: 'x' }, 'search'],
    ['Glob', { pattern: '*.rs' }, 'search'],
    ['search', {}, 'search'],
    ['WebFetch', { url: 'https://e.com' }, 'fetch'],
    ['web_search', { query: 'x' }, 'fetch'],
    ['Task', { description: 'x' }, 'agent'],
    ['mcp__github__create_issue', { title: 'x' }, 'generic'],
    ['custom', { command: 'make' }, 'shell'],
    ['custom', { old_string: 'a', new_string: 'b', path: 'x' }, 'edit'],
    ['custom', { url: 'https://e.com' }, 'fetch'],
    ['custom', { x: 1 }, 'generic'],
  ];
  for (const [name, input, kind] of cases) assert.equal(toolKind(name, input), kind, `${name} ${JSON.stringify(input)}`);
  assert.equal(commandOf({ command: ['bash', '-lc', 'ls -la'] }), 'ls -la');
  assert.equal(commandOf({ command: ['git', 'commit', '-m', 'a b'] }), "git commit -m 'a b'");
  assert.equal(toolSummary('search', { pattern: 'fn main', path: 'src' }), 'fn main in src');
  assert.equal(displayName('mcp__github__create_issue'), 'github · create_issue');
});

test('a shell result names its exit status; a search result counts its matches', () => {
  assert.equal(exitStatus("ls: cannot access 'x'\nExit code 2"), 2);
  assert.equal(exitStatus('exit status 1'), 1);
  assert.equal(exitStatus('all fine'), null);
  assert.equal(matchCount('Found 3 files\na\nb\nc'), 3);
  assert.equal(matchCount('a.rs:1:x\nb.rs:2:y\n'), 2);
  assert.equal(matchCount('No matches found'), 0);
});

test('highlighting escapes the code and knows languages by fence or file name', () => {
  assert.equal(languageFor('rs'), 'rust');
  assert.equal(languageFor('src/app.tsx'), 'typescript');
  assert.equal(languageFor('Cargo.toml'), 'ini');
  assert.equal(languageFor('brainfuck'), null);
  const html = highlight('let s = "<img src=x onerror=alert(1)>";', 'rust');
  assert.ok(html.includes('hljs-keyword'));
  assert.ok(!html.includes('<img'));
  assert.equal(highlight('<b>&', 'nope'), '&lt;b&gt;&amp;');
});
