// The link handshake, protocol version 3 (docs/encryption.md#the-link-control-messages-and-replies
// and #forward-secrecy; protocol/src/crypto/handshake.rs): each side adds a fresh
// nonce and a fresh ephemeral X25519 key signed with its long-term Ed25519 key, and
// the link keys come from four X25519 results (ee, es, se, ss) and the handshake
// hash. The ephemeral secret lives only in the pending handshake and is overwritten
// with zeros once the keys are derived (best effort in JavaScript: no copy is made
// and nothing stores it).

import { x25519 } from '@noble/curves/ed25519.js';
import * as c from './crypto.js';

const HELLO_LABEL = 'terminull/v3 link-hello';
const ACCEPT_LABEL = 'terminull/v3 link-accept';
const HASH_LABEL = 'terminull/v3 link-handshake';
const KEY_LABEL = 'terminull/v3 link-key';

/** The protocol version as a transcript part: 4 bytes, big-endian. */
function versionPart() {
  const v = new Uint8Array(4);
  new DataView(v.buffer).setUint32(0, c.PROTOCOL_VERSION, false);
  return v;
}

/** What the device signs: T(label, u32be(version), bridge_id, device_id, client_nonce, client_ephemeral). */
export function linkHelloBytes(bridgeId, deviceId, clientNonce, clientEphemeral) {
  return c.transcript([HELLO_LABEL, versionPart(), bridgeId, deviceId, clientNonce, clientEphemeral]);
}

function handshakeParts(label, f) {
  return [label, versionPart(), f.bridgeId, f.deviceId, f.clientNonce, f.clientEphemeral, f.bridgeNonce, f.bridgeEphemeral];
}

/** What the bridge signs: both nonces and both ephemeral keys. */
export function linkAcceptBytes(fields) {
  return c.transcript(handshakeParts(ACCEPT_LABEL, fields));
}

/** The handshake hash (the HKDF salt of the link keys). */
export function handshakeHash(fields) {
  return c.sha256Bytes(c.transcript(handshakeParts(HASH_LABEL, fields)));
}

/** Link keys from the four DH results `{ee, es, se, ss}` and the handshake's fields. */
export function linkKeys(dh, fields) {
  const ikm = c.concat(dh.ee, dh.es, dh.se, dh.ss);
  const salt = handshakeHash(fields);
  const info = (d) => c.transcript([KEY_LABEL, d, fields.bridgeId, fields.deviceId]);
  const keys = { appToBridge: c.hkdfSha256(salt, ikm, info('app->bridge')), bridgeToApp: c.hkdfSha256(salt, ikm, info('bridge->app')) };
  ikm.fill(0);
  return keys;
}

/** A fresh ephemeral key pair for one link (`secret` fixed only by the test vectors). */
export function ephemeralKey(secret = c.randomBytes(32)) {
  const s = Uint8Array.from(secret);
  return { secret: s, public: x25519.getPublicKey(s) };
}

/**
 * Starts a link: `{hello, pending}` — the `link_hello` frame to send and the state
 * that `finishLink` consumes.
 */
export function startLink(identity, bridgeId, clientNonce = c.randomBytes(16), ephemeral = ephemeralKey()) {
  const deviceId = c.deviceIdOf(identity.ed25519Public);
  const hello = {
    type: 'link_hello',
    device_id: deviceId,
    client_nonce: c.b64url(clientNonce),
    client_ephemeral: c.b64url(ephemeral.public),
    sig: c.b64(c.sign(identity, linkHelloBytes(bridgeId, deviceId, clientNonce, ephemeral.public))),
  };
  return { hello, pending: { bridgeId, deviceId, clientNonce, ephemeral } };
}

/**
 * Checks a `link_accept` with the bridge's pinned keys — it must sign this hello's
 * nonce and ephemeral key, so one recorded from another link is refused — and
 * derives the link: `{keys, sealer, opener, pushKey}`. Zeroes the ephemeral secret.
 */
export function finishLink(identity, bridgeKeys, pending, accept) {
  const eph = pending.ephemeral;
  try {
    if (!accept || accept.device_id !== pending.deviceId) throw new c.CryptoError('link_accept: for another device');
    const bridge = c.publicKeysFromWire(bridgeKeys);
    const fields = {
      bridgeId: pending.bridgeId,
      deviceId: pending.deviceId,
      clientNonce: pending.clientNonce,
      clientEphemeral: eph.public,
      bridgeNonce: c.fromB64urlN(accept.bridge_nonce, 16, 'bridge_nonce'),
      bridgeEphemeral: c.fromB64urlN(accept.bridge_ephemeral, 32, 'bridge_ephemeral'),
    };
    if (!c.verify(bridge.ed25519, linkAcceptBytes(fields), c.fromB64(accept.sig, 'sig'))) {
      throw new c.CryptoError('the signature over link_accept does not verify');
    }
    const dh = {
      ee: c.agree(eph.secret, fields.bridgeEphemeral, 'bridge_ephemeral'),
      es: c.agree(eph.secret, bridge.x25519, 'bridge x25519'),
      se: c.agree(identity.x25519Secret, fields.bridgeEphemeral, 'bridge_ephemeral'),
      ss: c.agree(identity.x25519Secret, bridge.x25519, 'bridge x25519'),
    };
    const keys = linkKeys(dh, fields);
    const pushKey = c.pushKey(dh.ss, pending.bridgeId, pending.deviceId);
    for (const v of Object.values(dh)) v.fill(0);
    return {
      keys,
      sealer: new c.Sealer(keys.appToBridge, 'link'),
      opener: new c.Opener(keys.bridgeToApp, 'link'),
      pushKey,
    };
  } finally {
    eph.secret.fill(0);
  }
}

/**
 * The bridge's side (tests and the fake bridge): checks a `link_hello` from
 * `device` (`{ed25519, x25519}` bytes) and returns `{accept, keys}`.
 */
export function acceptHello(bridge, device, hello, bridgeNonce = c.randomBytes(16), ephemeral = ephemeralKey(), opts = {}) {
  const bridgeId = c.bridgeIdOf(bridge.ed25519Public);
  const deviceId = c.deviceIdOf(device.ed25519);
  if (!hello || hello.device_id !== deviceId) throw new c.CryptoError('link_hello: for another device');
  const clientNonce = c.fromB64urlN(hello.client_nonce, 16, 'client_nonce');
  const clientEphemeral = c.fromB64urlN(hello.client_ephemeral, 32, 'client_ephemeral');
  if (!c.verify(device.ed25519, linkHelloBytes(bridgeId, deviceId, clientNonce, clientEphemeral), c.fromB64(hello.sig, 'sig'))) {
    throw new c.CryptoError('the signature over link_hello does not verify');
  }
  const fields = { bridgeId, deviceId, clientNonce, clientEphemeral, bridgeNonce, bridgeEphemeral: ephemeral.public };
  const dh = {
    ee: c.agree(ephemeral.secret, clientEphemeral, 'client_ephemeral'),
    es: c.agree(bridge.x25519Secret, clientEphemeral, 'client_ephemeral'),
    se: c.agree(ephemeral.secret, device.x25519, 'device x25519'),
    ss: c.agree(bridge.x25519Secret, device.x25519, 'device x25519'),
  };
  const keys = linkKeys(dh, fields);
  ephemeral.secret.fill(0);
  const signer = opts.signer ?? bridge;
  const accept = {
    type: 'link_accept',
    device_id: deviceId,
    bridge_nonce: c.b64url(bridgeNonce),
    bridge_ephemeral: c.b64url(ephemeral.public),
    sig: c.b64(c.sign(signer, linkAcceptBytes(fields))),
  };
  return { accept, keys };
}
