//! End-to-end cryptography between a bridge and its paired devices
//! (docs/encryption.md states every byte).
//!
//! - [`keys`]: long-term identities (Ed25519 + X25519) and the ids derived from them.
//! - [`pairing`]: the one-time-secret pairing handshake and its short code.
//! - [`channel`]: per-direction AES-256-GCM keys with counter nonces that refuse a
//!   replayed or reordered message, and the key schedules (session, push).
//! - [`handshake`]: the forward-secret link handshake (ephemeral X25519 keys signed
//!   by both identities) and the link keys.
//! - [`app_code`]: the phone app shell's digest and a bridge's signature over it.
//! - [`envelope`]: the bytes each signature and each AEAD's associated data cover,
//!   and sealing/opening of block, control and reply envelopes.
//!
//! Every byte string that is signed, MACed, used as associated data or as HKDF info
//! is a [`transcript`]: each part as a 4-byte big-endian length followed by its
//! bytes, the first part being a label that names its purpose. Two different
//! purposes can therefore never produce the same bytes.

pub mod app_code;
pub mod attested;
pub mod channel;
pub mod envelope;
pub mod handshake;
pub mod keys;
pub mod pairing;
pub mod vectors;

#[cfg(test)]
mod published_vectors;

use base64::Engine as _;

/// Why a cryptographic operation failed. Messages name the field or step that failed
/// and never include secret material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// A field is not valid base64 / base64url.
    #[error("`{field}` is not valid {encoding}")]
    Encoding {
        /// The field.
        field: &'static str,
        /// `base64` or `base64url`.
        encoding: &'static str,
    },
    /// A field decoded to the wrong number of bytes.
    #[error("`{field}` must be {expected} bytes, got {got}")]
    Length {
        /// The field.
        field: &'static str,
        /// Bytes expected.
        expected: usize,
        /// Bytes found.
        got: usize,
    },
    /// A public key is not a valid point.
    #[error("`{0}` is not a valid public key")]
    BadKey(&'static str),
    /// A signature did not verify.
    #[error("the signature over {0} does not verify")]
    BadSignature(&'static str),
    /// A MAC did not verify.
    #[error("the MAC over {0} does not verify (wrong pairing secret?)")]
    BadMac(&'static str),
    /// AES-GCM refused the ciphertext: tampered, or sealed under another key.
    #[error("{0}: authentication failed (tampered, or sealed under another key)")]
    Tampered(&'static str),
    /// The nonce's counter is not above the last one accepted.
    #[error("{what}: counter {got} is not above the last accepted {last} (replayed or reordered)")]
    Replayed {
        /// Which channel.
        what: &'static str,
        /// The counter received.
        got: u64,
        /// The highest counter accepted so far.
        last: u64,
    },
    /// The counter skipped one or more: a message sent before this one never arrived
    /// (dropped on the way). Only streams that must arrive whole check this
    /// ([`channel::Opener::open_next`]).
    #[error("{what}: counter {got} arrived where {expected} was due (a message before it was dropped)")]
    Missing {
        /// Which channel.
        what: &'static str,
        /// The counter due next.
        expected: u64,
        /// The counter received.
        got: u64,
    },
    /// The nonce's fixed prefix is not zero.
    #[error("{0}: malformed nonce")]
    BadNonce(&'static str),
    /// A sender's counter is exhausted (2^64 - 1 messages); the channel must be re-keyed.
    #[error("{0}: counter exhausted")]
    Exhausted(&'static str),
    /// A pairing link or offer is malformed or expired.
    #[error("pairing: {0}")]
    Pairing(String),
    /// An app shell is not the list of files its digest covers (app_code::SHELL_PATHS).
    #[error("app shell: {0}")]
    AppShell(String),
    /// The sealed plaintext is not the JSON expected.
    #[error("{what}: the opened plaintext is not valid JSON: {detail}")]
    Json {
        /// Which payload.
        what: &'static str,
        /// serde's message.
        detail: String,
    },
}

/// The bytes of `parts` framed without ambiguity: each part as a 4-byte big-endian
/// length, then its bytes.
pub fn transcript(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for part in parts {
        // Parts are labels, ids, keys and envelope fields: far below 4 GiB.
        out.extend_from_slice(&(part.len() as u32).to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// base64url without padding (keys, nonces, ids in links and identity files).
pub fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Standard base64 with padding (`enc`, `body` and `sig` of envelopes).
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes base64url without padding (padding tolerated).
pub fn from_b64url(field: &'static str, text: &str) -> Result<Vec<u8>, CryptoError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|_| CryptoError::Encoding { field, encoding: "base64url" })
}

/// Decodes standard base64 with padding.
pub fn from_b64(field: &'static str, text: &str) -> Result<Vec<u8>, CryptoError> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| CryptoError::Encoding { field, encoding: "base64" })
}

/// Decodes base64url into exactly `N` bytes.
pub fn b64url_array<const N: usize>(field: &'static str, text: &str) -> Result<[u8; N], CryptoError> {
    let bytes = from_b64url(field, text)?;
    <[u8; N]>::try_from(bytes.as_slice()).map_err(|_| CryptoError::Length { field, expected: N, got: bytes.len() })
}

/// Decodes standard base64 into exactly `N` bytes.
pub fn b64_array<const N: usize>(field: &'static str, text: &str) -> Result<[u8; N], CryptoError> {
    let bytes = from_b64(field, text)?;
    <[u8; N]>::try_from(bytes.as_slice()).map_err(|_| CryptoError::Length { field, expected: N, got: bytes.len() })
}

/// `N` bytes from the operating system's CSPRNG.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    rand::fill(&mut out[..]);
    out
}

/// HKDF-SHA256 extract-then-expand into `N` bytes.
pub fn hkdf_sha256<const N: usize>(salt: &[u8], ikm: &[u8], info: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    // N is at most 64 here, far below HKDF-SHA256's 255 * 32 byte limit.
    let _ = hkdf::Hkdf::<sha2::Sha256>::new(Some(salt), ikm).expand(info, &mut out);
    out
}

/// HMAC-SHA256 of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use hmac::{KeyInit, Mac};
    // HMAC accepts keys of any length.
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(key) else { return [0; 32] };
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// Checks an HMAC-SHA256 tag in constant time.
pub fn hmac_sha256_verify(key: &[u8], message: &[u8], tag: &[u8], what: &'static str) -> Result<(), CryptoError> {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).map_err(|_| CryptoError::BadMac(what))?;
    mac.update(message);
    mac.verify_slice(tag).map_err(|_| CryptoError::BadMac(what))
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcript_frames_each_part_with_its_length() {
        assert_eq!(transcript(&[b"ab", b""]), vec![0, 0, 0, 2, b'a', b'b', 0, 0, 0, 0]);
        // Moving a byte between parts changes the bytes.
        assert_ne!(transcript(&[b"ab", b"c"]), transcript(&[b"a", b"bc"]));
    }

    #[test]
    fn base64_helpers_name_the_field_that_is_wrong() {
        let err = b64url_array::<32>("ed25519", "AAAA").unwrap_err();
        assert_eq!(err.to_string(), "`ed25519` must be 32 bytes, got 3");
        let err = from_b64("enc", "***").unwrap_err();
        assert_eq!(err.to_string(), "`enc` is not valid base64");
    }
}
