//! The bytes each signature and each AEAD's associated data cover, and sealing and
//! opening of the envelopes that cross the relay and the LAN.
//!
//! - `block`: sealed under the session's bridge→app key; AAD binds the plaintext
//!   routing fields (so the relay cannot relabel a block or flip `replay`); the
//!   device opens a session's blocks with consecutive counters, so a dropped block
//!   is detected at the next one.
//! - `batch`: the blocks of one flush for one relay connection; the bridge signs
//!   their routing fields and `enc` once, and the relay verifies that before
//!   forwarding any of them.
//! - `control`: sealed under the link's app→bridge key and signed by the device.
//! - `reply`: sealed under the link's bridge→app key.
//! - push payloads: sealed under the device's push key with a clock counter.

use super::channel::{Opener, Sealer};
use super::keys::{Identity, PublicIdentity};
use super::{CryptoError, b64, from_b64, transcript};
use crate::relay::{BlockBatch, BlockEnvelope, ControlEnvelope};

/// The associated data of a block: transcript("terminull/v1 block", session_id,
/// block_type, replay (one byte 0/1), server_ts (IEEE-754 f64 big-endian)).
pub fn block_aad(session_id: &str, block_type: &str, replay: bool, server_ts: f64) -> Vec<u8> {
    transcript(&[
        b"terminull/v1 block",
        session_id.as_bytes(),
        block_type.as_bytes(),
        &[u8::from(replay)],
        &server_ts.to_bits().to_be_bytes(),
    ])
}

/// Seals one block's JSON (the `block` frame's body; the relay path signs blocks in
/// batches, [`sign_batch`]).
pub fn seal_block(
    sealer: &mut Sealer,
    session_id: &crate::ids::SessionId,
    block_type: &str,
    replay: bool,
    server_ts: f64,
    block_json: &[u8],
) -> Result<BlockEnvelope, CryptoError> {
    let sealed = sealer.seal(&block_aad(session_id.as_str(), block_type, replay, server_ts), block_json)?;
    Ok(BlockEnvelope {
        session_id: session_id.clone(),
        block_type: block_type.to_owned(),
        enc: b64(&sealed),
        replay,
        server_ts,
    })
}

/// The fields of a sealed block a batch signature covers, borrowed (the relay reads
/// them from the frame's text without building a [`BlockEnvelope`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockFields<'a> {
    /// `session_id`.
    pub session_id: &'a str,
    /// `block_type`.
    pub block_type: &'a str,
    /// `replay`.
    pub replay: bool,
    /// `server_ts`.
    pub server_ts: f64,
    /// `enc`, the base64 text as sent.
    pub enc: &'a str,
}

impl BlockEnvelope {
    /// The fields a batch signature covers.
    pub fn fields(&self) -> BlockFields<'_> {
        BlockFields {
            session_id: self.session_id.as_str(),
            block_type: &self.block_type,
            replay: self.replay,
            server_ts: self.server_ts,
            enc: &self.enc,
        }
    }
}

/// What the bridge signs for a `batch`: transcript("terminull/v2 batch", bridge_id,
/// u64be(conn), u32be(number of blocks), then per block in order: session_id,
/// block_type, u8(replay), f64be(server_ts), SHA-256(enc) (of the base64 text's
/// bytes)). Each `enc` is hashed with SHA-256 rather than fed whole to Ed25519 (whose
/// SHA-512 over every byte was most of the relay's cost per block).
pub fn batch_sig_bytes<'a>(bridge_id: &str, conn: u64, blocks: &[BlockFields<'a>]) -> Vec<u8> {
    use sha2::Digest as _;
    let conn = conn.to_be_bytes();
    // A batch holds at most MAX_BATCH_BLOCKS blocks: the count fits in a u32.
    let count = (blocks.len() as u32).to_be_bytes();
    let flags: Vec<[u8; 1]> = blocks.iter().map(|b| [u8::from(b.replay)]).collect();
    let stamps: Vec<[u8; 8]> = blocks.iter().map(|b| b.server_ts.to_bits().to_be_bytes()).collect();
    let digests: Vec<[u8; 32]> = blocks.iter().map(|b| sha2::Sha256::digest(b.enc.as_bytes()).into()).collect();
    let mut parts: Vec<&[u8]> = vec![b"terminull/v2 batch", bridge_id.as_bytes(), &conn, &count];
    for (((b, flag), stamp), digest) in blocks.iter().zip(&flags).zip(&stamps).zip(&digests) {
        parts.extend([
            b.session_id.as_bytes(),
            b.block_type.as_bytes(),
            flag.as_slice(),
            stamp.as_slice(),
            digest.as_slice(),
        ]);
    }
    transcript(&parts)
}

/// The `batch` frame carrying `blocks` to connection `conn`, signed by the bridge.
pub fn sign_batch(bridge: &Identity, conn: u64, blocks: Vec<BlockEnvelope>) -> BlockBatch {
    let fields: Vec<BlockFields<'_>> = blocks.iter().map(BlockEnvelope::fields).collect();
    let sig = b64(&bridge.sign(&batch_sig_bytes(bridge.public().bridge_id().as_str(), conn, &fields)));
    BlockBatch { conn, blocks, sig }
}

/// The relay's check of a batch: the bridge's signature over every block's fields.
pub fn verify_batch(
    bridge: &PublicIdentity,
    bridge_id: &str,
    conn: u64,
    blocks: &[BlockFields<'_>],
    sig: &str,
) -> Result<(), CryptoError> {
    bridge.verify(&batch_sig_bytes(bridge_id, conn, blocks), &from_b64("sig", sig)?, "the batch")
}

/// The app's opening of a block: the block's JSON bytes. A session's blocks must
/// arrive whole: a block dropped on the way fails the next one
/// ([`CryptoError::Missing`]).
pub fn open_block(opener: &mut Opener, e: &BlockEnvelope) -> Result<Vec<u8>, CryptoError> {
    opener.open_next(&block_aad(e.session_id.as_str(), &e.block_type, e.replay, e.server_ts), &from_b64("enc", &e.enc)?)
}

fn session_field(session_id: Option<&crate::ids::SessionId>) -> &[u8] {
    session_id.map(|s| s.as_str().as_bytes()).unwrap_or_default()
}

/// The associated data of a control body: transcript("terminull/v1 control",
/// bridge_id, device_id, session_id or empty).
pub fn control_aad(bridge_id: &str, e: &ControlEnvelope) -> Vec<u8> {
    transcript(&[
        b"terminull/v1 control",
        bridge_id.as_bytes(),
        e.device_id.as_str().as_bytes(),
        session_field(e.session_id.as_ref()),
    ])
}

/// What the device signs: transcript("terminull/v1 control-sig", bridge_id,
/// device_id, session_id or empty, body (the base64 text's bytes)).
pub fn control_sig_bytes(bridge_id: &str, e: &ControlEnvelope) -> Vec<u8> {
    transcript(&[
        b"terminull/v1 control-sig",
        bridge_id.as_bytes(),
        e.device_id.as_str().as_bytes(),
        session_field(e.session_id.as_ref()),
        e.body.as_bytes(),
    ])
}

/// Seals a control message's JSON under the link and signs the envelope.
pub fn seal_control(
    sealer: &mut Sealer,
    device: &Identity,
    bridge_id: &str,
    session_id: Option<crate::ids::SessionId>,
    token: Option<String>,
    control_json: &[u8],
) -> Result<ControlEnvelope, CryptoError> {
    let mut envelope = ControlEnvelope {
        device_id: device.public().device_id(),
        session_id,
        token,
        body: String::new(),
        sig: String::new(),
        conn: None,
    };
    envelope.body = b64(&sealer.seal(&control_aad(bridge_id, &envelope), control_json)?);
    envelope.sig = b64(&device.sign(&control_sig_bytes(bridge_id, &envelope)));
    Ok(envelope)
}

/// Checks the device's signature on a control envelope (the bridge always does; the
/// relay may, to drop forgeries early).
pub fn verify_control(device: &PublicIdentity, bridge_id: &str, e: &ControlEnvelope) -> Result<(), CryptoError> {
    device.verify(&control_sig_bytes(bridge_id, e), &from_b64("sig", &e.sig)?, "the control message")
}

/// The bridge's opening of a control body (after [`verify_control`]).
pub fn open_control(opener: &mut Opener, bridge_id: &str, e: &ControlEnvelope) -> Result<Vec<u8>, CryptoError> {
    opener.open(&control_aad(bridge_id, e), &from_b64("body", &e.body)?)
}

/// The associated data of a reply: transcript("terminull/v1 reply", bridge_id, device_id).
pub fn reply_aad(bridge_id: &str, device_id: &str) -> Vec<u8> {
    transcript(&[b"terminull/v1 reply", bridge_id.as_bytes(), device_id.as_bytes()])
}

/// Seals a reply's JSON under the link: the `body` of a `reply` frame.
pub fn seal_reply(sealer: &mut Sealer, bridge_id: &str, device_id: &str, json: &[u8]) -> Result<String, CryptoError> {
    Ok(b64(&sealer.seal(&reply_aad(bridge_id, device_id), json)?))
}

/// Opens a `reply` frame's body (replies arrive whole, like blocks).
pub fn open_reply(opener: &mut Opener, bridge_id: &str, device_id: &str, body: &str) -> Result<Vec<u8>, CryptoError> {
    opener.open_next(&reply_aad(bridge_id, device_id), &from_b64("body", body)?)
}

/// What a bridge or a device signs to answer the relay's challenge:
/// transcript("terminull/v1 relay-auth", role (`bridge` or `device`), its id, the
/// bridge id, challenge).
pub fn relay_auth_bytes(role: &str, id: &str, bridge_id: &str, challenge: &[u8]) -> Vec<u8> {
    transcript(&[b"terminull/v1 relay-auth", role.as_bytes(), id.as_bytes(), bridge_id.as_bytes(), challenge])
}

/// The associated data of a push payload: transcript("terminull/v1 push", bridge_id,
/// device_id, kind).
pub fn push_aad(bridge_id: &str, device_id: &str, kind: &str) -> Vec<u8> {
    transcript(&[b"terminull/v1 push", bridge_id.as_bytes(), device_id.as_bytes(), kind.as_bytes()])
}

/// What a device signs to register or delete a Web Push subscription at the relay:
/// transcript("terminull/v1 push-subscription", bridge_id, device_id, endpoint,
/// p256dh, auth, ts (decimal Unix seconds)).
pub fn push_subscription_bytes(
    bridge_id: &str,
    device_id: &str,
    endpoint: &str,
    p256dh: &str,
    auth: &str,
    ts: u64,
) -> Vec<u8> {
    transcript(&[
        b"terminull/v1 push-subscription",
        bridge_id.as_bytes(),
        device_id.as_bytes(),
        endpoint.as_bytes(),
        p256dh.as_bytes(),
        auth.as_bytes(),
        ts.to_string().as_bytes(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::channel::{Channel, session_keys};
    use crate::ids::SessionId;

    #[test]
    fn a_sealed_block_opens_and_resists_relabelling() {
        let keys = session_keys(&[3; 32], "s-1", &[4; 32], &[5; 16]);
        let mut bridge_side = Channel::bridge_side(&keys, "block");
        let mut app_side = Channel::app_side(&keys, "block");
        let sid = SessionId("s-1".into());
        let e = seal_block(&mut bridge_side.sealer, &sid, "text", false, 1.5, br#"{"type":"text"}"#).unwrap();
        let mut relabelled = e.clone();
        relabelled.block_type = "error".into();
        assert!(open_block(&mut app_side.opener, &relabelled).is_err());
        assert_eq!(open_block(&mut app_side.opener, &e).unwrap(), br#"{"type":"text"}"#);
    }

    #[test]
    fn a_batch_verifies_once_and_any_change_to_it_fails() {
        let bridge = Identity::generate();
        let bridge_id = bridge.public().bridge_id();
        let mut sealer = Sealer::new([9; 32], "block");
        let sid = SessionId("s-1".into());
        let blocks: Vec<BlockEnvelope> =
            (0..3).map(|i| seal_block(&mut sealer, &sid, "text", false, f64::from(i), b"{}").unwrap()).collect();
        let batch = sign_batch(&bridge, 7, blocks);
        let check = |conn: u64, blocks: &[BlockEnvelope]| {
            let fields: Vec<BlockFields<'_>> = blocks.iter().map(BlockEnvelope::fields).collect();
            verify_batch(&bridge.public(), bridge_id.as_str(), conn, &fields, &batch.sig)
        };
        check(7, &batch.blocks).unwrap();
        assert!(check(8, &batch.blocks).is_err(), "bound to the connection");
        let mut dropped = batch.blocks.clone();
        dropped.remove(1);
        assert!(check(7, &dropped).is_err(), "a block dropped");
        let mut reordered = batch.blocks.clone();
        reordered.swap(0, 2);
        assert!(check(7, &reordered).is_err(), "reordered");
        let mut flipped = batch.blocks.clone();
        flipped[2].replay = true;
        assert!(check(7, &flipped).is_err(), "a routing field changed");
    }

    #[test]
    fn a_control_signed_by_another_key_is_refused() {
        let device = Identity::generate();
        let other = Identity::generate();
        let mut sealer = Sealer::new([1; 32], "control");
        let e = seal_control(&mut sealer, &other, "brg_x", None, None, b"{}").unwrap();
        let mut forged = e.clone();
        forged.device_id = device.public().device_id();
        assert!(verify_control(&device.public(), "brg_x", &forged).is_err());
        verify_control(&other.public(), "brg_x", &e).unwrap();
        assert!(verify_control(&other.public(), "brg_y", &e).is_err(), "bound to the bridge");
    }
}
