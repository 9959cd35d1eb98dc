// The browser crypto module reproduces docs/vectors/envelope.json byte for byte.
// Run: node --test web/test/   (from the repository root) or `npm test` in web/.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as c from '../src/crypto.js';
import * as h from '../src/handshake.js';

const V = JSON.parse(readFileSync(fileURLToPath(new URL('../../docs/vectors/envelope.json', import.meta.url)), 'utf8'));

const bridge = c.identityFromBytes(c.fromHex(V.bridge.ed25519_seed_hex), c.fromHex(V.bridge.x25519_secret_hex));
const device = c.identityFromBytes(c.fromHex(V.device.ed25519_seed_hex), c.fromHex(V.device.x25519_secret_hex));
const bridgeId = V.bridge.bridge_id;
const deviceId = V.device.device_id;

test('transcript framing', () => {
  assert.deepEqual([...c.transcript(['ab', ''])], [0, 0, 0, 2, 0x61, 0x62, 0, 0, 0, 0]);
});

test('encodings round-trip and refuse malformed input', () => {
  for (let n = 0; n < 40; n++) {
    const bytes = c.randomBytes(n);
    assert.deepEqual(c.fromB64(c.b64(bytes)), bytes);
    assert.deepEqual(c.fromB64url(c.b64url(bytes)), bytes);
    assert.equal(c.b64(bytes), Buffer.from(bytes).toString('base64'));
    assert.equal(c.b64url(bytes), Buffer.from(bytes).toString('base64url'));
  }
  assert.deepEqual(c.fromB64url('AQ=='), Uint8Array.of(1), 'padding tolerated in base64url');
  assert.throws(() => c.fromB64('***'), /not valid base64/);
  assert.throws(() => c.fromB64('AQ'), /not valid base64/, 'standard base64 needs its padding');
  assert.throws(() => c.fromB64urlN('AAAA', 32, 'ed25519'), /must be 32 bytes, got 3/);
  assert.throws(() => c.fromB64url(42), /not valid base64url/);
});

test('keys and ids from the fixed secrets', () => {
  assert.deepEqual(c.publicKeysWire(bridge), V.bridge.keys);
  assert.deepEqual(c.publicKeysWire(device), V.device.keys);
  assert.equal(c.bridgeIdOf(bridge.ed25519Public), bridgeId);
  assert.equal(c.deviceIdOf(device.ed25519Public), deviceId);
  const secrets = c.identitySecrets(device);
  assert.deepEqual(c.publicKeysWire(c.identityFromSecrets(secrets)), V.device.keys);
});

test('pairing: link, pairing id, request MAC and signature, response, short code', () => {
  const P = V.pairing;
  const link = c.parsePairingLink(P.link);
  assert.equal(link.bridgeId, bridgeId);
  assert.equal(link.relay, 'wss://relay.example');
  assert.equal(link.lan, null);
  assert.equal(c.hex(link.secret), P.secret_hex);
  assert.equal(link.expiresAt, 1767225600);
  assert.equal(c.pairingLinkUrl(link, 'https://relay.example'), P.link);
  assert.equal(c.pairingId(link.secret), P.pairing_id);

  const { request, pending } = c.pairRequest(link, device, 'phone', c.fromHex(P.device_nonce_hex));
  assert.deepEqual(request, P.request);

  const paired = c.finishPairing(pending, P.response);
  assert.equal(paired.shortCode, P.short_code);
  assert.equal(paired.bridgeId, bridgeId);

  // A tampered answer, another secret, a bad signature: refused.
  assert.throws(() => c.finishPairing(pending, { ...P.response, bridge_nonce: c.b64url(new Uint8Array(16)) }), /MAC/);
  const other = c.pairRequest({ ...link, secret: new Uint8Array(32) }, device, 'phone', c.fromHex(P.device_nonce_hex));
  assert.throws(() => c.finishPairing(other.pending, P.response), /MAC/);
  const badSig = c.fromB64url(P.response.sig);
  badSig[0] ^= 1;
  assert.throws(() => c.finishPairing(pending, { ...P.response, sig: c.b64url(badSig) }), /signature/);
  assert.throws(() => c.finishPairing(pending, { ...P.response, device_id: 'dev_x' }), /another bridge or device/);

  // The link is checked.
  assert.throws(() => c.parsePairingLink(P.link.replace('v=1', 'v=2')), /version/);
  assert.throws(() => c.parsePairingLink(P.link.replace('b=brg_bidgb52ljguith2f', 'b=brg_aaaaaaaaaaaaaaaa')), /does not match/);
  assert.throws(() => c.parsePairingLink('https://x/pair'), /no `v` field|no `=`/);
  const withLan = c.parsePairingLink(P.link + '&l=' + c.percentEncode('http://192.168.1.20:8478'));
  assert.equal(withLan.lan, 'http://192.168.1.20:8478');
});

test('relay authentication signatures', () => {
  const R = V.relay_auth;
  const challenge = c.fromHex(R.challenge_hex);
  const bridgeSig = c.sign(bridge, c.relayAuthBytes('bridge', bridgeId, bridgeId, challenge));
  assert.equal(c.b64(bridgeSig), R.bridge_sig);
  const auth = c.authFrame(device, bridgeId, c.b64url(challenge));
  assert.deepEqual(auth, { type: 'auth', bridge_id: bridgeId, device_id: deviceId, sig: R.device_sig, protocol_version: 3 });
  assert.ok(c.verify(device.ed25519Public, c.relayAuthBytes('device', deviceId, bridgeId, challenge), c.fromB64(R.device_sig)));
});

test('link handshake (v3): signed bytes, the four DH results, the hash and the keys', () => {
  const H = V.link_handshake;
  assert.equal(H.protocol_version, c.PROTOCOL_VERSION);
  const clientEph = h.ephemeralKey(c.fromHex(H.client_ephemeral_secret_hex));
  const bridgeEph = h.ephemeralKey(c.fromHex(H.bridge_ephemeral_secret_hex));
  assert.equal(c.b64url(clientEph.public), H.client_ephemeral);
  assert.equal(c.b64url(bridgeEph.public), H.bridge_ephemeral);
  const fields = {
    bridgeId,
    deviceId,
    clientNonce: c.fromHex(H.client_nonce_hex),
    clientEphemeral: clientEph.public,
    bridgeNonce: c.fromHex(H.bridge_nonce_hex),
    bridgeEphemeral: bridgeEph.public,
  };
  assert.equal(c.hex(h.linkHelloBytes(bridgeId, deviceId, fields.clientNonce, fields.clientEphemeral)), H.hello_signed_bytes_hex);
  assert.equal(c.hex(h.linkAcceptBytes(fields)), H.accept_signed_bytes_hex);
  assert.equal(c.hex(h.handshakeHash(fields)), H.handshake_hash_hex);
  const dh = {
    ee: c.agree(clientEph.secret, bridgeEph.public),
    es: c.agree(clientEph.secret, bridge.x25519Public),
    se: c.agree(device.x25519Secret, bridgeEph.public),
    ss: c.agree(device.x25519Secret, bridge.x25519Public),
  };
  assert.equal(c.hex(dh.ee), H.dh_ee_hex);
  assert.equal(c.hex(c.agree(bridgeEph.secret, clientEph.public)), H.dh_ee_hex, 'ee from the bridge side');
  assert.equal(c.hex(dh.es), H.dh_es_hex);
  assert.equal(c.hex(c.agree(bridge.x25519Secret, clientEph.public)), H.dh_es_hex, 'es from the bridge side');
  assert.equal(c.hex(dh.se), H.dh_se_hex);
  assert.equal(c.hex(dh.ss), H.dh_ss_hex);
  const keys = h.linkKeys(dh, fields);
  assert.equal(c.hex(keys.appToBridge), H.app_to_bridge_key_hex);
  assert.equal(c.hex(keys.bridgeToApp), H.bridge_to_app_key_hex);
  // The bridge's side, from the same fixed nonce and ephemeral key, answers with the published accept.
  const { accept, keys: bridgeKeys } = h.acceptHello(
    bridge,
    { ed25519: device.ed25519Public, x25519: device.x25519Public },
    V.link.link_hello,
    fields.bridgeNonce,
    h.ephemeralKey(c.fromHex(H.bridge_ephemeral_secret_hex)),
  );
  assert.deepEqual(accept, V.link.link_accept);
  assert.equal(c.hex(bridgeKeys.appToBridge), H.app_to_bridge_key_hex);
});

test('link handshake: without an ephemeral secret, the stolen identities do not give the keys', () => {
  const H = V.link_handshake;
  const fields = {
    bridgeId,
    deviceId,
    clientNonce: c.fromHex(H.client_nonce_hex),
    clientEphemeral: c.fromB64url(H.client_ephemeral),
    bridgeNonce: c.fromHex(H.bridge_nonce_hex),
    bridgeEphemeral: c.fromB64url(H.bridge_ephemeral),
  };
  const known = {
    es: c.agree(bridge.x25519Secret, fields.clientEphemeral),
    se: c.agree(device.x25519Secret, fields.bridgeEphemeral),
    ss: c.agree(bridge.x25519Secret, device.x25519Public),
  };
  for (const ee of [new Uint8Array(32), known.ss, known.es, known.se, c.agree(device.x25519Secret, fields.clientEphemeral)]) {
    assert.notEqual(c.hex(h.linkKeys({ ee, ...known }, fields).appToBridge), H.app_to_bridge_key_hex);
  }
});

test('link: hello, accept, keys, control seal and signature, reply open', () => {
  const L = V.link;
  const H = V.link_handshake;
  const clientNonce = c.fromB64url(L.link_hello.client_nonce);
  assert.deepEqual(c.hex(clientNonce), '11'.repeat(16));
  const started = h.startLink(device, bridgeId, clientNonce, h.ephemeralKey(c.fromHex(H.client_ephemeral_secret_hex)));
  assert.deepEqual(started.hello, L.link_hello);

  const shared = c.agree(device.x25519Secret, bridge.x25519Public);
  assert.equal(c.hex(shared), L.static_shared_hex);
  assert.equal(c.hex(c.agree(bridge.x25519Secret, device.x25519Public)), L.static_shared_hex);

  // An accept with another nonce (as one recorded from an earlier link) is refused.
  const again = h.startLink(device, bridgeId, clientNonce, h.ephemeralKey(c.fromHex(H.client_ephemeral_secret_hex)));
  assert.throws(
    () => h.finishLink(device, V.bridge.keys, again.pending, { ...L.link_accept, bridge_nonce: c.b64url(new Uint8Array(16)) }),
    /signature over link_accept/,
  );
  const link = h.finishLink(device, V.bridge.keys, started.pending, L.link_accept);
  assert.ok(started.pending.ephemeral.secret.every((b) => b === 0), 'the ephemeral secret is zeroed');
  assert.equal(c.hex(link.keys.appToBridge), L.app_to_bridge_key_hex);
  assert.equal(c.hex(link.keys.bridgeToApp), L.bridge_to_app_key_hex);

  const control = c.sealControl(link.sealer, device, bridgeId, null, null, L.control_plaintext);
  assert.deepEqual(control, L.control);
  assert.ok(c.verifyControl(device.ed25519Public, bridgeId, control));
  assert.ok(!c.verifyControl(device.ed25519Public, 'brg_other', control), 'bound to the bridge');
  // The bridge opens it.
  const bridgeOpener = new c.Opener(link.keys.appToBridge, 'link');
  const opened = bridgeOpener.open(c.controlAad(bridgeId, deviceId, null), c.fromB64(control.body));
  assert.equal(c.fromUtf8(opened), L.control_plaintext);

  // The reply.
  const replyBytes = c.openReply(link.opener, bridgeId, deviceId, L.reply_body);
  assert.equal(c.fromUtf8(replyBytes), L.reply_plaintext);
  const bridgeSealer = new c.Sealer(link.keys.bridgeToApp, 'link');
  assert.equal(c.sealReply(bridgeSealer, bridgeId, deviceId, L.reply_plaintext), L.reply_body);
  // Replayed: refused by the counter.
  assert.throws(() => c.openReply(link.opener, bridgeId, deviceId, L.reply_body), /counter 1 is not above the last accepted 1/);
  // Replies arrive whole: one dropped on the way fails the next.
  const fresh = new c.Opener(link.keys.bridgeToApp, 'link');
  const skipped = new c.Sealer(link.keys.bridgeToApp, 'link', 2n);
  const second = c.sealReply(skipped, bridgeId, deviceId, '{}');
  assert.throws(() => c.openReply(fresh, bridgeId, deviceId, second), (e) => e instanceof c.MissingError && /counter 2 arrived where 1 was due/.test(e.message));
  assert.equal(fresh.last, 0n, 'a refusal does not move the counter');
});

test('session keys, block seal, signature and open', () => {
  const S = V.session;
  const app = c.appSessionKey(c.fromHex(S.app_secret_hex));
  assert.equal(c.b64url(app.public), S.app_pubkey);
  const reply = JSON.parse(V.link.reply_plaintext);
  assert.equal(c.hex(c.fromB64url(reply.attach.attach_nonce)), S.attach_nonce_hex);
  const shared = c.agree(app.secret, bridge.x25519Public);
  assert.equal(c.hex(shared), S.shared_secret_hex);
  const keys = c.sessionKeys(shared, S.session_id, app.public, c.fromHex(S.attach_nonce_hex));
  assert.equal(c.hex(keys.appToBridge), S.app_to_bridge_key_hex);
  assert.equal(c.hex(keys.bridgeToApp), S.bridge_to_app_key_hex);

  const sealed = c.sealBlock(new c.Sealer(keys.bridgeToApp, 'block'), S.session_id, 'text', false, 1767225611.25, S.block_plaintext);
  assert.deepEqual(sealed, S.block);
  assert.equal(S.block.sig, undefined, 'a block carries no signature');

  const opener = new c.Opener(keys.bridgeToApp, 'block');
  // Relabelled / flipped / other timestamp: the AAD refuses, and the counter does not move.
  assert.throws(() => c.openBlock(opener, { ...S.block, block_type: 'error' }), /authentication failed/);
  assert.throws(() => c.openBlock(opener, { ...S.block, replay: true }), /authentication failed/);
  assert.throws(() => c.openBlock(opener, { ...S.block, server_ts: 1767225611.5 }), /authentication failed/);
  const plain = c.openBlock(opener, S.block);
  assert.equal(c.fromUtf8(plain), S.block_plaintext);
  assert.throws(() => c.openBlock(opener, S.block), /replayed or reordered/);
  // Malformed input is an error, not a crash.
  assert.throws(() => c.openBlock(opener, { ...S.block, enc: 'AAAA' }), /at least 28 bytes/);
  assert.throws(() => c.openBlock(opener, null), /malformed/);
});

/**
 * What the bridge signs for a `batch`, written here from docs/encryption.md#batches
 * alone (a device never sees a batch, so the app does not ship it):
 * transcript("terminull/v2 batch", bridge_id, u64be(conn), u32be(n), then per block
 * session_id, block_type, u8(replay), f64be(server_ts), SHA-256(enc)).
 */
function batchSigBytes(bridgeId, conn, blocks) {
  const c64 = new Uint8Array(8);
  new DataView(c64.buffer).setBigUint64(0, BigInt(conn), false);
  const n = new Uint8Array(4);
  new DataView(n.buffer).setUint32(0, blocks.length, false);
  const ts = (x) => {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, x, false);
    return b;
  };
  const parts = ['terminull/v2 batch', bridgeId, c64, n];
  for (const b of blocks) {
    parts.push(b.session_id, b.block_type, new Uint8Array([b.replay ? 1 : 0]), ts(b.server_ts), c.sha256Bytes(c.utf8(b.enc)));
  }
  return c.transcript(parts);
}

function verifyBatch(bridgeEd25519, bridgeId, batch) {
  return c.verify(bridgeEd25519, batchSigBytes(bridgeId, batch.conn, batch.blocks), c.fromB64(batch.sig, 'sig'));
}

test('a batch: its signed bytes and signature, and its blocks as the device receives them', () => {
  const S = V.session;
  const B = V.batch;
  const app = c.appSessionKey(c.fromHex(S.app_secret_hex));
  const shared = c.agree(app.secret, bridge.x25519Public);
  const keys = c.sessionKeys(shared, S.session_id, app.public, c.fromHex(S.attach_nonce_hex));
  const frameBlocks = B.frame.blocks;
  assert.equal(c.hex(batchSigBytes(bridgeId, B.conn, frameBlocks)), B.signed_bytes_hex);
  assert.equal(c.b64(c.sign(bridge, batchSigBytes(bridgeId, B.conn, frameBlocks))), B.frame.sig);
  assert.ok(verifyBatch(bridge.ed25519Public, bridgeId, B.frame));
  assert.ok(!verifyBatch(bridge.ed25519Public, bridgeId, { ...B.frame, conn: 8 }), 'bound to the connection');
  assert.ok(!verifyBatch(bridge.ed25519Public, bridgeId, { ...B.frame, blocks: [...frameBlocks].reverse() }), 'reordered');
  assert.ok(!verifyBatch(bridge.ed25519Public, bridgeId, { ...B.frame, blocks: frameBlocks.slice(1) }), 'a block dropped');
  // Forwarded: each block as its own frame, exactly the batch's text behind "type":"block".
  assert.deepEqual(B.forwarded, frameBlocks.map((b) => ({ type: 'block', ...b })));
  // They follow the session's first block (counter 1): counters 2 and 3.
  const opener = new c.Opener(keys.bridgeToApp, 'block');
  c.openBlock(opener, S.block);
  assert.throws(() => c.openBlock(opener, B.forwarded[1]), (e) => e instanceof c.MissingError, 'the second without the first');
  assert.deepEqual(B.forwarded.map((f) => c.fromUtf8(c.openBlock(opener, f))), B.block_plaintexts);
});

test('push key and payload', () => {
  const P = V.push;
  const shared = c.agree(device.x25519Secret, bridge.x25519Public);
  const key = c.pushKey(shared, bridgeId, deviceId);
  assert.equal(c.hex(key), P.key_hex);
  const frame = { type: 'push', device_id: deviceId, kind: P.kind, payload: P.payload };
  const opener = new c.Opener(key, 'push');
  assert.equal(c.fromUtf8(c.openPush(opener, bridgeId, deviceId, frame)), P.plaintext);
  assert.equal(opener.last, BigInt(P.counter));
  const sealer = new c.Sealer(key, 'push', BigInt(P.counter));
  assert.equal(c.b64(sealer.seal(c.pushAad(bridgeId, deviceId, P.kind), c.utf8(P.plaintext))), P.payload);
  assert.throws(() => c.openPush(new c.Opener(key, 'push'), bridgeId, deviceId, { ...frame, kind: 'error' }), /authentication failed/);
  assert.throws(() => c.openPush(opener, bridgeId, deviceId, frame), /replayed/);
});

test('a low-order x25519 key is refused', () => {
  assert.throws(() => c.agree(device.x25519Secret, new Uint8Array(32)), /not a valid public key/);
});
