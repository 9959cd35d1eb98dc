//! Published test vectors run through the exact functions terminull uses:
//! RFC 7748 (X25519), RFC 5869 (HKDF-SHA256), RFC 8032 (Ed25519), RFC 4231
//! (HMAC-SHA256) and the GCM specification's AES-256 cases (McGrew & Viega, test
//! cases 13 and 14, whose all-zero IV is the nonce of counter 0).

use super::channel::Sealer;
use super::keys::Identity;
use super::vectors::hex;
use super::{hkdf_sha256, hmac_sha256};

fn unhex<const N: usize>(s: &str) -> [u8; N] {
    let v: Vec<u8> = (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect();
    v.try_into().unwrap()
}

#[test]
fn rfc_7748_x25519_alice_and_bob_agree_on_the_published_secret() {
    // RFC 7748 §6.1.
    let alice =
        Identity::from_bytes([0; 32], unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"));
    let bob = Identity::from_bytes([0; 32], unhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"));
    assert_eq!(
        hex(alice.public().x25519.as_bytes()),
        "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
    );
    assert_eq!(hex(bob.public().x25519.as_bytes()), "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
    let shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742";
    assert_eq!(hex(&alice.agree(&bob.public().x25519, "bob").unwrap()), shared);
    assert_eq!(hex(&bob.agree(&alice.public().x25519, "alice").unwrap()), shared);
}

#[test]
fn rfc_5869_hkdf_sha256_test_case_1() {
    let ikm = [0x0b; 22];
    let salt = unhex::<13>("000102030405060708090a0b0c");
    let info = unhex::<10>("f0f1f2f3f4f5f6f7f8f9");
    let okm: [u8; 42] = hkdf_sha256(&salt, &ikm, &info);
    assert_eq!(hex(&okm), "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
}

#[test]
fn rfc_4231_hmac_sha256_test_case_2() {
    assert_eq!(
        hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn rfc_8032_ed25519_tests_1_and_2_sign_and_verify() {
    let cases = [
        (
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
            "",
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
        ),
        (
            "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
            "72",
            "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
        ),
    ];
    for (seed, public, message, signature) in cases {
        let id = Identity::from_bytes(unhex(seed), [9; 32]);
        assert_eq!(hex(id.public().ed25519.as_bytes()), public);
        let msg: Vec<u8> =
            (0..message.len()).step_by(2).map(|i| u8::from_str_radix(&message[i..i + 2], 16).unwrap()).collect();
        assert_eq!(hex(&id.sign(&msg)), signature);
        id.public().verify(&msg, &id.sign(&msg), "vector").unwrap();
    }
}

#[test]
fn gcm_spec_aes_256_test_cases_13_and_14_through_the_sealer() {
    // Counter 0 gives the all-zero IV of the published cases.
    let sealed = Sealer::starting_at([0; 32], 0, "gcm").seal(b"", b"").unwrap();
    assert_eq!(hex(&sealed[12..]), "530f8afbc74536b9a963b4f1c4cb738b");
    let sealed = Sealer::starting_at([0; 32], 0, "gcm").seal(b"", &[0; 16]).unwrap();
    assert_eq!(hex(&sealed[..12]), "000000000000000000000000");
    assert_eq!(hex(&sealed[12..]), "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919");
}
