// The data channel's framing (src/rtc.js) is the bridge's (protocol/src/rtc.rs
// `pieces` / `Reassembly`): flagged pieces of at most 32 KiB, joined back bounded; and
// ChannelSocket looks like the WebSocket openLink uses.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PIECE, pieces, Reassembly, ChannelSocket } from '../src/rtc.js';

test('a frame is split into flagged pieces and joined back', () => {
  const frame = 'x'.repeat(PIECE * 2 + 5);
  const parts = pieces(frame);
  assert.equal(parts.length, 3);
  assert.ok(parts.every((p) => p.length <= PIECE));
  assert.deepEqual(parts.map((p) => p[0]), [0, 0, 1]);
  const r = new Reassembly();
  assert.equal(r.push(parts[0]), null);
  assert.equal(r.push(parts[1]), null);
  assert.equal(r.push(parts[2]), frame);
  assert.deepEqual([...pieces('')[0]], [1]);
  // UTF-8 split inside a character is joined whole.
  const accents = 'é'.repeat(PIECE);
  const joined = new Reassembly(1 << 20);
  let out = null;
  for (const p of pieces(accents)) out = joined.push(p) ?? out;
  assert.equal(out, accents);
});

test('a frame over the limit, a bad flag, an empty message or bad UTF-8 is refused', () => {
  const r = new Reassembly(3);
  assert.equal(r.push(Uint8Array.of(0, 97, 98)), null);
  assert.throws(() => r.push(Uint8Array.of(1, 99, 100)), /longer than 3 bytes/);
  assert.throws(() => new Reassembly(3).push(Uint8Array.of(7, 97)), /flag byte of 7/);
  assert.throws(() => new Reassembly(3).push(new Uint8Array(0)), /no flag byte/);
  assert.throws(() => new Reassembly(3).push(Uint8Array.of(1, 0xff)), /not UTF-8/);
});

test('a channel socket keeps early frames for onmessage, sends pieces and closes once', () => {
  const sent = [];
  const channel = { send: (p) => sent.push(p), close() {} };
  let gone = 0;
  const socket = new ChannelSocket(channel, () => gone++);
  for (const p of pieces('{"type":"challenge"}')) channel.onmessage({ data: p.buffer });
  const got = [];
  socket.onmessage = (ev) => got.push(ev.data);
  assert.deepEqual(got, ['{"type":"challenge"}']);
  socket.send('y'.repeat(PIECE));
  assert.equal(sent.length, 2);
  const closes = [];
  socket.onclose = (ev) => closes.push(ev.reason);
  channel.onclose();
  socket.close();
  assert.deepEqual(closes, ['the data channel closed']);
  assert.equal(gone, 1);
  // A bad piece closes the socket, naming why.
  const bad = new ChannelSocket({ send() {}, close() {} });
  const reasons = [];
  bad.onclose = (ev) => reasons.push(ev.reason);
  bad.channel.onmessage({ data: Uint8Array.of(9).buffer });
  assert.match(reasons[0], /flag byte of 9/);
});
