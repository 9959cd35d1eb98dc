// The app shell's digest and a bridge's signature over it, exactly as
// protocol/src/crypto/app_code.rs computes them (docs/web-client.md#app-code-integrity;
// docs/vectors/app-signature.json is checked by both). Pure: no DOM, no worker API,
// so Node tests it.
//
//   digest = SHA-256(transcript("terminull/v1 app-shell", path₁, bytes₁, …)) over SHELL_PATHS in order
//   sig    = Ed25519(bridge identity, transcript("terminull/v1 app-signature", bridge_id, digest))

import * as c from '../crypto.js';

/** The shell's files in digest order (also what the worker precaches and serves). */
export const SHELL_PATHS = [
  '/',
  '/app.js',
  '/style.css',
  '/manifest.webmanifest',
  '/icons/icon-192.png',
  '/icons/icon-512.png',
  '/icons/icon-maskable-512.png',
  '/sw.js',
];

/** Bytes of one shell file's body as a Uint8Array. */
function bytesOf(body) {
  return body instanceof Uint8Array ? body : new Uint8Array(body);
}

/** The shell digest (32 bytes) of `files`, a map or object path → bytes holding exactly SHELL_PATHS. */
export function shellDigest(files) {
  const get = (p) => (files instanceof Map ? files.get(p) : files[p]);
  const parts = ['terminull/v1 app-shell'];
  for (const path of SHELL_PATHS) {
    const body = get(path);
    if (body == null) throw new c.CryptoError(`app shell: \`${path}\` is missing`);
    parts.push(path, bytesOf(body));
  }
  return c.sha256Bytes(c.transcript(parts));
}

/** What a bridge signs for `digest`. */
export function signatureBytes(bridgeId, digest) {
  return c.transcript(['terminull/v1 app-signature', bridgeId, digest]);
}

/**
 * Whether `signature` (`{bridge_id, digest, sig}` as served at
 * /v1/bridges/{id}/app-signature) vouches for `digest` under one of `pins`
 * (`[{bridgeId, ed25519}]`, the key base64url as paired). Returns
 * `{ok: true, bridgeId}` or `{ok: false, reason}`; never throws on hostile input.
 */
export function checkSignature(pins, signature, digest) {
  if (!signature || typeof signature !== 'object') return { ok: false, reason: 'no signature' };
  const { bridge_id: bridgeId, digest: signedHex, sig } = signature;
  if (typeof bridgeId !== 'string' || typeof signedHex !== 'string' || typeof sig !== 'string') {
    return { ok: false, reason: 'the signature is malformed' };
  }
  const pin = pins.find((p) => p.bridgeId === bridgeId);
  if (!pin) return { ok: false, reason: `signed by ${bridgeId.slice(0, 24)}, not a paired computer` };
  if (signedHex !== c.hex(digest)) return { ok: false, reason: 'signed for other code' };
  let key;
  let sigBytes;
  try {
    key = c.fromB64urlN(pin.ed25519, 32, 'ed25519');
    sigBytes = c.fromB64(sig, 'sig');
  } catch (e) {
    return { ok: false, reason: e.message };
  }
  if (c.bridgeIdOf(key) !== bridgeId) return { ok: false, reason: 'the pinned key is not that bridge’s' };
  if (!c.verify(key, signatureBytes(bridgeId, digest), sigBytes)) return { ok: false, reason: 'the signature does not verify' };
  return { ok: true, bridgeId };
}
