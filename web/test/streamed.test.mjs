// Streamed text rebuilt from snapshots and appends (src/streamed.js, the transcript's
// fold): random splits rebuild exactly, a missing piece never shows a wrong text, and
// a replay repairs it. Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Assembly, utf8Length } from '../src/streamed.js';
import { Transcript } from '../src/transcript.js';

const TEXT = 'héllo €uro 😀 wörld — déjà vu ✓ 😀😀 end';
const bytesOf = (s) => new TextEncoder().encode(s);

/** A small deterministic random source (xorshift), so a failure reproduces. */
function rng(seed) {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

/** `text` cut at random character boundaries into appends `{offset, text, done}`. */
function randomAppends(text, next) {
  const chars = [...text];
  const cuts = new Set([0, chars.length]);
  for (let i = next(8); i > 0; i--) cuts.add(next(chars.length + 1));
  const bounds = [...cuts].sort((a, b) => a - b);
  const pieces = [];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const before = chars.slice(0, bounds[i]).join('');
    pieces.push({ offset: utf8Length(before), text: chars.slice(bounds[i], bounds[i + 1]).join(''), done: false });
  }
  pieces[pieces.length - 1].done = true;
  return pieces;
}

const chunk = (seq, piece, id = 'm') => ({ type: 'text', seq, ts: 1, id, ...piece });

test('the UTF-8 length counts what TextEncoder counts', () => {
  for (const s of ['', 'a', 'é', '€', '😀', TEXT, '\ud800 lone surrogate']) assert.equal(utf8Length(s), bytesOf(s).length, s);
});

test('random splits of a multi-byte text rebuild it exactly', () => {
  const next = rng(7);
  for (let round = 0; round < 300; round++) {
    const asm = new Assembly();
    for (const piece of randomAppends(TEXT, next)) assert.equal(asm.apply(piece), 'taken');
    assert.equal(asm.text, TEXT);
    assert.equal(asm.bytes, bytesOf(TEXT).length);
    assert.equal(asm.done, true);
  }
});

test('dropped, repeated and swapped pieces never show a wrong text', () => {
  const next = rng(11);
  for (let round = 0; round < 500; round++) {
    const sent = [];
    for (const piece of randomAppends(TEXT, next)) {
      if (next(4) === 0) continue; // dropped
      if (next(4) === 0) sent.push(piece); // repeated
      sent.push(piece);
    }
    if (sent.length > 1 && next(3) === 0) {
      const [a, b] = [next(sent.length), next(sent.length)];
      [sent[a], sent[b]] = [sent[b], sent[a]];
    }
    const asm = new Assembly();
    for (const piece of sent) {
      asm.apply(piece);
      assert.ok(TEXT.startsWith(asm.text), `round ${round}: showed ${JSON.stringify(asm.text)}`);
      assert.equal(asm.bytes, bytesOf(asm.text).length);
    }
    if (asm.done) assert.equal(asm.text, TEXT);
  }
});

test('an append applies at the bytes held; a repeat is ignored; a gap changes nothing', () => {
  const asm = new Assembly();
  assert.equal(asm.apply({ offset: 0, text: 'é€', done: false }), 'taken');
  assert.equal(asm.bytes, 5);
  assert.equal(asm.apply({ offset: 0, text: 'é', done: false }), 'repeat');
  assert.equal(asm.apply({ offset: 2, text: '€😀', done: false }), 'taken', 'an overlap that agrees adds its new part');
  assert.equal(asm.apply({ offset: 1, text: 'x', done: false }), 'gap', 'inside a character');
  assert.equal(asm.apply({ offset: 20, text: 'x', done: false }), 'gap');
  assert.equal(asm.text, 'é€😀');
  assert.equal(asm.apply({ text: 'rewritten', done: true }), 'taken', 'a snapshot replaces');
  assert.equal(asm.apply({ offset: 9, text: '!', done: false }), 'after_done');
  assert.equal(asm.text, 'rewritten');
});

test('the transcript shows a message once, rebuilt; a dropped piece is a gap with the seq to resume from', () => {
  const t = new Transcript();
  t.apply({ type: 'user_message', seq: 1, ts: 1, text: 'hi' });
  assert.deepEqual(t.applyBlock(chunk(2, { offset: 0, text: 'Hé', done: false })), { status: 'added' });
  assert.deepEqual(t.applyBlock(chunk(4, { offset: 7, text: ' 😀', done: false })), { status: 'gap', since_seq: 1 });
  assert.equal(t.entries()[1].text, 'Hé', 'the prefix held, not a wrong text');
  assert.equal(t.resumeSeq, 1);
  assert.deepEqual(
    t.saved().map((b) => b.seq),
    [1, 2, 4],
    'a message with a gap is saved as its chunks',
  );
  // The replay from seq 1: the user message again (skipped), the message as one snapshot at its newest seq.
  assert.deepEqual(t.applyBlock({ type: 'user_message', seq: 1, ts: 1, text: 'hi' }), { status: 'duplicate' });
  assert.deepEqual(t.applyBlock(chunk(4, { text: 'Héllo 😀', done: false })), { status: 'rebuilt' });
  assert.deepEqual(t.gaps(), []);
  assert.equal(t.resumeSeq, 4);
  const shown = t.entries()[1];
  assert.equal(shown.text, 'Héllo 😀');
  assert.equal(shown.seq, 4);
  assert.equal('offset' in shown, false);
  // Live appends continue from the snapshot.
  t.apply(chunk(5, { offset: utf8Length('Héllo 😀'), text: '!', done: true }));
  assert.deepEqual(
    t.entries().map((b) => [b.seq, b.text, b.done]),
    [
      [1, 'hi', undefined],
      [5, 'Héllo 😀!', true],
    ],
  );
});

test('a since_seq replay continues a message with one append; older chunks merge in seq order', () => {
  const t = new Transcript();
  t.apply(chunk(1, { offset: 0, text: 'one ', done: false }));
  t.apply(chunk(2, { offset: 4, text: 'two ', done: false }));
  assert.deepEqual(t.applyBlock(chunk(6, { offset: 8, text: 'three', done: true })), { status: 'added' });
  assert.equal(t.entries()[0].text, 'one two three');

  const late = new Transcript();
  late.apply(chunk(3, { offset: 4, text: 'b', done: true }));
  assert.equal(late.applyBlock(chunk(3, { offset: 4, text: 'b', done: true })).status, 'duplicate');
  assert.equal(late.entries()[0].text, '');
  assert.deepEqual(late.applyBlock(chunk(2, { offset: 0, text: 'aaaa', done: false })), { status: 'added' });
  assert.equal(late.entries()[0].text, 'aaaab');
  assert.equal(late.isFirstOfStream(chunk(2, {})), true);
  assert.equal(late.isFirstOfStream(chunk(3, {})), false);
});

test('snapshot-only streams work as before', () => {
  const t = new Transcript();
  for (const [seq, text, done] of [
    [1, 'Hel', false],
    [2, 'Hello', false],
    [3, 'Hello!', true],
  ])
    assert.equal(t.apply(chunk(seq, { text, done })), true);
  assert.deepEqual(t.entries(), [{ type: 'text', seq: 3, ts: 1, id: 'm', text: 'Hello!', done: true }]);
  assert.deepEqual(t.gaps(), []);
});

test('chunks arriving in any order fold in seq order: exact once all are held, a prefix before', () => {
  const next = rng(23);
  for (let round = 0; round < 200; round++) {
    const pieces = randomAppends(TEXT, next).map((p, i) => chunk(i + 1, p));
    for (let i = pieces.length - 1; i > 0; i--) {
      const j = next(i + 1);
      [pieces[i], pieces[j]] = [pieces[j], pieces[i]];
    }
    const t = new Transcript();
    for (const p of pieces) {
      t.apply(p);
      assert.ok(TEXT.startsWith(t.entries()[0].text), `round ${round}`);
    }
    assert.equal(t.entries()[0].text, TEXT);
    assert.deepEqual(t.gaps(), []);
  }
});
