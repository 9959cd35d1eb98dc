// Small fixes from issue 21's "smaller" list, pinned on their pure parts: a new file's
// diff has no stray "+" line, an Android phone pairs under its own name, a reused
// pairing link says what to do. Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { diffLines } from '../src/render.js';
import { deviceName, pairingFailure } from '../src/pairing.js';

test('a text ending in a newline has no empty last diff line', () => {
  assert.deepEqual(diffLines('a\nb\n'), ['a', 'b']);
  assert.deepEqual(diffLines('a\nb'), ['a', 'b']);
  assert.deepEqual(diffLines(''), ['']);
  assert.deepEqual(diffLines('\n'), ['']);
});

test('an Android phone pairs as Android, not Linux', () => {
  const android = 'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/148.0.0.0 Mobile Safari/537.36';
  assert.equal(deviceName(android), 'Web app (Android)');
  assert.equal(deviceName('Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X)'), 'Web app (iPhone)');
  assert.equal(deviceName('Mozilla/5.0 (X11; Linux x86_64)'), 'Web app (Linux)');
  assert.equal(deviceName(''), 'Web app');
});

test('a reused pairing link says to run terminull pair again', () => {
  const said = pairingFailure(403, 'pairing refused: no open pairing offer has that id');
  assert.match(said, /Run `terminull pair` on the computer again/);
  assert.equal(pairingFailure(500, 'boom'), 'the bridge refused (500): boom');
});
