// The Files and Changes tabs' pure parts: a unified diff's rows with their line
// numbers, git status split into staged / unstaged / untracked, sizes in words, and
// the language a file name is highlighted as.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { diffRows } from '../src/render.js';
import { groupStatus } from '../src/changes-view.js';
import { humanSize } from '../src/files-view.js';
import { languageFor } from '../src/highlight.js';

test('a diff’s rows carry the old and new line numbers of their hunk', () => {
  const patch = [
    'diff --git a/src/main.rs b/src/main.rs',
    'index 1111111..2222222 100644',
    '--- a/src/main.rs',
    '+++ b/src/main.rs',
    '@@ -3,3 +3,4 @@ fn main() {',
    ' a',
    '-b',
    '-- c',
    '+b2',
    '+-- c2',
    '+d',
    '\\ No newline at end of file',
    '',
  ].join('\n');
  const rows = diffRows(patch);
  assert.deepEqual(
    rows.map((r) => [r.kind, r.old, r.new]),
    [
      ['meta', null, null],
      ['meta', null, null],
      ['meta', null, null],
      ['meta', null, null],
      ['hunk', null, null],
      ['ctx', 3, 3],
      ['del', 4, null],
      ['del', 5, null],
      ['add', null, 4],
      ['add', null, 5],
      ['add', null, 6],
      ['meta', null, null],
    ],
  );
  assert.equal(rows.map((r) => r.text).join('\n'), patch.replace(/\n$/, ''));
});

test('a second file’s header after a hunk is not taken for diff lines', () => {
  const rows = diffRows('@@ -1 +1 @@\n-a\n+b\ndiff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -0,0 +1 @@\n+new\n');
  assert.deepEqual(
    rows.map((r) => r.kind),
    ['hunk', 'del', 'add', 'meta', 'meta', 'meta', 'hunk', 'add'],
  );
  assert.equal(rows[7].new, 1);
});

test('git status splits into staged, unstaged and untracked; a file with both is in both', () => {
  const g = groupStatus([
    { index: 'M', worktree: 'M', path: 'both.rs' },
    { index: ' ', worktree: 'M', path: 'work.rs' },
    { index: 'A', worktree: ' ', path: 'new.rs' },
    { index: 'R', worktree: ' ', path: 'b.rs', orig_path: 'a.rs' },
    { index: '?', worktree: '?', path: 'notes.txt' },
    { index: '!', worktree: '!', path: 'target/' },
    null,
    { index: 'M' },
  ]);
  assert.deepEqual(g.staged.map((e) => `${e.letter} ${e.path}`), ['M both.rs', 'A new.rs', 'R b.rs']);
  assert.deepEqual(g.unstaged.map((e) => `${e.letter} ${e.path}`), ['M both.rs', 'M work.rs']);
  assert.deepEqual(g.untracked.map((e) => e.path), ['notes.txt']);
});

test('sizes are said in bytes, KiB, MiB, GiB', () => {
  assert.equal(humanSize(0), '0 B');
  assert.equal(humanSize(812), '812 B');
  assert.equal(humanSize(4300), '4.2 KiB');
  assert.equal(humanSize(1073741824), '1.0 GiB');
  assert.equal(humanSize(300 * 1024 * 1024), '300 MiB');
  assert.equal(humanSize(-1), '');
});

test('a file name or a code block’s tag names a registered language, or none', () => {
  assert.equal(languageFor('src/main.rs'), 'rust');
  assert.equal(languageFor('web/build.mjs'), 'javascript');
  assert.equal(languageFor('Cargo.toml'), 'ini');
  assert.equal(languageFor('rs'), 'rust');
  assert.equal(languageFor('sh'), 'bash');
  assert.equal(languageFor('notes.txt'), null);
  assert.equal(languageFor('Makefile'), null);
  assert.equal(languageFor(''), null);
});
