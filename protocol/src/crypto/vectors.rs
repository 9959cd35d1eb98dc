//! The committed test vectors for terminull's own envelope (`docs/vectors/envelope.json`):
//! every key, nonce and sealed message of one pairing, one link and one session,
//! computed from fixed inputs by the functions the bridge and the clients use, so
//! an implementation in another language can check itself byte for byte.
//!
//! `cargo test -p terminull-protocol --test envelope_vectors` fails on drift; run it
//! with `TERMINULL_BLESS=1` to rewrite the file after an intended change.

use serde_json::{Value, json};

use super::channel::{Channel, Sealer, push_key, session_keys};
use super::envelope::{batch_sig_bytes, push_aad, relay_auth_bytes, seal_block, seal_control, seal_reply, sign_batch};
use super::handshake::{DeviceHandshake, HandshakeFields, LinkEphemeral, accept_hello_with, link_hello_bytes};
use super::keys::{AppSessionKey, Identity};
use super::pairing::{PairingLink, accept_with_nonce, request_with_nonce};
use super::{CryptoError, b64, b64url};
use crate::ids::SessionId;
use crate::relay::{Attach, RelayFrame, SealedReply};

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn seq(start: u8) -> [u8; 32] {
    std::array::from_fn(|i| start.wrapping_add(i as u8))
}

/// Computes every vector from fixed inputs.
pub fn envelope_vectors() -> Result<Value, CryptoError> {
    let json_err = |e: serde_json::Error| CryptoError::Json { what: "vector", detail: e.to_string() };
    let (bridge_seed, bridge_x) = (seq(0x00), seq(0x20));
    let (device_seed, device_x) = (seq(0x40), seq(0x60));
    let bridge = Identity::from_bytes(bridge_seed, bridge_x);
    let device = Identity::from_bytes(device_seed, device_x);
    let bp = bridge.public();
    let dp = device.public();
    let bridge_id = bp.bridge_id();
    let device_id = dp.device_id();

    // Pairing.
    let secret = seq(0x80);
    let link = PairingLink {
        bridge_id: bridge_id.clone(),
        bridge: bp.to_wire(),
        relay: Some("wss://relay.example".into()),
        lan: None,
        secret,
        expires_at: 1_767_225_600,
    };
    let device_nonce = [0xd1; 16];
    let pair_bridge_nonce = [0xb1; 16];
    let (request, pending) = request_with_nonce(&link, &device, "phone", device_nonce)?;
    let accepted = accept_with_nonce(&bridge, &secret, &request, pair_bridge_nonce)?;
    let paired = pending.finish(&accepted.response)?;

    // Relay authentication.
    let challenge = [0xc0; 32];
    let bridge_auth = bridge.sign(&relay_auth_bytes("bridge", bridge_id.as_str(), bridge_id.as_str(), &challenge));
    let device_auth = device.sign(&relay_auth_bytes("device", device_id.as_str(), bridge_id.as_str(), &challenge));

    // Link handshake (version 3: ephemeral keys; see link_handshake_vectors).
    let client_nonce = [0x11; 16];
    let bridge_nonce = [0x22; 16];
    let link_shared = bridge.agree(&dp.x25519, "device x25519")?;
    let (hello, pending) = DeviceHandshake::start_with(
        &device,
        bridge_id.as_str(),
        client_nonce,
        LinkEphemeral::from_bytes(seq(0xc0).into()),
    );
    let (accept, lk) =
        accept_hello_with(&bridge, &dp, &hello, bridge_nonce, LinkEphemeral::from_bytes(seq(0xe0).into()))?;
    if pending.finish(&device, &bp, &accept)? != lk {
        return Err(CryptoError::Pairing("the two sides of the vector link disagree".into()));
    }
    let handshake = link_handshake_vectors(&bridge, &device, &hello, &accept, &lk)?;
    let (hello, accept) = (RelayFrame::LinkHello(hello), RelayFrame::LinkAccept(accept));
    let mut app_link = Channel::app_side(&lk, "link");
    let mut bridge_link = Channel::bridge_side(&lk, "link");
    let app_key = AppSessionKey::from_bytes(seq(0xa0));
    let app_pubkey = b64url(&app_key.public_bytes());
    let control_plain = json!({"id": "c1", "type": "session_request", "agent": "echo", "cwd": "/home/u/project", "app_pubkey": app_pubkey});
    let control_bytes = serde_json::to_vec(&control_plain).map_err(json_err)?;
    let control = seal_control(&mut app_link.sealer, &device, bridge_id.as_str(), None, None, &control_bytes)?;

    // Session.
    let session_id = SessionId("s-0192f0c5a1b27c3d8e9f00112233aabb".into());
    let attach_nonce = [0x33; 16];
    let session_shared = bridge.agree(&x25519_dalek::PublicKey::from(app_key.public_bytes()), "app_pubkey")?;
    let sk = session_keys(&session_shared, session_id.as_str(), &app_key.public_bytes(), &attach_nonce);
    let reply_plain = SealedReply {
        reply: crate::control::Reply::ok(
            Some("c1".into()),
            crate::control::ReplyResult::SessionStarted { session_id: session_id.clone() },
        ),
        attach: Some(Attach { session_id: session_id.clone(), attach_nonce: b64url(&attach_nonce) }),
    };
    let reply_bytes = serde_json::to_vec(&reply_plain).map_err(json_err)?;
    let reply_body = seal_reply(&mut bridge_link.sealer, bridge_id.as_str(), device_id.as_str(), &reply_bytes)?;
    let block_plain = json!({"seq": 2, "ts": 1767225611.25, "type": "text", "id": "t1", "text": "Hello", "done": true});
    let block_bytes = serde_json::to_vec(&block_plain).map_err(json_err)?;
    let mut session_sealer = Sealer::new(sk.bridge_to_app, "block");
    let block = seal_block(&mut session_sealer, &session_id, "text", false, 1_767_225_611.25, &block_bytes)?;
    // A batch: the next two blocks of the session (a streamed answer as appends) for
    // relay connection 7, under one signature.
    let appends = [
        json!({"seq": 3, "ts": 1767225612.5, "type": "text", "id": "t2", "offset": 0, "text": "Hel", "done": false}),
        json!({"seq": 4, "ts": 1767225612.75, "type": "text", "id": "t2", "offset": 3, "text": "lo", "done": true}),
    ];
    let mut batch_plaintexts = Vec::new();
    let mut batch_blocks = Vec::new();
    for (plain, server_ts) in appends.iter().zip([1_767_225_612.5, 1_767_225_612.75]) {
        let bytes = serde_json::to_vec(plain).map_err(json_err)?;
        batch_blocks.push(seal_block(&mut session_sealer, &session_id, "text", false, server_ts, &bytes)?);
        batch_plaintexts.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    let batch_conn = 7;
    let batch_fields: Vec<_> = batch_blocks.iter().map(|b| b.fields()).collect();
    let batch_signed = batch_sig_bytes(bridge_id.as_str(), batch_conn, &batch_fields);
    let forwarded: Vec<RelayFrame> = batch_blocks.iter().cloned().map(RelayFrame::Block).collect();
    let batch = sign_batch(&bridge, batch_conn, batch_blocks);

    // Push.
    let pk = push_key(&link_shared, bridge_id.as_str(), device_id.as_str());
    let push_counter = 1_767_225_612_000_000u64;
    let push_plain =
        json!({"session_id": session_id, "kind": "turn_finished", "title": "echo: turn finished", "body": ""});
    let push_bytes = serde_json::to_vec(&push_plain).map_err(json_err)?;
    let push_payload = Sealer::starting_at(pk, push_counter, "push")
        .seal(&push_aad(bridge_id.as_str(), device_id.as_str(), "turn_finished"), &push_bytes)?;

    Ok(json!({
        "description": "terminull envelope test vectors, generated by protocol/src/crypto/vectors.rs; docs/encryption.md explains every field",
        "bridge": {
            "ed25519_seed_hex": hex(&bridge_seed),
            "x25519_secret_hex": hex(&bridge_x),
            "keys": bp.to_wire(),
            "bridge_id": bridge_id,
        },
        "device": {
            "ed25519_seed_hex": hex(&device_seed),
            "x25519_secret_hex": hex(&device_x),
            "keys": dp.to_wire(),
            "device_id": device_id,
        },
        "pairing": {
            "secret_hex": hex(&secret),
            "pairing_id": link.pairing_id(),
            "link": link.to_url("https://relay.example"),
            "device_nonce_hex": hex(&device_nonce),
            "bridge_nonce_hex": hex(&pair_bridge_nonce),
            "request": request,
            "response": accepted.response,
            "short_code": paired.short_code,
        },
        "relay_auth": {
            "challenge_hex": hex(&challenge),
            "bridge_sig": b64(&bridge_auth),
            "device_sig": b64(&device_auth),
        },
        "link_handshake": handshake,
        "link": {
            "static_shared_hex": hex(&link_shared),
            "app_to_bridge_key_hex": hex(&lk.app_to_bridge),
            "bridge_to_app_key_hex": hex(&lk.bridge_to_app),
            "link_hello": hello,
            "link_accept": accept,
            "control_plaintext": String::from_utf8_lossy(&control_bytes),
            "control": RelayFrame::Control(control),
            "reply_plaintext": String::from_utf8_lossy(&reply_bytes),
            "reply_body": reply_body,
        },
        "session": {
            "session_id": session_id,
            "app_secret_hex": hex(&seq(0xa0)),
            "app_pubkey": app_pubkey,
            "attach_nonce_hex": hex(&attach_nonce),
            "shared_secret_hex": hex(&session_shared),
            "app_to_bridge_key_hex": hex(&sk.app_to_bridge),
            "bridge_to_app_key_hex": hex(&sk.bridge_to_app),
            "block_plaintext": String::from_utf8_lossy(&block_bytes),
            "block": RelayFrame::Block(block),
        },
        "batch": {
            "conn": batch_conn,
            "block_plaintexts": batch_plaintexts,
            "signed_bytes_hex": hex(&batch_signed),
            "frame": RelayFrame::Batch(batch),
            "forwarded": forwarded,
        },
        "push": {
            "key_hex": hex(&pk),
            "counter": push_counter,
            "kind": "turn_finished",
            "plaintext": String::from_utf8_lossy(&push_bytes),
            "payload": b64(&push_payload),
        },
    }))
}

/// The handshake's intermediate values: both ephemeral secrets, the signed bytes,
/// the four Diffie–Hellman results, the handshake hash and the keys.
fn link_handshake_vectors(
    bridge: &Identity,
    device: &Identity,
    hello: &crate::relay::LinkHello,
    accept: &crate::relay::LinkAccept,
    keys: &super::channel::DirectionalKeys,
) -> Result<Value, CryptoError> {
    use super::b64url_array;
    let (bp, dp) = (bridge.public(), device.public());
    let (bridge_id, device_id) = (bp.bridge_id(), dp.device_id());
    let fields = HandshakeFields {
        bridge_id: bridge_id.as_str(),
        device_id: device_id.as_str(),
        client_nonce: b64url_array("client_nonce", &hello.client_nonce)?,
        client_ephemeral: b64url_array("client_ephemeral", &hello.client_ephemeral)?,
        bridge_nonce: b64url_array("bridge_nonce", &accept.bridge_nonce)?,
        bridge_ephemeral: b64url_array("bridge_ephemeral", &accept.bridge_ephemeral)?,
    };
    let dh = |secret: [u8; 32], public: [u8; 32]| {
        x25519_dalek::StaticSecret::from(secret).diffie_hellman(&x25519_dalek::PublicKey::from(public)).to_bytes()
    };
    let (client_eph, bridge_eph) = (seq(0xc0), seq(0xe0));
    Ok(json!({
        "protocol_version": crate::relay::PROTOCOL_VERSION,
        "client_nonce_hex": hex(&fields.client_nonce),
        "client_ephemeral_secret_hex": hex(&client_eph),
        "client_ephemeral": hello.client_ephemeral,
        "bridge_nonce_hex": hex(&fields.bridge_nonce),
        "bridge_ephemeral_secret_hex": hex(&bridge_eph),
        "bridge_ephemeral": accept.bridge_ephemeral,
        "hello_signed_bytes_hex": hex(&link_hello_bytes(
            bridge_id.as_str(),
            device_id.as_str(),
            &fields.client_nonce,
            &fields.client_ephemeral,
        )),
        "accept_signed_bytes_hex": hex(&fields.accept_bytes()),
        "handshake_hash_hex": hex(&fields.hash()),
        "dh_ee_hex": hex(&dh(client_eph, fields.bridge_ephemeral)),
        "dh_es_hex": hex(&dh(client_eph, bp.x25519.to_bytes())),
        "dh_se_hex": hex(&dh(seq(0x60), fields.bridge_ephemeral)),
        "dh_ss_hex": hex(&dh(seq(0x60), bp.x25519.to_bytes())),
        "app_to_bridge_key_hex": hex(&keys.app_to_bridge),
        "bridge_to_app_key_hex": hex(&keys.bridge_to_app),
    }))
}
