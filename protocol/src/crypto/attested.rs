//! What the bridge authenticates besides blocks and replies:
//!
//! - `replay_done`: sealed under the session's bridge→app key, in the same counter
//!   sequence as the session's blocks (so it cannot be forged, dropped, moved or
//!   replayed by the relay without the device noticing); its plaintext fields are
//!   routing only and the device ignores a `replay_done` without `enc`.
//! - [`control_counter`]: the counter of a control's sealed body, read from its
//!   nonce without opening it, so a `refused` reply can name a control whose `id`
//!   the bridge could not read.

use serde::{Deserialize, Serialize};

use super::channel::{Opener, Sealer};
use super::{CryptoError, b64, from_b64, transcript};
use crate::ids::SessionId;
use crate::relay::ReplayDoneFrame;

/// The associated data of a sealed `replay_done`: transcript("terminull/v2
/// replay-done", session_id).
pub fn replay_done_aad(session_id: &str) -> Vec<u8> {
    transcript(&[b"terminull/v2 replay-done", session_id.as_bytes()])
}

/// What a `replay_done`'s `enc` holds once opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedReplayDone {
    /// The session resumed (must equal the frame's `session_id`).
    pub session_id: SessionId,
    /// The highest `seq` sent before it, when any block was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
}

/// Seals a `replay_done` under the session's block sealer (the next counter of the
/// block stream).
pub fn seal_replay_done(
    sealer: &mut Sealer,
    session_id: &SessionId,
    last_seq: Option<u64>,
) -> Result<ReplayDoneFrame, CryptoError> {
    let inner = SealedReplayDone { session_id: session_id.clone(), last_seq };
    let json =
        serde_json::to_vec(&inner).map_err(|e| CryptoError::Json { what: "replay_done", detail: e.to_string() })?;
    let sealed = sealer.seal(&replay_done_aad(session_id.as_str()), &json)?;
    Ok(ReplayDoneFrame { session_id: session_id.clone(), last_seq, enc: Some(b64(&sealed)), conn: None })
}

/// Opens a `replay_done` with the session's block opener (the exact next counter, as
/// for blocks). Refused without `enc`, or when the sealed session differs from the
/// frame's. The plaintext `last_seq` is ignored: the sealed one is returned.
pub fn open_replay_done(opener: &mut Opener, frame: &ReplayDoneFrame) -> Result<SealedReplayDone, CryptoError> {
    let Some(enc) = &frame.enc else {
        return Err(CryptoError::Json { what: "replay_done", detail: "not sealed (no `enc`)".into() });
    };
    let bytes = opener.open_next(&replay_done_aad(frame.session_id.as_str()), &from_b64("enc", enc)?)?;
    let inner: SealedReplayDone =
        serde_json::from_slice(&bytes).map_err(|e| CryptoError::Json { what: "replay_done", detail: e.to_string() })?;
    if inner.session_id != frame.session_id {
        return Err(CryptoError::Json {
            what: "replay_done",
            detail: format!("sealed for session `{}`, sent as `{}`", inner.session_id, frame.session_id),
        });
    }
    Ok(inner)
}

/// The counter of a control's sealed `body` (base64 of nonce ‖ ciphertext ‖ tag): the
/// nonce's last 8 bytes, big-endian. `None` when the body is not base64 or too short.
/// Reading it proves nothing (anyone can write a nonce); it only names which control
/// a refusal is about.
pub fn control_counter(body: &str) -> Option<u64> {
    let bytes = from_b64("body", body).ok()?;
    let counter: [u8; 8] = bytes.get(4..12)?.try_into().ok()?;
    Some(u64::from_be_bytes(counter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_done_opens_in_the_block_sequence_and_an_unsealed_or_moved_one_is_refused() {
        let key = [9u8; 32];
        let session = SessionId("s1".into());
        let mut sealer = Sealer::new(key, "block");
        let mut opener = Opener::new(key, "block");
        let frame = seal_replay_done(&mut sealer, &session, Some(4)).unwrap();
        assert_eq!(super::control_counter(frame.enc.as_deref().unwrap()), Some(1));
        let mut forged = frame.clone();
        forged.enc = None;
        assert!(open_replay_done(&mut opener, &forged).is_err());
        let mut moved = frame.clone();
        moved.session_id = SessionId("s2".into());
        assert!(matches!(open_replay_done(&mut opener, &moved), Err(CryptoError::Tampered(_))));
        assert_eq!(open_replay_done(&mut opener, &frame).unwrap().last_seq, Some(4));
        assert!(matches!(open_replay_done(&mut opener, &frame), Err(CryptoError::Replayed { .. })));
    }

    #[test]
    fn a_control_counter_is_read_from_the_nonce_or_absent() {
        let mut body = vec![0u8; 28];
        body[11] = 7;
        assert_eq!(control_counter(&b64(&body)), Some(7));
        assert_eq!(control_counter("not base64!"), None);
        assert_eq!(control_counter(&b64(&[0u8; 5])), None);
    }
}
