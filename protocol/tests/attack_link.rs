//! Forward secrecy of the link, shown with the published vectors
//! (`docs/vectors/envelope.json`): an attacker who recorded a link (its
//! `link_hello`, `link_accept` and a sealed `control`) and later stole the bridge's
//! `identity.json` **and** the device's identity computes every Diffie–Hellman
//! result but `ee`, and no guess at `ee` it can make gives the link's keys; the same
//! code given an ephemeral secret reproduces them (so the test fails if the keys
//! stop depending on it).

use serde_json::Value;
use terminull_protocol::crypto::channel::{Channel, DirectionalKeys};
use terminull_protocol::crypto::envelope::open_control;
use terminull_protocol::crypto::handshake::{DhResults, HandshakeFields, link_keys};
use terminull_protocol::crypto::{b64url_array, sha256};
use terminull_protocol::relay::{ControlEnvelope, LinkAccept, LinkHello};
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

fn vectors() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/vectors/envelope.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn unhex(text: &Value) -> [u8; 32] {
    let text = text.as_str().unwrap();
    std::array::from_fn(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
}

fn dh(secret: [u8; 32], public: [u8; 32]) -> Zeroizing<[u8; 32]> {
    Zeroizing::new(StaticSecret::from(secret).diffie_hellman(&PublicKey::from(public)).to_bytes())
}

/// Whether `keys` open the recorded control (what an attacker would try).
fn opens(keys: &DirectionalKeys, bridge_id: &str, control: &ControlEnvelope) -> bool {
    open_control(&mut Channel::bridge_side(keys, "link").opener, bridge_id, control).is_ok()
}

#[test]
#[allow(clippy::print_stdout, reason = "the attack table line")]
fn attack_recorded_link_with_stolen_identity() {
    let v = vectors();
    // What was stolen: both long-term X25519 secrets (identity.json, device-identity.json).
    let bridge_x = unhex(&v["bridge"]["x25519_secret_hex"]);
    let device_x = unhex(&v["device"]["x25519_secret_hex"]);
    let bridge_id = v["bridge"]["bridge_id"].as_str().unwrap();
    let device_id = v["device"]["device_id"].as_str().unwrap();
    // What was recorded on the relay.
    let hello: LinkHello = serde_json::from_value(v["link"]["link_hello"].clone()).unwrap();
    let accept: LinkAccept = serde_json::from_value(v["link"]["link_accept"].clone()).unwrap();
    let control: ControlEnvelope = serde_json::from_value(v["link"]["control"].clone()).unwrap();
    let fields = HandshakeFields {
        bridge_id,
        device_id,
        client_nonce: b64url_array("client_nonce", &hello.client_nonce).unwrap(),
        client_ephemeral: b64url_array("client_ephemeral", &hello.client_ephemeral).unwrap(),
        bridge_nonce: b64url_array("bridge_nonce", &accept.bridge_nonce).unwrap(),
        bridge_ephemeral: b64url_array("bridge_ephemeral", &accept.bridge_ephemeral).unwrap(),
    };
    let bridge_static = PublicKey::from(&StaticSecret::from(bridge_x)).to_bytes();
    let device_static = PublicKey::from(&StaticSecret::from(device_x)).to_bytes();
    // Everything the attacker can compute: es, se and ss from the stolen secrets.
    let es = dh(bridge_x, fields.client_ephemeral);
    let se = dh(device_x, fields.bridge_ephemeral);
    let ss = dh(bridge_x, device_static);
    assert_eq!(hex(&es[..]), v["link_handshake"]["dh_es_hex"].as_str().unwrap(), "the attacker has es");
    assert_eq!(hex(&se[..]), v["link_handshake"]["dh_se_hex"].as_str().unwrap(), "the attacker has se");
    assert_eq!(hex(&ss[..]), v["link_handshake"]["dh_ss_hex"].as_str().unwrap(), "the attacker has ss");
    // Every stand-in for ee it can form from what it holds.
    let guesses: Vec<(&str, Zeroizing<[u8; 32]>)> = vec![
        ("zero", Zeroizing::new([0; 32])),
        ("ss", ss.clone()),
        ("es", es.clone()),
        ("se", se.clone()),
        ("bridge static x client ephemeral", dh(bridge_x, fields.client_ephemeral)),
        ("device static x bridge ephemeral", dh(device_x, fields.bridge_ephemeral)),
        ("bridge static x bridge ephemeral", dh(bridge_x, fields.bridge_ephemeral)),
        ("device static x client ephemeral", dh(device_x, fields.client_ephemeral)),
        ("bridge static x bridge static", dh(bridge_x, bridge_static)),
        ("the handshake hash", Zeroizing::new(fields.hash())),
        (
            "SHA-256 of both ephemerals",
            Zeroizing::new(sha256(&[fields.client_ephemeral, fields.bridge_ephemeral].concat())),
        ),
    ];
    let mut opened = 0;
    for (what, ee) in &guesses {
        let keys = link_keys(&DhResults { ee: ee.clone(), es: es.clone(), se: se.clone(), ss: ss.clone() }, &fields);
        if opens(&keys, bridge_id, &control) || hex(&keys.app_to_bridge) == v["link"]["app_to_bridge_key_hex"] {
            eprintln!("ee stand-in `{what}` reproduced the link keys");
            opened += 1;
        }
    }
    // Control: with one ephemeral secret (which the endpoints zeroize and never store),
    // the very same derivation reproduces the published keys and opens the control.
    let client_eph = unhex(&v["link_handshake"]["client_ephemeral_secret_hex"]);
    let ee = dh(client_eph, fields.bridge_ephemeral);
    let keys = link_keys(&DhResults { ee, es: es.clone(), se: se.clone(), ss: ss.clone() }, &fields);
    assert_eq!(hex(&keys.app_to_bridge), v["link"]["app_to_bridge_key_hex"].as_str().unwrap());
    assert!(opens(&keys, bridge_id, &control), "with the ephemeral secret the control opens");
    println!(
        "attack: recorded link with stolen identity: {opened}/{} keys reproduced without an ephemeral secret \
         (es, se, ss known; ee unknown); with the device's ephemeral secret: control opened",
        guesses.len()
    );
    assert_eq!(opened, 0, "the link keys must depend on an ephemeral secret");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
