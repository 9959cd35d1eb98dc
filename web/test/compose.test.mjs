// The composer's attachment rules (web/src/attach.js): which kinds an agent takes,
// the per-message limits and their messages, base64 sizes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { acceptedKinds, refusal, overBudget, mimeOf, toBase64, base64Bytes, formatBytes, MAX_ATTACHMENTS, MAX_TOTAL_BYTES } from '../src/attach.js';

test('an agent that declares no images is offered no image attachment, and says so by name', () => {
  const none = acceptedKinds({ cap_images: false, cap_documents: false });
  assert.deepEqual(none, { images: false, documents: false });
  assert.match(refusal([], { name: 'cat.png', type: 'image/png' }, none), /takes no images: “cat.png”/);
  const images = acceptedKinds({ cap_images: true, cap_documents: false });
  assert.equal(refusal([], { name: 'cat.png', type: 'image/png' }, images), null);
  assert.match(refusal([], { name: 'spec.pdf', type: 'application/pdf' }, images), /no files other than images: “spec.pdf”/);
  assert.deepEqual(acceptedKinds(null), { images: false, documents: false });
});

test('a message holds at most four attachments and 512 KiB of them; over that the message names the file and the limit', () => {
  const kinds = { images: true, documents: true };
  const held = Array.from({ length: MAX_ATTACHMENTS }, (_, i) => ({ name: `${i}.png`, size: 10 }));
  assert.match(refusal(held, { name: 'five.png', type: 'image/png' }, kinds), /At most 4 attachments per message: “five.png”/);
  assert.equal(MAX_TOTAL_BYTES, 512 * 1024);
  assert.equal(overBudget('big.pdf', 2 * 1024 * 1024, MAX_TOTAL_BYTES), '“big.pdf” is 2.0 MB; a message carries at most 512 KB of attachments.');
  assert.match(overBudget('b.pdf', 300 * 1024, 200 * 1024), /\(200 KB left\)/);
});

test('a file without a type gets one from its name', () => {
  assert.equal(mimeOf({ name: 'notes.md', type: '' }), 'text/plain');
  assert.equal(mimeOf({ name: 'a.PDF', type: '' }), 'application/pdf');
  assert.equal(mimeOf({ name: 'x.bin', type: '' }), 'application/octet-stream');
  assert.equal(mimeOf({ name: 'x', type: 'Image/PNG' }), 'image/png');
});

test('base64 of any length round-trips and its decoded size is known', () => {
  for (const n of [0, 1, 2, 3, 100, 70000]) {
    const bytes = new Uint8Array(n).map((_, i) => (i * 7) & 255);
    const b64 = toBase64(bytes);
    assert.deepEqual(new Uint8Array(Buffer.from(b64, 'base64')), bytes);
    assert.equal(base64Bytes(b64), n);
  }
  assert.equal(formatBytes(12), '12 bytes');
  assert.equal(formatBytes(340 * 1024), '340 KB');
});
