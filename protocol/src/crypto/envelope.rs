//! The bytes each signature and each AEAD's associated data cover, and sealing and
//! opening of the envelopes that cross the relay and the LAN.
//!
//! - `block`: sealed under the session's bridge→app key; AAD binds the plaintext
//!   routing fields (so the relay cannot relabel a block or flip `replay`); the
//!   bridge signs the routing fields and `enc`, and the relay verifies that before
//!   forwarding.
//! - `control`: sealed under the link's app→bridge key and signed by the device.
//! - `reply`: sealed under the link's bridge→app key.
//! - push payloads: sealed under the device's push key with a clock counter.

use super::channel::{Opener, Sealer};
use super::keys::{Identity, PublicIdentity};
use super::{CryptoError, b64, from_b64, transcript};
use crate::relay::{BlockEnvelope, ControlEnvelope};

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

/// What the bridge signs for a block: transcript("terminull/v1 block-sig", session_id,
/// block_type, replay, server_ts, enc (the base64 text's bytes)).
pub fn block_sig_bytes(e: &BlockEnvelope) -> Vec<u8> {
    transcript(&[
        b"terminull/v1 block-sig",
        e.session_id.as_str().as_bytes(),
        e.block_type.as_bytes(),
        &[u8::from(e.replay)],
        &e.server_ts.to_bits().to_be_bytes(),
        e.enc.as_bytes(),
    ])
}

/// Seals one block's JSON and signs the envelope (`conn` left unset).
pub fn seal_block(
    sealer: &mut Sealer,
    bridge: &Identity,
    session_id: &crate::ids::SessionId,
    block_type: &str,
    replay: bool,
    server_ts: f64,
    block_json: &[u8],
) -> Result<BlockEnvelope, CryptoError> {
    let sealed = sealer.seal(&block_aad(session_id.as_str(), block_type, replay, server_ts), block_json)?;
    let mut envelope = BlockEnvelope {
        session_id: session_id.clone(),
        block_type: block_type.to_owned(),
        enc: b64(&sealed),
        sig: None,
        replay,
        server_ts,
        conn: None,
    };
    envelope.sig = Some(b64(&bridge.sign(&block_sig_bytes(&envelope))));
    Ok(envelope)
}

/// The relay's check of a block: the bridge's signature must be present and valid.
pub fn verify_block(bridge: &PublicIdentity, e: &BlockEnvelope) -> Result<(), CryptoError> {
    let sig = e.sig.as_deref().ok_or(CryptoError::BadSignature("the block (no `sig`)"))?;
    bridge.verify(&block_sig_bytes(e), &from_b64("sig", sig)?, "the block")
}

/// The app's opening of a block: the block's JSON bytes.
pub fn open_block(opener: &mut Opener, e: &BlockEnvelope) -> Result<Vec<u8>, CryptoError> {
    opener.open(&block_aad(e.session_id.as_str(), &e.block_type, e.replay, e.server_ts), &from_b64("enc", &e.enc)?)
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

/// Opens a `reply` frame's body.
pub fn open_reply(opener: &mut Opener, bridge_id: &str, device_id: &str, body: &str) -> Result<Vec<u8>, CryptoError> {
    opener.open(&reply_aad(bridge_id, device_id), &from_b64("body", body)?)
}

/// What the device signs to open a link: transcript("terminull/v1 link-hello",
/// bridge_id, device_id, client_nonce).
pub fn link_hello_bytes(bridge_id: &str, device_id: &str, client_nonce: &[u8; 16]) -> Vec<u8> {
    transcript(&[b"terminull/v1 link-hello", bridge_id.as_bytes(), device_id.as_bytes(), client_nonce])
}

/// What the bridge signs to accept a link: transcript("terminull/v1 link-accept",
/// bridge_id, device_id, client_nonce, bridge_nonce).
pub fn link_accept_bytes(
    bridge_id: &str,
    device_id: &str,
    client_nonce: &[u8; 16],
    bridge_nonce: &[u8; 16],
) -> Vec<u8> {
    transcript(&[b"terminull/v1 link-accept", bridge_id.as_bytes(), device_id.as_bytes(), client_nonce, bridge_nonce])
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
    fn a_sealed_block_verifies_opens_and_resists_relabelling() {
        let bridge = Identity::generate();
        let keys = session_keys(&[3; 32], "s-1", &[4; 32], &[5; 16]);
        let mut bridge_side = Channel::bridge_side(&keys, "block");
        let mut app_side = Channel::app_side(&keys, "block");
        let sid = SessionId("s-1".into());
        let e = seal_block(&mut bridge_side.sealer, &bridge, &sid, "text", false, 1.5, br#"{"type":"text"}"#).unwrap();
        verify_block(&bridge.public(), &e).unwrap();
        let mut relabelled = e.clone();
        relabelled.block_type = "error".into();
        assert!(verify_block(&bridge.public(), &relabelled).is_err());
        assert!(open_block(&mut app_side.opener, &relabelled).is_err());
        let mut stripped = e.clone();
        stripped.sig = None;
        assert!(verify_block(&bridge.public(), &stripped).is_err());
        assert_eq!(open_block(&mut app_side.opener, &e).unwrap(), br#"{"type":"text"}"#);
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
