// terminull's end-to-end cryptography for the browser (and Node): every byte as
// docs/encryption.md states it, the same as protocol/src/crypto/*.rs.
//
// Pure ESM, no DOM, no WebCrypto: WebCrypto exists only in secure contexts, and a
// page served by a bridge's LAN server at http://192.168.x.y is not one. The
// primitives are the audited pure-JS noble libraries; randomness is
// crypto.getRandomValues (available in every context).

import { ed25519, x25519 } from '@noble/curves/ed25519.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { hmac } from '@noble/hashes/hmac.js';
import { hkdf } from '@noble/hashes/hkdf.js';
import { gcm } from '@noble/ciphers/aes.js';

/** Why a cryptographic step failed; `what` names the field or step. */
export class CryptoError extends Error {
  constructor(message) {
    super(message);
    this.name = 'CryptoError';
  }
}

const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: true });

/** UTF-8 bytes of a string. */
/**
 * A counter skipped one or more: a message sent before this one never arrived. Only
 * streams that must arrive whole (`Opener.openNext`) throw it; the link that sees it is
 * broken and must be replaced (new keys, sessions resumed).
 */
export class MissingError extends CryptoError {
  constructor(what, expected, got) {
    super(`${what}: counter ${got} arrived where ${expected} was due (a message before it was dropped)`);
    this.name = 'MissingError';
    this.missing = true;
  }
}

/** The relay protocol version this app speaks (docs/relay.md): `auth` carries it, `relay_status` must. */
export const PROTOCOL_VERSION = 3;

/** The one sentence naming both versions and the side to update (protocol/src/relay.rs). */
export function versionMismatch(peer, peerVersion, own, ownVersion) {
  const update = peerVersion < ownVersion ? peer : own;
  return `${peer} speaks relay protocol ${peerVersion} and ${own} speaks ${ownVersion}: update ${update}`;
}

export function utf8(s) {
  return enc.encode(s);
}

/** A string from UTF-8 bytes (refuses invalid UTF-8). */
export function fromUtf8(bytes) {
  try {
    return dec.decode(bytes);
  } catch {
    throw new CryptoError('the bytes are not valid UTF-8');
  }
}

/** Concatenation of byte arrays. */
export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let i = 0;
  for (const p of parts) {
    out.set(p, i);
    i += p.length;
  }
  return out;
}

/** Constant-time equality of two byte arrays. */
export function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

/** `n` random bytes from the platform CSPRNG. */
export function randomBytes(n) {
  const out = new Uint8Array(n);
  globalThis.crypto.getRandomValues(out);
  return out;
}

// ---------------------------------------------------------------------------
// Encodings

const STD = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

function encode64(bytes, alphabet, pad) {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + alphabet[n & 63];
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i] << 16;
    out += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + (pad ? '==' : '');
  } else if (rest === 2) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8);
    out += alphabet[n >> 18] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + (pad ? '=' : '');
  }
  return out;
}

function decode64(text, alphabet, field, encoding) {
  const bad = () => new CryptoError(`\`${field}\` is not valid ${encoding}`);
  if (typeof text !== 'string') throw bad();
  const len = text.length;
  if (len % 4 === 1) throw bad();
  const out = new Uint8Array(Math.floor((len * 3) / 4));
  let o = 0;
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < len; i++) {
    const v = alphabet.indexOf(text[i]);
    if (v < 0) throw bad();
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  // Canonical: the unused trailing bits must be zero.
  if (bits > 0 && (acc & ((1 << bits) - 1)) !== 0) throw bad();
  return out.subarray(0, o);
}

/** base64url without padding (RFC 4648 §5). */
export function b64url(bytes) {
  return encode64(bytes, URL, false);
}

/** Decodes base64url (padding tolerated). */
export function fromB64url(text, field = 'value') {
  if (typeof text !== 'string') throw new CryptoError(`\`${field}\` is not valid base64url`);
  return decode64(text.replace(/=+$/, ''), URL, field, 'base64url');
}

/** Decodes base64url into exactly `n` bytes. */
export function fromB64urlN(text, n, field = 'value') {
  const bytes = fromB64url(text, field);
  if (bytes.length !== n) throw new CryptoError(`\`${field}\` must be ${n} bytes, got ${bytes.length}`);
  return bytes;
}

/** Standard base64 with padding (RFC 4648 §4). */
export function b64(bytes) {
  return encode64(bytes, STD, true);
}

/** Decodes standard base64 with padding. */
export function fromB64(text, field = 'value') {
  if (typeof text !== 'string' || text.length % 4 !== 0) {
    throw new CryptoError(`\`${field}\` is not valid base64`);
  }
  const m = /^([^=]*)(={0,2})$/.exec(text);
  if (!m) throw new CryptoError(`\`${field}\` is not valid base64`);
  return decode64(m[1], STD, field, 'base64');
}

/** Lowercase hex. */
export function hex(bytes) {
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}

/** Bytes from hex. */
export function fromHex(text) {
  if (typeof text !== 'string' || text.length % 2 !== 0 || /[^0-9a-fA-F]/.test(text)) {
    throw new CryptoError('not hex');
  }
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const B32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** RFC 4648 base32, lower case, no padding. */
export function base32Lower(bytes) {
  let out = '';
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += B32[(acc >> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out += B32[(acc << (5 - bits)) & 31];
  return out;
}

// ---------------------------------------------------------------------------
// Transcripts and primitives

/**
 * The bytes of `parts` framed without ambiguity: each part as a 4-byte big-endian
 * length, then its bytes. Strings are taken as UTF-8.
 */
export function transcript(parts) {
  const bytes = parts.map((p) => (typeof p === 'string' ? utf8(p) : p));
  const out = new Uint8Array(bytes.reduce((n, p) => n + 4 + p.length, 0));
  const view = new DataView(out.buffer);
  let i = 0;
  for (const p of bytes) {
    view.setUint32(i, p.length, false);
    out.set(p, i + 4);
    i += 4 + p.length;
  }
  return out;
}

/** SHA-256. */
export function sha256Bytes(bytes) {
  return sha256(bytes);
}

/** HKDF-SHA256, extract then expand, 32 bytes. */
export function hkdfSha256(salt, ikm, info, length = 32) {
  return hkdf(sha256, ikm, salt, info, length);
}

/** HMAC-SHA256. */
export function hmacSha256(key, message) {
  return hmac(sha256, key, message);
}

function u8(b) {
  return Uint8Array.of(b ? 1 : 0);
}

function f64be(x) {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setFloat64(0, x, false);
  return out;
}

// ---------------------------------------------------------------------------
// Identities and ids

/**
 * An identity from its two 32-byte secrets: `{ed25519Seed, x25519Secret,
 * ed25519Public, x25519Public}`.
 */
export function identityFromBytes(ed25519Seed, x25519Secret) {
  if (ed25519Seed.length !== 32 || x25519Secret.length !== 32) {
    throw new CryptoError('identity secrets must be 32 bytes each');
  }
  return {
    ed25519Seed: Uint8Array.from(ed25519Seed),
    x25519Secret: Uint8Array.from(x25519Secret),
    ed25519Public: ed25519.getPublicKey(ed25519Seed),
    x25519Public: x25519.getPublicKey(x25519Secret),
  };
}

/** A fresh identity. */
export function generateIdentity() {
  return identityFromBytes(randomBytes(32), randomBytes(32));
}

/** The identity file's contents (base64url secrets), as in `device-identity.json`. */
export function identitySecrets(identity) {
  return { ed25519_secret: b64url(identity.ed25519Seed), x25519_secret: b64url(identity.x25519Secret) };
}

/** An identity from its file contents. */
export function identityFromSecrets(secrets) {
  return identityFromBytes(
    fromB64urlN(secrets.ed25519_secret, 32, 'ed25519_secret'),
    fromB64urlN(secrets.x25519_secret, 32, 'x25519_secret'),
  );
}

/** `{ed25519, x25519}` base64url: the wire form of public keys. */
export function publicKeysWire(identity) {
  return { ed25519: b64url(identity.ed25519Public), x25519: b64url(identity.x25519Public) };
}

/** Decodes wire public keys into `{ed25519, x25519}` bytes. */
export function publicKeysFromWire(keys) {
  if (!keys || typeof keys !== 'object') throw new CryptoError('public keys missing');
  const ed = fromB64urlN(keys.ed25519, 32, 'ed25519');
  const x = fromB64urlN(keys.x25519, 32, 'x25519');
  try {
    ed25519.Point.fromBytes(ed, false);
  } catch {
    throw new CryptoError('`ed25519` is not a valid public key');
  }
  return { ed25519: ed, x25519: x };
}

/** The 16-character fingerprint of an Ed25519 public key. */
export function fingerprint(ed25519Public) {
  return base32Lower(sha256(transcript(['terminull/v1 id', ed25519Public])).subarray(0, 10));
}

/** `brg_<fingerprint>`. */
export function bridgeIdOf(ed25519Public) {
  return 'brg_' + fingerprint(ed25519Public);
}

/** `dev_<fingerprint>`. */
export function deviceIdOf(ed25519Public) {
  return 'dev_' + fingerprint(ed25519Public);
}

/** Ed25519 signature (64 bytes). */
export function sign(identity, message) {
  return ed25519.sign(message, identity.ed25519Seed);
}

/**
 * Strict Ed25519 verification (as ed25519-dalek's `verify_strict`): canonical
 * encodings, no small-order public key or R. Returns a boolean, never throws.
 */
export function verify(publicKey, message, signature) {
  try {
    if (signature.length !== 64 || publicKey.length !== 32) return false;
    const R = ed25519.Point.fromBytes(signature.subarray(0, 32), false);
    if (R.isSmallOrder()) return false;
    return ed25519.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}

function verifyOrThrow(publicKey, message, signature, what) {
  if (!verify(publicKey, message, signature)) throw new CryptoError(`the signature over ${what} does not verify`);
}

/** X25519; refuses a low-order peer key (all-zero shared secret). */
export function agree(secret, peerPublic, what = 'peer x25519') {
  let shared;
  try {
    shared = x25519.getSharedSecret(secret, peerPublic);
  } catch {
    throw new CryptoError(`\`${what}\` is not a valid public key`);
  }
  if (shared.every((b) => b === 0)) throw new CryptoError(`\`${what}\` is not a valid public key`);
  return shared;
}

/** A fresh X25519 key pair for one session attachment (the spec's `ios_epk`). */
export function appSessionKey(secret = randomBytes(32)) {
  return { secret: Uint8Array.from(secret), public: x25519.getPublicKey(secret) };
}

// ---------------------------------------------------------------------------
// Sealing with counters

export const NONCE_LEN = 12;
export const TAG_LEN = 16;

/** `00 00 00 00 ‖ u64_be(counter)`. */
export function nonce(counter) {
  const n = new Uint8Array(NONCE_LEN);
  new DataView(n.buffer).setBigUint64(4, BigInt(counter), false);
  return n;
}

/** The counter in the nonce that starts `sealed` (`nonce`'s inverse); refuses a message too short to hold a tag, or a nonce not of that form. */
function counterOf(sealed, what) {
  if (!(sealed instanceof Uint8Array) || sealed.length < NONCE_LEN + TAG_LEN) {
    throw new CryptoError(`\`${what}\` must be at least ${NONCE_LEN + TAG_LEN} bytes`);
  }
  const n = sealed.subarray(0, NONCE_LEN);
  if (n[0] | n[1] | n[2] | n[3]) throw new CryptoError(`${what}: malformed nonce`);
  return new DataView(n.buffer, n.byteOffset, NONCE_LEN).getBigUint64(4, false);
}

const U64_MAX = (1n << 64n) - 1n;

/** One direction of a sealed channel: its own copy of the key, and what it carries (named in errors). */
class ChannelDirection {
  constructor(key, what) {
    this.key = Uint8Array.from(key);
    this.what = what;
  }
}

/** Seals with one key; each message takes the next counter (from 1). */
export class Sealer extends ChannelDirection {
  constructor(key, what = 'channel', counter = 1n) {
    super(key, what);
    this.next = BigInt(counter);
  }

  /** `nonce ‖ ciphertext ‖ tag` of `plaintext`, binding `aad`. */
  seal(aad, plaintext) {
    if (this.next > U64_MAX) throw new CryptoError(`${this.what}: counter exhausted`);
    const n = nonce(this.next);
    this.next += 1n;
    return concat(n, gcm(this.key, n, aad).encrypt(plaintext));
  }
}

/** Opens what one Sealer sealed; refuses a counter at or below the last accepted. */
export class Opener extends ChannelDirection {
  constructor(key, what = 'channel', last = 0n) {
    super(key, what);
    this.last = BigInt(last);
  }

  /** The plaintext of `nonce ‖ ciphertext ‖ tag`, checking `aad`; the counter then becomes the last accepted. */
  open(aad, sealed) {
    return this._open(aad, sealed, false);
  }

  /**
   * `open` for a stream that must arrive whole (a session's blocks, a link's replies):
   * the counter must be exactly one above the last accepted, else a MissingError (a
   * message before this one was dropped on the way).
   */
  openNext(aad, sealed) {
    return this._open(aad, sealed, true);
  }

  _open(aad, sealed, whole) {
    const counter = counterOf(sealed, this.what);
    if (counter <= this.last) {
      throw new CryptoError(
        `${this.what}: counter ${counter} is not above the last accepted ${this.last} (replayed or reordered)`,
      );
    }
    if (whole && counter !== this.last + 1n) {
      throw new MissingError(this.what, this.last + 1n, counter);
    }
    let plain;
    try {
      plain = gcm(this.key, nonce(counter), aad).decrypt(sealed.subarray(NONCE_LEN));
    } catch {
      throw new CryptoError(`${this.what}: authentication failed (tampered, or sealed under another key)`);
    }
    this.last = counter;
    return plain;
  }
}

// ---------------------------------------------------------------------------
// Key schedules

function splitKeys(salt, shared, info) {
  return {
    appToBridge: hkdfSha256(salt, shared, info('app->bridge')),
    bridgeToApp: hkdfSha256(salt, shared, info('bridge->app')),
  };
}

/** Session keys of one attachment of a device to a session. */
export function sessionKeys(shared, sessionId, appPubkey, attachNonce) {
  return splitKeys(utf8(sessionId), shared, (d) =>
    transcript(['terminull/v1 session-key', d, appPubkey, attachNonce]),
  );
}

/** The push key of one device (bridge → device only). */
export function pushKey(shared, bridgeId, deviceId) {
  return hkdfSha256(utf8('terminull/v1 push'), shared, transcript(['terminull/v1 push-key', bridgeId, deviceId]));
}

// ---------------------------------------------------------------------------
// Pairing

const PERCENT_SAFE = /[A-Za-z0-9\-._~]/;

/** Percent-encodes every byte outside `A–Z a–z 0–9 - . _ ~`. */
export function percentEncode(s) {
  let out = '';
  for (const b of utf8(s)) {
    const c = String.fromCharCode(b);
    out += PERCENT_SAFE.test(c) ? c : '%' + b.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

/** Decodes a percent-encoded UTF-8 string. */
export function percentDecode(s) {
  const bytes = [];
  for (let i = 0; i < s.length; ) {
    if (s[i] === '%') {
      const h = s.slice(i + 1, i + 3);
      if (!/^[0-9a-fA-F]{2}$/.test(h)) throw new CryptoError('pairing: `r` is not percent-encoded UTF-8');
      bytes.push(parseInt(h, 16));
      i += 3;
    } else {
      for (const b of utf8(s[i])) bytes.push(b);
      i += 1;
    }
  }
  try {
    return dec.decode(Uint8Array.from(bytes));
  } catch {
    throw new CryptoError('pairing: `r` is not percent-encoded UTF-8');
  }
}

/**
 * Parses a pairing link `<base>/pair#v=1&b=…&e=…&x=…&s=…&t=…[&r=…][&l=…]` (or just
 * its fragment, with or without `#`). Checks the version and that `b` matches `e`.
 */
export function parsePairingLink(url) {
  const bad = (m) => new CryptoError(`pairing: ${m}`);
  if (typeof url !== 'string') throw bad('the link is not text');
  const hashAt = url.indexOf('#');
  const fragment = hashAt >= 0 ? url.slice(hashAt + 1) : url;
  const fields = new Map();
  for (const pair of fragment.split('&')) {
    const eq = pair.indexOf('=');
    if (eq < 0) throw bad('a link field has no `=`');
    fields.set(pair.slice(0, eq), pair.slice(eq + 1));
  }
  const get = (k) => {
    if (!fields.has(k)) throw bad(`the link has no \`${k}\` field`);
    return fields.get(k);
  };
  if (get('v') !== '1') throw bad(`link version \`${get('v')}\` is not supported (this build reads 1)`);
  const bridge = { ed25519: get('e'), x25519: get('x') };
  const keys = publicKeysFromWire(bridge);
  const bridgeId = get('b');
  if (bridgeIdOf(keys.ed25519) !== bridgeId) throw bad("the bridge id does not match the bridge's key");
  const t = get('t');
  if (!/^\d+$/.test(t)) throw bad('`t` is not a Unix time');
  return {
    bridgeId,
    bridge,
    relay: fields.has('r') ? percentDecode(fields.get('r')) : null,
    lan: fields.has('l') ? percentDecode(fields.get('l')) : null,
    secret: fromB64urlN(get('s'), 32, 's'),
    expiresAt: Number(t),
  };
}

/** The link for `base` (as PairingLink::to_url). */
export function pairingLinkUrl(link, base) {
  let url =
    `${base.replace(/\/+$/, '')}/pair#v=1&b=${link.bridgeId}&e=${link.bridge.ed25519}` +
    `&x=${link.bridge.x25519}&s=${b64url(link.secret)}&t=${link.expiresAt}`;
  if (link.relay != null) url += '&r=' + percentEncode(link.relay);
  if (link.lan != null) url += '&l=' + percentEncode(link.lan);
  return url;
}

/** The offer's public handle. */
export function pairingId(secret) {
  return b64url(sha256(transcript(['terminull/v1 pairing-id', secret])).subarray(0, 16));
}

function pairingMacKey(secret) {
  return hkdfSha256(utf8('terminull/v1 pairing'), secret, utf8('mac'));
}

/** Six digits from the response transcript, shown as `ddd ddd`. */
export function shortCode(responseTranscript) {
  const d = sha256(transcript(['terminull/v1 short-code', responseTranscript]));
  const n = new DataView(d.buffer, d.byteOffset, 4).getUint32(0, false) % 1000000;
  return `${String(Math.floor(n / 1000)).padStart(3, '0')} ${String(n % 1000).padStart(3, '0')}`;
}

/**
 * The device's pairing request for `link` (from parsePairingLink). Returns
 * `{request, pending}`; pass `pending` and the bridge's answer to finishPairing.
 */
export function pairRequest(link, identity, name, deviceNonce = randomBytes(16)) {
  if (utf8(name).length > 64) throw new CryptoError('pairing: the device name is longer than 64 bytes');
  const bridge = publicKeysFromWire(link.bridge);
  const pid = pairingId(link.secret);
  const deviceId = deviceIdOf(identity.ed25519Public);
  const t = transcript([
    'terminull/v1 pair-request',
    link.bridgeId,
    pid,
    bridge.ed25519,
    bridge.x25519,
    deviceId,
    identity.ed25519Public,
    identity.x25519Public,
    name,
    deviceNonce,
  ]);
  const mac = hmacSha256(pairingMacKey(link.secret), t);
  const request = {
    pairing_id: pid,
    bridge_id: link.bridgeId,
    device_id: deviceId,
    device: publicKeysWire(identity),
    device_name: name,
    device_nonce: b64url(deviceNonce),
    mac: b64url(mac),
    sig: b64url(sign(identity, t)),
  };
  return { request, pending: { link, transcript: t, mac, deviceId } };
}

/**
 * Checks the bridge's answer (ids, MAC, signature with the key from the QR code).
 * Returns `{bridgeId, keys, relay, lan, shortCode}`.
 */
export function finishPairing(pending, response) {
  if (!response || typeof response !== 'object') throw new CryptoError('pairing: the answer is not an object');
  if (response.bridge_id !== pending.link.bridgeId || response.device_id !== pending.deviceId) {
    throw new CryptoError('pairing: the answer is for another bridge or device');
  }
  const bridgeNonce = fromB64urlN(response.bridge_nonce, 16, 'bridge_nonce');
  const t = transcript(['terminull/v1 pair-response', pending.transcript, pending.mac, bridgeNonce]);
  const mac = fromB64url(response.mac, 'mac');
  if (!equalBytes(hmacSha256(pairingMacKey(pending.link.secret), t), mac)) {
    throw new CryptoError('the MAC over the pairing response does not verify (wrong pairing secret?)');
  }
  const bridge = publicKeysFromWire(pending.link.bridge);
  verifyOrThrow(bridge.ed25519, t, fromB64url(response.sig, 'sig'), 'the pairing response');
  return {
    bridgeId: pending.link.bridgeId,
    keys: pending.link.bridge,
    relay: pending.link.relay,
    lan: pending.link.lan,
    shortCode: shortCode(t),
  };
}

// ---------------------------------------------------------------------------
// Relay authentication and the link

/** transcript("terminull/v1 relay-auth", role, own id, bridge id, challenge). */
export function relayAuthBytes(role, id, bridgeId, challenge) {
  return transcript(['terminull/v1 relay-auth', role, id, bridgeId, challenge]);
}

/** The device's `auth` frame answering a `challenge` (nonce: base64url). */
export function authFrame(identity, bridgeId, challengeB64url) {
  const challenge = fromB64url(challengeB64url, 'nonce');
  const deviceId = deviceIdOf(identity.ed25519Public);
  return {
    type: 'auth',
    bridge_id: bridgeId,
    device_id: deviceId,
    sig: b64(sign(identity, relayAuthBytes('device', deviceId, bridgeId, challenge))),
    protocol_version: PROTOCOL_VERSION,
  };
}

// The link handshake (`link_hello` / `link_accept`) is in handshake.js.

// ---------------------------------------------------------------------------
// Control messages and replies

export function controlAad(bridgeId, deviceId, sessionId) {
  return transcript(['terminull/v1 control', bridgeId, deviceId, sessionId ?? '']);
}

export function controlSigBytes(bridgeId, deviceId, sessionId, body) {
  return transcript(['terminull/v1 control-sig', bridgeId, deviceId, sessionId ?? '', body]);
}

/**
 * A `control` frame: `json` (string or bytes) sealed under the link's sealer and
 * signed. `sessionId` and `token` are the frame's routing fields (or null).
 */
export function sealControl(sealer, identity, bridgeId, sessionId, token, json) {
  const deviceId = deviceIdOf(identity.ed25519Public);
  const bytes = typeof json === 'string' ? utf8(json) : json;
  const body = b64(sealer.seal(controlAad(bridgeId, deviceId, sessionId), bytes));
  const frame = { type: 'control', device_id: deviceId };
  if (sessionId != null) frame.session_id = sessionId;
  if (token != null) frame.token = token;
  frame.body = body;
  frame.sig = b64(sign(identity, controlSigBytes(bridgeId, deviceId, sessionId, body)));
  return frame;
}

/** Verifies a control frame's signature (what the bridge checks). */
export function verifyControl(devicePublic, bridgeId, frame) {
  return verify(
    devicePublic,
    controlSigBytes(bridgeId, frame.device_id, frame.session_id, frame.body),
    fromB64(frame.sig, 'sig'),
  );
}

export function replyAad(bridgeId, deviceId) {
  return transcript(['terminull/v1 reply', bridgeId, deviceId]);
}

/** Opens a `reply` frame's body: the bytes of `{"reply": …, "attach"?: …}`. Replies arrive whole (MissingError). */
export function openReply(opener, bridgeId, deviceId, body) {
  return opener.openNext(replyAad(bridgeId, deviceId), fromB64(body, 'body'));
}

/** Seals a reply (the bridge's side; for tests). */
export function sealReply(sealer, bridgeId, deviceId, json) {
  return b64(sealer.seal(replyAad(bridgeId, deviceId), typeof json === 'string' ? utf8(json) : json));
}

// ---------------------------------------------------------------------------
// Blocks

export function blockAad(sessionId, blockType, replay, serverTs) {
  return transcript(['terminull/v1 block', sessionId, blockType, u8(replay), f64be(serverTs)]);
}

function checkBlockEnvelope(e) {
  if (
    !e ||
    typeof e.session_id !== 'string' ||
    typeof e.block_type !== 'string' ||
    typeof e.replay !== 'boolean' ||
    typeof e.server_ts !== 'number' ||
    typeof e.enc !== 'string'
  ) {
    throw new CryptoError('block: malformed envelope');
  }
}

/**
 * Opens a `block` frame with its session's opener: the block's JSON bytes. A session's
 * blocks arrive whole: one dropped on the way fails the next (MissingError).
 */
export function openBlock(opener, e) {
  checkBlockEnvelope(e);
  return opener.openNext(blockAad(e.session_id, e.block_type, e.replay, e.server_ts), fromB64(e.enc, 'enc'));
}

/** Seals a block (the bridge's side; for tests): the `block` frame a device receives. */
export function sealBlock(sealer, sessionId, blockType, replay, serverTs, json) {
  const bytes = typeof json === 'string' ? utf8(json) : json;
  return {
    type: 'block',
    session_id: sessionId,
    block_type: blockType,
    enc: b64(sealer.seal(blockAad(sessionId, blockType, replay, serverTs), bytes)),
    replay,
    server_ts: serverTs,
  };
}

// ---------------------------------------------------------------------------
// Pushes

export function pushAad(bridgeId, deviceId, kind) {
  return transcript(['terminull/v1 push', bridgeId, deviceId, kind]);
}

/** Opens a `push` frame's payload with the device's push opener. */
export function openPush(opener, bridgeId, deviceId, frame) {
  if (!frame || typeof frame.kind !== 'string') throw new CryptoError('push: malformed frame');
  return opener.open(pushAad(bridgeId, deviceId, frame.kind), fromB64(frame.payload, 'payload'));
}

// ---------------------------------------------------------------------------
// Push subscriptions

export function pushSubscriptionBytes(bridgeId, deviceId, endpoint, p256dh, auth, ts) {
  return transcript(['terminull/v1 push-subscription', bridgeId, deviceId, endpoint, p256dh, auth, String(ts)]);
}
