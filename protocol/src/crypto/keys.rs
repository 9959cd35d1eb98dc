//! Long-term identities: an Ed25519 key that signs and an X25519 key that agrees
//! keys, for the bridge and for each device. Ids are derived from the Ed25519
//! public key, so an id cannot be claimed without the key.

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use x25519_dalek::{PublicKey, StaticSecret};

use super::{CryptoError, b64url, b64url_array, sha256, transcript};
use crate::ids::{BridgeId, DeviceId};

/// Label of the id derivation.
const ID_LABEL: &[u8] = b"terminull/v1 id";

/// A private identity (bridge or device).
#[derive(Clone)]
pub struct Identity {
    signing: SigningKey,
    exchange: StaticSecret,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secret keys.
        f.debug_struct("Identity").field("public", &self.public()).finish()
    }
}

/// The identity file's contents: both secret keys, base64url. Stored mode 0600.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentitySecrets {
    /// The Ed25519 secret key (32-byte seed), base64url.
    pub ed25519_secret: String,
    /// The X25519 secret scalar (32 bytes), base64url.
    pub x25519_secret: String,
}

impl Identity {
    /// A fresh identity from the operating system's CSPRNG.
    pub fn generate() -> Self {
        Self::from_bytes(super::random_bytes::<32>(), super::random_bytes::<32>())
    }

    /// An identity from its two 32-byte secrets (test vectors use fixed ones).
    pub fn from_bytes(ed25519_seed: [u8; 32], x25519_secret: [u8; 32]) -> Self {
        Self { signing: SigningKey::from_bytes(&ed25519_seed), exchange: StaticSecret::from(x25519_secret) }
    }

    /// Reads the identity file's contents.
    pub fn from_secrets(secrets: &IdentitySecrets) -> Result<Self, CryptoError> {
        Ok(Self::from_bytes(
            b64url_array("ed25519_secret", &secrets.ed25519_secret)?,
            b64url_array("x25519_secret", &secrets.x25519_secret)?,
        ))
    }

    /// The identity file's contents.
    pub fn secrets(&self) -> IdentitySecrets {
        IdentitySecrets {
            ed25519_secret: b64url(&self.signing.to_bytes()),
            x25519_secret: b64url(&self.exchange.to_bytes()),
        }
    }

    /// The public half.
    pub fn public(&self) -> PublicIdentity {
        PublicIdentity { ed25519: self.signing.verifying_key(), x25519: PublicKey::from(&self.exchange) }
    }

    /// Ed25519 signature over `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.signing.sign(message).to_bytes()
    }

    /// X25519 with `peer`: the 32-byte shared secret. Refuses a low-order peer key
    /// (all-zero shared secret), which would make every derived key public.
    pub fn agree(&self, peer: &PublicKey, what: &'static str) -> Result<[u8; 32], CryptoError> {
        let shared = self.exchange.diffie_hellman(peer);
        if !shared.was_contributory() {
            return Err(CryptoError::BadKey(what));
        }
        Ok(shared.to_bytes())
    }
}

/// The app's X25519 key for one session attachment (the spec's `ios_epk`): fresh for
/// every `session_request` and `session_resume`.
pub struct AppSessionKey(StaticSecret);

impl std::fmt::Debug for AppSessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AppSessionKey(..)")
    }
}

impl AppSessionKey {
    /// A fresh key.
    pub fn generate() -> Self {
        Self(StaticSecret::from(super::random_bytes::<32>()))
    }

    /// From fixed bytes (test vectors).
    pub fn from_bytes(secret: [u8; 32]) -> Self {
        Self(StaticSecret::from(secret))
    }

    /// The public key's 32 bytes.
    pub fn public_bytes(&self) -> [u8; 32] {
        PublicKey::from(&self.0).to_bytes()
    }

    /// X25519 with the bridge's key; refuses a low-order key.
    pub fn agree(&self, bridge: &PublicKey) -> Result<[u8; 32], CryptoError> {
        let shared = self.0.diffie_hellman(bridge);
        if !shared.was_contributory() {
            return Err(CryptoError::BadKey("bridge x25519"));
        }
        Ok(shared.to_bytes())
    }
}

/// A public identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublicIdentity {
    /// Verifies signatures.
    pub ed25519: VerifyingKey,
    /// Agrees keys.
    pub x25519: PublicKey,
}

/// A public identity on the wire: both keys base64url (32 bytes each).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PublicKeys {
    /// Ed25519 public key, base64url without padding.
    pub ed25519: String,
    /// X25519 public key, base64url without padding.
    pub x25519: String,
}

impl PublicIdentity {
    /// The wire form.
    pub fn to_wire(&self) -> PublicKeys {
        PublicKeys { ed25519: b64url(self.ed25519.as_bytes()), x25519: b64url(self.x25519.as_bytes()) }
    }

    /// Parses the wire form; a key that is not a valid point is refused.
    pub fn from_wire(keys: &PublicKeys) -> Result<Self, CryptoError> {
        let ed = b64url_array::<32>("ed25519", &keys.ed25519)?;
        let x = b64url_array::<32>("x25519", &keys.x25519)?;
        Ok(Self {
            ed25519: VerifyingKey::from_bytes(&ed).map_err(|_| CryptoError::BadKey("ed25519"))?,
            x25519: PublicKey::from(x),
        })
    }

    /// Checks an Ed25519 signature (strict: refuses malleable and small-order forms).
    pub fn verify(&self, message: &[u8], signature: &[u8], what: &'static str) -> Result<(), CryptoError> {
        verify(&self.ed25519, message, signature, what)
    }

    /// The bridge id this key gives.
    pub fn bridge_id(&self) -> BridgeId {
        BridgeId(format!("brg_{}", fingerprint(&self.ed25519)))
    }

    /// The device id this key gives.
    pub fn device_id(&self) -> DeviceId {
        DeviceId(format!("dev_{}", fingerprint(&self.ed25519)))
    }
}

/// Checks an Ed25519 signature with `verify_strict`.
pub fn verify(key: &VerifyingKey, message: &[u8], signature: &[u8], what: &'static str) -> Result<(), CryptoError> {
    let signature = ed25519_dalek::Signature::from_slice(signature).map_err(|_| CryptoError::BadSignature(what))?;
    key.verify_strict(message, &signature).map_err(|_| CryptoError::BadSignature(what))
}

/// Parses a base64url Ed25519 public key.
pub fn ed25519_key(field: &'static str, text: &str) -> Result<VerifyingKey, CryptoError> {
    VerifyingKey::from_bytes(&b64url_array::<32>(field, text)?).map_err(|_| CryptoError::BadKey(field))
}

/// Parses a base64url X25519 public key.
pub fn x25519_key(field: &'static str, text: &str) -> Result<PublicKey, CryptoError> {
    Ok(PublicKey::from(b64url_array::<32>(field, text)?))
}

/// The 16 lowercase base32 characters of SHA-256(transcript(label, key))[..10].
fn fingerprint(key: &VerifyingKey) -> String {
    base32_lower(&sha256(&transcript(&[ID_LABEL, key.as_bytes()]))[..10])
}

/// RFC 4648 base32, lowercase, no padding.
fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &b in bytes {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32_matches_rfc_4648_test_vectors() {
        // RFC 4648 §10, lowercased, padding removed.
        for (input, expected) in [
            ("", ""),
            ("f", "my"),
            ("fo", "mzxq"),
            ("foo", "mzxw6"),
            ("foob", "mzxw6yq"),
            ("fooba", "mzxw6ytb"),
            ("foobar", "mzxw6ytboi"),
        ] {
            assert_eq!(base32_lower(input.as_bytes()), expected);
        }
    }

    #[test]
    fn ids_are_derived_from_the_signing_key() {
        let a = Identity::from_bytes([1; 32], [2; 32]).public();
        let b = Identity::from_bytes([3; 32], [2; 32]).public();
        assert!(a.bridge_id().as_str().starts_with("brg_") && a.bridge_id().as_str().len() == 20);
        assert_ne!(a.bridge_id(), b.bridge_id());
        assert_eq!(a.device_id().as_str()[4..], a.bridge_id().as_str()[4..]);
    }

    #[test]
    fn identity_secrets_round_trip_and_wire_keys_parse() {
        let id = Identity::generate();
        let again = Identity::from_secrets(&id.secrets()).unwrap();
        assert_eq!(id.public(), again.public());
        assert_eq!(PublicIdentity::from_wire(&id.public().to_wire()).unwrap(), id.public());
    }

    #[test]
    fn a_low_order_peer_key_is_refused() {
        let id = Identity::generate();
        assert_eq!(id.agree(&PublicKey::from([0u8; 32]), "app_pubkey"), Err(CryptoError::BadKey("app_pubkey")));
    }
}
