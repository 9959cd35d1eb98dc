// What the bridge authenticates besides blocks and replies (docs/encryption.md
// "Sealed replay_done", docs/control-messages.md "refused"); the same as
// protocol/src/crypto/attested.rs.
//
// - `replay_done` is sealed under the session's bridge→app key, the next counter of
//   its block stream: one the relay made up (no `enc`, or one that does not open) is
//   refused, never acted on.
// - A `refused` reply without an `id` names the control by the counter of its sealed
//   body; `controlCounter` reads that counter from a control frame this app sent.

import * as c from './crypto.js';

/** transcript("terminull/v2 replay-done", session_id). */
export function replayDoneAad(sessionId) {
  return c.transcript(['terminull/v2 replay-done', sessionId]);
}

/**
 * Opens a `replay_done` frame with the session's block opener (exact next counter, as
 * for blocks): `{session_id, last_seq}` from the sealed part. Throws a CryptoError
 * (a MissingError when a block before it was dropped) for a frame the relay made up.
 */
export function openReplayDone(opener, frame) {
  if (typeof frame.session_id !== 'string') throw new c.CryptoError('replay_done: no session_id');
  if (typeof frame.enc !== 'string') throw new c.CryptoError('replay_done: not sealed (no `enc`)');
  const inner = JSON.parse(c.fromUtf8(opener.openNext(replayDoneAad(frame.session_id), c.fromB64(frame.enc, 'enc'))));
  if (!inner || inner.session_id !== frame.session_id) {
    throw new c.CryptoError(`replay_done: sealed for another session than \`${frame.session_id}\``);
  }
  return { session_id: inner.session_id, last_seq: Number.isSafeInteger(inner.last_seq) ? inner.last_seq : null };
}

/** Seals a `replay_done` (the bridge's side; for tests). */
export function sealReplayDone(sealer, sessionId, lastSeq = null) {
  const inner = lastSeq == null ? { session_id: sessionId } : { session_id: sessionId, last_seq: lastSeq };
  const enc = c.b64(sealer.seal(replayDoneAad(sessionId), c.utf8(JSON.stringify(inner))));
  const frame = { type: 'replay_done', session_id: sessionId, enc };
  if (lastSeq != null) frame.last_seq = lastSeq;
  return frame;
}

/** The counter of a control's sealed `body` (the nonce's last 8 bytes) as a Number, or null. */
export function controlCounter(body) {
  let bytes;
  try {
    bytes = c.fromB64(body, 'body');
  } catch {
    return null;
  }
  if (bytes.length < 12) return null;
  let n = 0n;
  for (let i = 4; i < 12; i += 1) n = (n << 8n) | BigInt(bytes[i]);
  return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : null;
}
