// The app's DOM-free parts: the transcript rules (client/src/transcript.rs) and the
// Markdown splitter. Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Transcript, replaceKey, displayKey } from '../src/transcript.js';
import { splitMarkdown, splitInline } from '../src/markdown.js';

const text = (seq, id, t, done) => ({ type: 'text', seq, ts: 1, id, text: t, done });
const err = (seq, message) => ({ type: 'error', seq, ts: 1, message, recoverable: true });

test('a repeated text id replaces in place and a repeated seq is dropped', () => {
  const t = new Transcript();
  assert.equal(t.apply(text(1, 'a', 'He', false)), true);
  t.apply(err(2, 'x'));
  assert.equal(t.apply(text(3, 'a', 'Hello', true)), true);
  assert.equal(t.apply(text(3, 'a', 'x', true)), false);
  const entries = t.entries();
  assert.equal(entries.length, 2);
  assert.equal(entries[0].text, 'Hello');
  assert.deepEqual(t.seqs(), [1, 2, 3]);
  assert.equal(t.lastSeq, 3);
});

test('older history merges by seq', () => {
  const t = new Transcript();
  t.apply(err(5, 'late'));
  t.apply(err(2, 'early'));
  assert.deepEqual(t.seqs(), [2, 5]);
  assert.equal(t.entries()[0].message, 'early');
  assert.equal(t.lastSeq, 5);
});

test('blocks without a seq, or not objects, are ignored', () => {
  const t = new Transcript();
  assert.equal(t.apply({ type: 'text' }), false);
  assert.equal(t.apply(null), false);
  assert.equal(t.apply({ type: 'text', seq: -1 }), true, 'negative seqs are refused by the link, not here');
  assert.equal(t.lastSeq, 0);
});

test('turn state follows user_message and session_end', () => {
  const t = new Transcript();
  t.apply({ type: 'agent_info', seq: 1, ts: 1 });
  assert.equal(t.turnRunning(), false);
  t.apply({ type: 'user_message', seq: 2, ts: 1, text: 'hi' });
  assert.equal(t.turnRunning(), true);
  t.apply({ type: 'session_end', seq: 4, ts: 1, reason: 'interrupted' });
  assert.equal(t.turnRunning(), false);
  assert.equal(t.lastEnd().reason, 'interrupted');
});

test('turn state with handoff: parked runs no turn, mirrored messages do not count, live with a queue does', () => {
  const u = (seq, extra = {}) => ({ seq, type: 'user_message', text: 'x', ...extra });
  const st = (seq, state, queued = 0) => ({ seq, type: 'session_state', state, queued });
  const t = new Transcript([u(1), { seq: 2, type: 'session_end', reason: 'completed' }]);
  assert.equal(t.sessionState(), null);
  t.apply(st(3, 'parked'));
  t.apply(u(4, { _meta: { mirrored: true } }));
  t.apply(u(5));
  assert.equal(t.turnRunning(), false, 'parked: the bridge queues, nothing of terminull runs');
  assert.equal(t.sessionState().seq, 3);
  t.apply(st(6, 'live', 1));
  assert.equal(t.sessionState().state, 'live');
  assert.equal(t.turnRunning(), true, 'the queued message runs');
  t.apply({ seq: 7, type: 'session_end', reason: 'completed' });
  assert.equal(t.turnRunning(), false);
  const m = new Transcript([st(1, 'live', 0), u(2, { _meta: { mirrored: true } })]);
  assert.equal(m.turnRunning(), false, 'a mirrored message is not a turn of terminull');
});

test('replace keys: the protocol rule, and tool calls shown as one card', () => {
  assert.equal(replaceKey({ type: 'tool_call', id: 'c' }), null);
  assert.notEqual(displayKey({ type: 'tool_call', id: 'c' }), null);
  assert.notEqual(replaceKey({ type: 'progress', id: 'p' }), replaceKey({ type: 'bg_task', id: 'p' }));
  const t = new Transcript([
    { type: 'tool_call', seq: 1, id: 'c', status: 'running' },
    { type: 'tool_call', seq: 2, id: 'c', status: 'done' },
  ]);
  assert.equal(t.entries().length, 2);
  assert.equal(t.entries(displayKey).length, 1);
  assert.equal(t.entries(displayKey)[0].status, 'done');
});

test('markdown: fences, tables, paragraphs, lists, headings', () => {
  const md = [
    'Intro line',
    'second line',
    '',
    '```rust',
    'fn main() {}',
    '',
    '| not a table |',
    '```',
    '# Title',
    '| a | b |',
    '|---|--:|',
    '| 1 | 2 |',
    '| x \\| y | 3 |',
    '',
    '- one',
    '- two',
    '1. first',
    '<script>alert(1)</script>',
  ].join('\n');
  const segs = splitMarkdown(md);
  assert.deepEqual(
    segs.map((s) => s.kind),
    ['para', 'code', 'heading', 'table', 'list', 'list', 'para'],
  );
  assert.equal(segs[0].text, 'Intro line\nsecond line');
  assert.equal(segs[1].lang, 'rust');
  assert.equal(segs[1].text, 'fn main() {}\n\n| not a table |');
  assert.equal(segs[1].closed, true);
  assert.deepEqual(segs[3].header, ['a', 'b']);
  assert.deepEqual(segs[3].align, ['', 'right']);
  assert.deepEqual(segs[3].rows, [['1', '2'], ['x | y', '3']]);
  assert.deepEqual(segs[4].items, ['one', 'two']);
  assert.equal(segs[5].ordered, true);
  assert.equal(segs[6].text, '<script>alert(1)</script>', 'HTML stays text');
});

test('markdown: an unclosed fence (still streaming) runs to the end', () => {
  const segs = splitMarkdown('Here:\n```js\nlet a = 1;');
  assert.equal(segs[1].kind, 'code');
  assert.equal(segs[1].closed, false);
  assert.equal(segs[1].text, 'let a = 1;');
});

test('inline spans', () => {
  assert.deepEqual(splitInline('run `cargo test` **now** and *then*'), [
    { kind: 'text', text: 'run ' },
    { kind: 'code', text: 'cargo test' },
    { kind: 'text', text: ' ' },
    { kind: 'strong', text: 'now' },
    { kind: 'text', text: ' and ' },
    { kind: 'em', text: 'then' },
  ]);
  assert.deepEqual(splitInline('a_b_c 2*3*4'), [{ kind: 'text', text: 'a_b_c 2*3*4' }]);
});
