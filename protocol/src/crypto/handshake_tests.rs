use super::*;
use crate::crypto::channel::Channel;
use crate::crypto::envelope::{open_control, seal_control};

fn pair() -> (Identity, Identity) {
    (Identity::generate(), Identity::generate())
}

#[test]
fn both_sides_derive_the_same_link_keys_and_each_link_gets_new_ones() {
    let (bridge, device) = pair();
    let bridge_id = bridge.public().bridge_id();
    let (hello, pending) = DeviceHandshake::start(&device, bridge_id.as_str());
    let (accept, bridge_keys) = accept_hello(&bridge, &device.public(), &hello).unwrap();
    let device_keys = pending.finish(&device, &bridge.public(), &accept).unwrap();
    assert_eq!(bridge_keys, device_keys);
    assert_ne!(device_keys.app_to_bridge, device_keys.bridge_to_app);
    let (hello2, pending2) = DeviceHandshake::start(&device, bridge_id.as_str());
    let (accept2, _) = accept_hello(&bridge, &device.public(), &hello2).unwrap();
    let again = pending2.finish(&device, &bridge.public(), &accept2).unwrap();
    assert_ne!(again.app_to_bridge, device_keys.app_to_bridge, "fresh ephemerals give fresh keys");
}

#[test]
fn a_link_accept_recorded_from_an_earlier_link_is_refused() {
    let (bridge, device) = pair();
    let bridge_id = bridge.public().bridge_id();
    let (old_hello, _) = DeviceHandshake::start(&device, bridge_id.as_str());
    let (old_accept, _) = accept_hello(&bridge, &device.public(), &old_hello).unwrap();
    let (_, pending) = DeviceHandshake::start(&device, bridge_id.as_str());
    let err = pending.finish(&device, &bridge.public(), &old_accept).unwrap_err();
    assert_eq!(err, CryptoError::BadSignature("link_accept"));
}

#[test]
fn a_replayed_link_hello_yields_a_link_under_which_recorded_controls_do_not_open() {
    let (bridge, device) = pair();
    let bridge_id = bridge.public().bridge_id();
    let (hello, pending) = DeviceHandshake::start(&device, bridge_id.as_str());
    let (accept, _) = accept_hello(&bridge, &device.public(), &hello).unwrap();
    let keys = pending.finish(&device, &bridge.public(), &accept).unwrap();
    let mut app = Channel::app_side(&keys, "link");
    let recorded = seal_control(&mut app.sealer, &device, bridge_id.as_str(), None, None, b"{}").unwrap();
    // The relay replays the hello: the bridge answers with a new ephemeral key.
    let (_, replayed_keys) = accept_hello(&bridge, &device.public(), &hello).unwrap();
    let mut bridge_side = Channel::bridge_side(&replayed_keys, "link");
    let err = open_control(&mut bridge_side.opener, bridge_id.as_str(), &recorded).unwrap_err();
    assert_eq!(err, CryptoError::Tampered("link"));
}

#[test]
fn a_handshake_signed_by_the_wrong_identity_is_refused() {
    let (bridge, device) = pair();
    let impostor = Identity::generate();
    let bridge_id = bridge.public().bridge_id();
    // A hello signed by another key but naming the paired device.
    let (mut forged, _) = DeviceHandshake::start(&impostor, bridge_id.as_str());
    forged.device_id = device.public().device_id();
    let err = accept_hello(&bridge, &device.public(), &forged).unwrap_err();
    assert_eq!(err, CryptoError::BadSignature("link_hello"));
    // An accept signed by another bridge key.
    let (hello, pending) = DeviceHandshake::start(&device, bridge_id.as_str());
    // The impostor signs the right bytes (this hello's nonce and key) with its own key.
    let fields = HandshakeFields {
        bridge_id: bridge_id.as_str(),
        device_id: hello.device_id.as_str(),
        client_nonce: b64url_array("client_nonce", &hello.client_nonce).unwrap(),
        client_ephemeral: b64url_array("client_ephemeral", &hello.client_ephemeral).unwrap(),
        bridge_nonce: [7; 16],
        bridge_ephemeral: LinkEphemeral::generate().public_bytes(),
    };
    let accept = LinkAccept {
        device_id: hello.device_id.clone(),
        bridge_nonce: b64url(&fields.bridge_nonce),
        bridge_ephemeral: b64url(&fields.bridge_ephemeral),
        sig: b64(&impostor.sign(&fields.accept_bytes())),
        conn: None,
    };
    let err = pending.finish(&device, &bridge.public(), &accept).unwrap_err();
    assert_eq!(err, CryptoError::BadSignature("link_accept"));
}

#[test]
fn a_swapped_ephemeral_key_breaks_the_signature() {
    let (bridge, device) = pair();
    let bridge_id = bridge.public().bridge_id();
    let (mut hello, _) = DeviceHandshake::start(&device, bridge_id.as_str());
    hello.client_ephemeral = b64url(&LinkEphemeral::generate().public_bytes());
    assert_eq!(accept_hello(&bridge, &device.public(), &hello).unwrap_err(), CryptoError::BadSignature("link_hello"));
    let (hello, pending) = DeviceHandshake::start(&device, bridge_id.as_str());
    let (mut accept, _) = accept_hello(&bridge, &device.public(), &hello).unwrap();
    accept.bridge_ephemeral = b64url(&LinkEphemeral::generate().public_bytes());
    assert_eq!(
        pending.finish(&device, &bridge.public(), &accept).unwrap_err(),
        CryptoError::BadSignature("link_accept")
    );
}

#[test]
fn a_low_order_ephemeral_key_is_refused_not_used() {
    let (bridge, device) = pair();
    let bridge_id = bridge.public().bridge_id();
    let zero = [0u8; 32];
    let nonce = [1u8; 16];
    let hello = LinkHello {
        device_id: device.public().device_id(),
        client_nonce: b64url(&nonce),
        client_ephemeral: b64url(&zero),
        sig: b64(&device.sign(&link_hello_bytes(
            bridge_id.as_str(),
            device.public().device_id().as_str(),
            &nonce,
            &zero,
        ))),
        conn: None,
    };
    assert_eq!(accept_hello(&bridge, &device.public(), &hello).unwrap_err(), CryptoError::BadKey("client_ephemeral"));
}

#[test]
fn malformed_handshake_fields_name_the_field() {
    let (bridge, device) = pair();
    let (mut hello, _) = DeviceHandshake::start(&device, bridge.public().bridge_id().as_str());
    hello.client_ephemeral = "AAAA".into();
    let err = accept_hello(&bridge, &device.public(), &hello).unwrap_err();
    assert_eq!(err.to_string(), "`client_ephemeral` must be 32 bytes, got 3");
}
