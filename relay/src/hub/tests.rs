//! Unit tests of the hub's checks.

use super::*;

#[test]
fn resumable_sessions_are_deduplicated_and_the_newest_kept() {
    let ids: Vec<SessionId> = ["a", "b", "a", "c", "d"].iter().map(|s| SessionId((*s).into())).collect();
    let kept = bounded_sessions(&ids, 2);
    assert_eq!(kept, vec![SessionId("c".into()), SessionId("d".into())]);
}

#[test]
fn a_device_whose_id_does_not_match_its_key_is_refused() {
    let key = terminull_protocol::crypto::keys::Identity::generate().public();
    let record = DeviceRecord {
        device_id: DeviceId("dev_aaaaaaaaaaaaaaaa".into()),
        keys: key.to_wire(),
        name: "phone".into(),
        revoked: false,
    };
    assert!(check_devices(std::slice::from_ref(&record), 8).unwrap_err().message.contains("does not match"));
    let good = DeviceRecord { device_id: key.device_id(), ..record };
    assert_eq!(check_devices(std::slice::from_ref(&good), 8).unwrap().len(), 1);
    assert!(check_devices(&[good.clone(), good.clone()], 8).unwrap_err().message.contains("twice"));
    let revoked = DeviceRecord { revoked: true, ..good };
    assert!(check_devices(&[revoked], 8).unwrap().is_empty(), "revoked devices may not connect");
}
