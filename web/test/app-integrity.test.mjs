// The service worker's code check (src/sw/integrity.js) reproduces
// docs/vectors/app-signature.json, which the Rust side (protocol/src/crypto/app_code.rs)
// computes, and refuses every altered or foreign signature.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as c from '../src/crypto.js';
import { SHELL_PATHS, shellDigest, signatureBytes, checkSignature } from '../src/sw/integrity.js';

const V = JSON.parse(readFileSync(fileURLToPath(new URL('../../docs/vectors/app-signature.json', import.meta.url)), 'utf8'));
const files = new Map(V.files.map((f) => [f.path, c.utf8(f.utf8)]));
const pins = [{ bridgeId: V.signature.bridge_id, ed25519: V.bridge_keys.ed25519 }];

test('the shell paths and the digest are the Rust side’s', () => {
  assert.deepEqual(V.files.map((f) => f.path), SHELL_PATHS);
  const parts = ['terminull/v1 app-shell'];
  for (const p of SHELL_PATHS) parts.push(p, files.get(p));
  assert.equal(c.hex(c.transcript(parts)), V.transcript_sha256_input_hex);
  assert.equal(c.hex(shellDigest(files)), V.signature.digest);
  assert.equal(c.hex(signatureBytes(V.signature.bridge_id, shellDigest(files))), V.signed_bytes_hex);
});

test('the vector’s key and signature are the Rust side’s', () => {
  const bridge = c.identityFromBytes(c.fromHex(V.bridge_ed25519_seed_hex), new Uint8Array(32).fill(7));
  assert.deepEqual(c.publicKeysWire(bridge), V.bridge_keys);
  assert.equal(c.bridgeIdOf(bridge.ed25519Public), V.signature.bridge_id);
  assert.equal(c.b64(c.sign(bridge, c.fromHex(V.signed_bytes_hex))), V.signature.sig);
});

test('the committed signature verifies under the paired key', () => {
  assert.deepEqual(checkSignature(pins, V.signature, shellDigest(files)), { ok: true, bridgeId: V.signature.bridge_id });
});

test('altered code, a foreign bridge, a forged or malformed signature are refused', () => {
  const digest = shellDigest(files);
  const altered = new Map(files);
  altered.set('/app.js', c.utf8('contents of /app.js\n;steal()'));
  assert.equal(checkSignature(pins, V.signature, shellDigest(altered)).ok, false, 'altered app.js');
  // A relay signing the altered code with its own key, under its own id: not a paired bridge.
  const relay = c.generateIdentity();
  const relayId = c.bridgeIdOf(relay.ed25519Public);
  const forged = { bridge_id: relayId, digest: c.hex(shellDigest(altered)), sig: c.b64(c.sign(relay, signatureBytes(relayId, shellDigest(altered)))) };
  assert.match(checkSignature(pins, forged, shellDigest(altered)).reason, /not a paired computer/);
  // The same, relabelled as the paired bridge.
  assert.match(checkSignature(pins, { ...forged, bridge_id: V.signature.bridge_id }, shellDigest(altered)).reason, /does not verify/);
  // The genuine signature, relabelled to the altered digest.
  assert.match(checkSignature(pins, { ...V.signature, digest: c.hex(shellDigest(altered)) }, shellDigest(altered)).reason, /does not verify/);
  // A pin whose key is not that bridge's.
  assert.match(checkSignature([{ ...pins[0], ed25519: c.b64url(relay.ed25519Public) }], V.signature, digest).reason, /not that bridge/);
  for (const bad of [null, 42, 'x', {}, { bridge_id: 1 }, { ...V.signature, sig: '***' }, { ...V.signature, sig: c.b64(new Uint8Array(64)) }]) {
    assert.equal(checkSignature(pins, bad, digest).ok, false, JSON.stringify(bad));
  }
  assert.throws(() => shellDigest(new Map()), /`\/` is missing/);
});
