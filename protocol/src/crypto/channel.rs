//! One AES-256-GCM key per direction, nonces built from a counter, and a receiver
//! that accepts only counters above the last one it accepted.
//!
//! Sealed bytes are `nonce(12) ‖ ciphertext ‖ tag(16)`; the nonce is four zero
//! bytes then the counter as a big-endian u64. Because each key seals in one
//! direction only and its counter never repeats, no (key, nonce) pair is ever used
//! twice. The receiver rejects a counter at or below the last one it accepted, so
//! a replayed or reordered message fails; its state advances only after the tag
//! verifies, so a forged message cannot push it forward.
//!
//! Key schedules (docs/encryption.md §Keys):
//! - **link** keys, per device connection: four X25519 results, one of them between
//!   two ephemeral keys, with the handshake hash as HKDF salt
//!   ([`super::handshake`]) — carry control messages and their replies;
//! - **session** keys, per attachment of a device to a session: X25519(bridge, app's
//!   ephemeral key) with the session id as HKDF salt (docs/encryption.md#session-keys-the-block-stream) and the
//!   bridge's attach nonce in the info — carry the session's blocks;
//! - the **push** key, per device: X25519(bridge, device) — seals notifications.

use aes_gcm::aead::Tag;
use aes_gcm::aead::{AeadInOut, KeyInit};
use aes_gcm::{Aes256Gcm, Key, Nonce};

use super::{CryptoError, hkdf_sha256, transcript};

/// Bytes of a nonce.
pub const NONCE_LEN: usize = 12;
/// Bytes of a GCM tag.
pub const TAG_LEN: usize = 16;

/// Which way a key seals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Device (app) → bridge.
    AppToBridge,
    /// Bridge → device (app).
    BridgeToApp,
}

impl Direction {
    /// The label that goes into the HKDF info.
    pub fn label(self) -> &'static [u8] {
        match self {
            Direction::AppToBridge => b"app->bridge",
            Direction::BridgeToApp => b"bridge->app",
        }
    }
}

/// The nonce for `counter`.
pub fn nonce(counter: u64) -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    n[4..].copy_from_slice(&counter.to_be_bytes());
    n
}

/// Seals with one key; each message takes the next counter.
pub struct Sealer {
    cipher: Aes256Gcm,
    next: u64,
    what: &'static str,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("what", &self.what).field("next", &self.next).finish()
    }
}

impl Sealer {
    /// A sealer whose first message uses counter 1.
    pub fn new(key: [u8; 32], what: &'static str) -> Self {
        Self::starting_at(key, 1, what)
    }

    /// A sealer whose next message uses `counter` (the push key's counter comes from
    /// a clock; see [`super::envelope::seal_push`]).
    pub fn starting_at(key: [u8; 32], counter: u64, what: &'static str) -> Self {
        Self { cipher: Aes256Gcm::new(&Key::<Aes256Gcm>::from(key)), next: counter, what }
    }

    /// The counter the next message will use.
    pub fn next_counter(&self) -> u64 {
        self.next
    }

    /// Raises the next counter to at least `counter`.
    pub fn advance_to(&mut self, counter: u64) {
        self.next = self.next.max(counter);
    }

    /// `nonce ‖ ciphertext ‖ tag` of `plaintext`, binding `aad`.
    pub fn seal(&mut self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let counter = self.next;
        self.next = counter.checked_add(1).ok_or(CryptoError::Exhausted(self.what))?;
        let n = nonce(counter);
        let mut out = Vec::with_capacity(NONCE_LEN + plaintext.len() + TAG_LEN);
        out.extend_from_slice(&n);
        out.extend_from_slice(plaintext);
        let tag = self
            .cipher
            .encrypt_inout_detached(&Nonce::from(n), aad, (&mut out[NONCE_LEN..]).into())
            .map_err(|_| CryptoError::Tampered(self.what))?;
        out.extend_from_slice(tag.as_slice());
        Ok(out)
    }
}

/// Opens what one [`Sealer`] sealed, refusing a counter at or below the last accepted.
pub struct Opener {
    cipher: Aes256Gcm,
    last: u64,
    what: &'static str,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener").field("what", &self.what).field("last", &self.last).finish()
    }
}

impl Opener {
    /// An opener that has accepted nothing yet.
    pub fn new(key: [u8; 32], what: &'static str) -> Self {
        Self::after(key, 0, what)
    }

    /// An opener that accepts only counters above `last` (a persisted high-water mark).
    pub fn after(key: [u8; 32], last: u64, what: &'static str) -> Self {
        Self { cipher: Aes256Gcm::new(&Key::<Aes256Gcm>::from(key)), last, what }
    }

    /// The highest counter accepted so far.
    pub fn last_counter(&self) -> u64 {
        self.last
    }

    /// The plaintext of `sealed`, checked against `aad` and the counter rule.
    pub fn open(&mut self, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
        self.open_checked(aad, sealed, false)
    }

    /// [`Self::open`] for a stream that must arrive whole (a session's blocks, a link's
    /// replies): the counter must be exactly one above the last accepted, so a message
    /// dropped on the way is detected at the next one ([`CryptoError::Missing`]).
    pub fn open_next(&mut self, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
        self.open_checked(aad, sealed, true)
    }

    fn open_checked(&mut self, aad: &[u8], sealed: &[u8], whole: bool) -> Result<Vec<u8>, CryptoError> {
        if sealed.len() < NONCE_LEN + TAG_LEN {
            return Err(CryptoError::Length { field: self.what, expected: NONCE_LEN + TAG_LEN, got: sealed.len() });
        }
        let (n, rest) = sealed.split_at(NONCE_LEN);
        if n[..4] != [0, 0, 0, 0] {
            return Err(CryptoError::BadNonce(self.what));
        }
        let mut counter_bytes = [0u8; 8];
        counter_bytes.copy_from_slice(&n[4..]);
        let counter = u64::from_be_bytes(counter_bytes);
        if counter <= self.last {
            return Err(CryptoError::Replayed { what: self.what, got: counter, last: self.last });
        }
        if whole && counter != self.last.saturating_add(1) {
            return Err(CryptoError::Missing { what: self.what, expected: self.last.saturating_add(1), got: counter });
        }
        let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
        let mut plaintext = ciphertext.to_vec();
        let mut nonce_bytes = [0u8; NONCE_LEN];
        nonce_bytes.copy_from_slice(n);
        let tag = Tag::<Aes256Gcm>::try_from(tag).map_err(|_| CryptoError::Tampered(self.what))?;
        self.cipher
            .decrypt_inout_detached(&Nonce::from(nonce_bytes), aad, (&mut plaintext[..]).into(), &tag)
            .map_err(|_| CryptoError::Tampered(self.what))?;
        self.last = counter;
        Ok(plaintext)
    }
}

/// The two keys of one channel, as seen from one side.
#[derive(Debug)]
pub struct Channel {
    /// Seals what this side sends.
    pub sealer: Sealer,
    /// Opens what this side receives.
    pub opener: Opener,
}

impl Channel {
    /// The bridge's side: seals bridge→app, opens app→bridge.
    pub fn bridge_side(keys: &DirectionalKeys, what: &'static str) -> Self {
        Self { sealer: Sealer::new(keys.bridge_to_app, what), opener: Opener::new(keys.app_to_bridge, what) }
    }

    /// The device's side: seals app→bridge, opens bridge→app.
    pub fn app_side(keys: &DirectionalKeys, what: &'static str) -> Self {
        Self { sealer: Sealer::new(keys.app_to_bridge, what), opener: Opener::new(keys.bridge_to_app, what) }
    }
}

/// One AES-256 key per direction.
#[derive(Clone, PartialEq, Eq)]
pub struct DirectionalKeys {
    /// Seals device → bridge.
    pub app_to_bridge: [u8; 32],
    /// Seals bridge → device.
    pub bridge_to_app: [u8; 32],
}

impl std::fmt::Debug for DirectionalKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DirectionalKeys(..)")
    }
}

pub(crate) fn split(salt: &[u8], shared: &[u8], info: impl Fn(Direction) -> Vec<u8>) -> DirectionalKeys {
    DirectionalKeys {
        app_to_bridge: hkdf_sha256(salt, shared, &info(Direction::AppToBridge)),
        bridge_to_app: hkdf_sha256(salt, shared, &info(Direction::BridgeToApp)),
    }
}

/// Session keys of one attachment of a device to a session.
///
/// `shared` = X25519(bridge x25519, app's ephemeral x25519); salt = the session id's
/// UTF-8 bytes; info = transcript("terminull/v1 session-key", direction, app_pubkey,
/// attach_nonce).
pub fn session_keys(
    shared: &[u8; 32],
    session_id: &str,
    app_pubkey: &[u8; 32],
    attach_nonce: &[u8; 16],
) -> DirectionalKeys {
    split(session_id.as_bytes(), shared, |d| {
        transcript(&[b"terminull/v1 session-key", d.label(), app_pubkey, attach_nonce])
    })
}

/// The push key of one device (bridge → device only).
///
/// `shared` = X25519(bridge x25519, device x25519); salt = "terminull/v1 push";
/// info = transcript("terminull/v1 push-key", bridge_id, device_id).
pub fn push_key(shared: &[u8; 32], bridge_id: &str, device_id: &str) -> [u8; 32] {
    hkdf_sha256(
        b"terminull/v1 push",
        shared,
        &transcript(&[b"terminull/v1 push-key", bridge_id.as_bytes(), device_id.as_bytes()]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Sealer, Opener) {
        (Sealer::new([7; 32], "test"), Opener::new([7; 32], "test"))
    }

    #[test]
    fn sealed_messages_open_in_order() {
        let (mut s, mut o) = pair();
        let a = s.seal(b"aad", b"one").unwrap();
        let b = s.seal(b"aad", b"two").unwrap();
        assert_eq!(&a[..12], &nonce(1));
        assert_eq!(o.open(b"aad", &a).unwrap(), b"one");
        assert_eq!(o.open(b"aad", &b).unwrap(), b"two");
    }

    #[test]
    fn a_replayed_message_is_refused() {
        let (mut s, mut o) = pair();
        let a = s.seal(b"", b"x").unwrap();
        o.open(b"", &a).unwrap();
        assert_eq!(o.open(b"", &a), Err(CryptoError::Replayed { what: "test", got: 1, last: 1 }));
    }

    #[test]
    fn a_whole_stream_detects_a_dropped_message_at_the_next_one_and_stays_where_it_was() {
        let (mut s, mut o) = pair();
        let a = s.seal(b"", b"a").unwrap();
        let _dropped = s.seal(b"", b"b").unwrap();
        let c = s.seal(b"", b"c").unwrap();
        assert_eq!(o.open_next(b"", &a).unwrap(), b"a");
        assert_eq!(o.open_next(b"", &c), Err(CryptoError::Missing { what: "test", expected: 2, got: 3 }));
        assert_eq!(o.last_counter(), 1);
        assert!(matches!(o.open_next(b"", &a), Err(CryptoError::Replayed { got: 1, last: 1, .. })));
    }

    #[test]
    fn reordered_messages_are_refused_after_the_later_one() {
        let (mut s, mut o) = pair();
        let a = s.seal(b"", b"a").unwrap();
        let b = s.seal(b"", b"b").unwrap();
        o.open(b"", &b).unwrap();
        assert!(matches!(o.open(b"", &a), Err(CryptoError::Replayed { got: 1, last: 2, .. })));
    }

    #[test]
    fn tampering_or_other_aad_fails_and_does_not_advance_the_counter() {
        let (mut s, mut o) = pair();
        let mut a = s.seal(b"aad", b"hello").unwrap();
        let last = a.len() - 1;
        a[last] ^= 1;
        assert_eq!(o.open(b"aad", &a), Err(CryptoError::Tampered("test")));
        a[last] ^= 1;
        assert_eq!(o.open(b"other", &a), Err(CryptoError::Tampered("test")));
        assert_eq!(o.last_counter(), 0);
        assert_eq!(o.open(b"aad", &a).unwrap(), b"hello");
    }

    #[test]
    fn short_or_malformed_input_is_an_error_not_a_panic() {
        let (_, mut o) = pair();
        assert!(matches!(o.open(b"", &[0; 5]), Err(CryptoError::Length { .. })));
        let mut bad = vec![1u8; 40];
        bad[4..12].copy_from_slice(&5u64.to_be_bytes());
        assert_eq!(o.open(b"", &bad), Err(CryptoError::BadNonce("test")));
    }

    #[test]
    fn the_two_directions_use_different_keys() {
        let s = session_keys(&[9; 32], "s-1", &[4; 32], &[5; 16]);
        assert_ne!(s.app_to_bridge, s.bridge_to_app);
    }
}
