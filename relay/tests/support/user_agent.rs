//! A browser's side of Web Push: the keys a subscription carries.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::SecretKey;
use p256::elliptic_curve::Generate as _;
use p256::elliptic_curve::sec1::ToSec1Point as _;
use rand::RngExt as _;

/// A browser's push keys: its P-256 key pair and its auth secret.
pub struct UserAgent {
    /// The private key (decrypts what the push service delivers).
    pub private: SecretKey,
    /// The auth secret.
    pub auth: [u8; 16],
}

impl UserAgent {
    /// Fresh keys.
    pub fn new() -> Self {
        Self { private: SecretKey::generate_from_rng(&mut rand::rng()), auth: rand::rng().random() }
    }

    /// The public key as a subscription's `keys.p256dh` carries it (base64url).
    pub fn p256dh(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.private.public_key().to_sec1_point(false).as_bytes())
    }
}
