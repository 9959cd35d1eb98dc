// The terminal view's keys, DOM-free (web/src/terminal-keys.js): what the key bar
// sends, the sticky Ctrl, the arrows in both cursor modes, input split under the
// bridge's limit and the feed that drops repeats after a reattach. Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KEYS, arrowSequence, withCtrl, chunks, TerminalFeed, INPUT_CHUNK } from '../src/terminal-keys.js';

test('the key bar has Esc, Tab, Ctrl, the arrows and the common combos, each labelled', () => {
  const by = Object.fromEntries(KEYS.map((k) => [k.id, k]));
  assert.equal(by.esc.send, '\x1b');
  assert.equal(by.tab.send, '\t');
  assert.equal(by.ctrl.send, 'ctrl');
  assert.deepEqual(['left', 'up', 'down', 'right'].map((k) => by[k].send.arrow), ['D', 'A', 'B', 'C']);
  assert.deepEqual(['ctrl-c', 'ctrl-d', 'ctrl-z', 'ctrl-l'].map((k) => by[k].send), ['\x03', '\x04', '\x1a', '\x0c']);
  assert.deepEqual(['pipe', 'tilde', 'slash', 'dash'].map((k) => by[k].send), ['|', '~', '/', '-']);
  for (const k of KEYS) assert.ok(k.label && k.aria, `${k.id} is labelled`);
  assert.equal(new Set(KEYS.map((k) => k.id)).size, KEYS.length);
});

test('arrows follow the cursor mode the program asked for', () => {
  assert.equal(arrowSequence('A', false), '\x1b[A');
  assert.equal(arrowSequence('A', true), '\x1bOA');
});

test('Ctrl applies to the first character typed after it', () => {
  assert.equal(withCtrl('c'), '\x03');
  assert.equal(withCtrl('C'), '\x03');
  assert.equal(withCtrl('a'), '\x01');
  assert.equal(withCtrl('z'), '\x1a');
  assert.equal(withCtrl('['), '\x1b');
  assert.equal(withCtrl('\\'), '\x1c');
  assert.equal(withCtrl('_'), '\x1f');
  assert.equal(withCtrl(' '), '\x00');
  assert.equal(withCtrl('?'), '\x7f');
  // A composed word: only its first character is modified.
  assert.equal(withCtrl('ls'), '\x0cs');
  // No control form: sent as typed.
  assert.equal(withCtrl('é'), 'é');
  assert.equal(withCtrl('\x1b[A'), '\x1b[A');
  assert.equal(withCtrl(''), '');
});

test('input is split under the bridge’s 64 KiB per terminal_input', () => {
  const big = new Uint8Array(INPUT_CHUNK * 2 + 5);
  const parts = chunks(big);
  assert.deepEqual(parts.map((p) => p.length), [INPUT_CHUNK, INPUT_CHUNK, 5]);
  assert.ok(INPUT_CHUNK <= 64 * 1024);
  assert.deepEqual(chunks(new Uint8Array(0)), []);
});

test('the feed takes each chunk once, in order, and drops repeats after a reattach', () => {
  const feed = new TerminalFeed('t-1');
  assert.equal(feed.take({ seq: 1 }), true);
  assert.equal(feed.take({ seq: 2 }), true);
  assert.equal(feed.take({ seq: 2 }), false, 'a repeat');
  assert.equal(feed.take({ seq: 1 }), false, 'an older one');
  assert.equal(feed.take({ seq: 7 }), true, 'a gap: the scrollback had dropped 3 to 6');
  assert.equal(feed.take({}), false);
  assert.deepEqual([feed.lastSeq, feed.dropped], [7, 3]);
});
