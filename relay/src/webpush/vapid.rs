//! VAPID (RFC 8292): the application server identifies itself to push services with an ES256
//! JWT signed by a long-lived P-256 key whose public half the browser was given as
//! `applicationServerKey` when it subscribed.

use super::ece::{CryptoError, b64, decode_b64};
use super::error::PushError;
use super::http::Endpoint;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::elliptic_curve::Generate;
use p256::elliptic_curve::zeroize::Zeroizing;
use std::fmt;

/// The fixed JOSE header of every VAPID token.
const JWT_HEADER: &str = r#"{"typ":"JWT","alg":"ES256"}"#;
/// Longest `sub` claim accepted.
const MAX_SUBJECT_LEN: usize = 1024;

/// The relay's VAPID signing key (P-256).
#[derive(Clone)]
pub struct VapidKey {
    key: SigningKey,
}

impl VapidKey {
    /// A fresh random key.
    pub fn generate() -> Self {
        Self { key: SigningKey::generate_from_rng(&mut rand::rng()) }
    }

    /// A key from its base64url 32-octet private scalar (padding tolerated).
    pub fn from_base64url(private_key: &str) -> Result<Self, CryptoError> {
        const FIELD: &str = "VAPID private key";
        let bytes = Zeroizing::new(decode_b64(FIELD, private_key, 32)?);
        if bytes.len() != 32 {
            return Err(CryptoError::InvalidKey { field: FIELD, reason: "not 32 octets" });
        }
        let key = SigningKey::from_slice(&bytes)
            .map_err(|_| CryptoError::InvalidKey { field: FIELD, reason: "not a valid P-256 scalar" })?;
        Ok(Self { key })
    }

    /// The private scalar as base64url (32 octets, no padding): what to store to keep the key.
    pub fn private_key_base64url(&self) -> String {
        b64(self.key.to_bytes().as_slice())
    }

    /// The public key as base64url of the uncompressed point (65 octets, no padding): the
    /// `applicationServerKey` browsers subscribe with, and the `k` of the `Authorization` header.
    pub fn public_key_base64url(&self) -> String {
        b64(self.key.verifying_key().to_sec1_point(false).as_bytes())
    }

    /// The `Authorization` header value for a push to `endpoint`:
    /// `vapid t=<ES256 JWT>, k=<public key>`, the JWT claiming `aud` = the endpoint's origin,
    /// `exp` = `expires_at` (Unix seconds; push services refuse more than 24 hours ahead) and
    /// `sub` = `subject` (a `mailto:` or `https:` URL to contact the operator).
    pub fn authorization_header(&self, endpoint: &str, subject: &str, expires_at: u64) -> Result<String, PushError> {
        let endpoint = Endpoint::parse(endpoint).map_err(|reason| PushError::InvalidEndpoint { reason })?;
        check_subject(subject)?;
        Ok(self.authorization_for(&endpoint, subject, expires_at))
    }

    /// [`Self::authorization_header`] for an endpoint already parsed, the subject already checked.
    pub(crate) fn authorization_for(&self, endpoint: &Endpoint, subject: &str, expires_at: u64) -> String {
        let claims = serde_json::json!({ "aud": endpoint.origin(), "exp": expires_at, "sub": subject });
        let signing_input = format!("{}.{}", b64(JWT_HEADER.as_bytes()), b64(claims.to_string().as_bytes()));
        let signature: Signature = self.key.sign(signing_input.as_bytes());
        format!("vapid t={signing_input}.{}, k={}", b64(signature.to_bytes().as_slice()), self.public_key_base64url())
    }
}

impl fmt::Debug for VapidKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VapidKey").field("public", &self.public_key_base64url()).finish_non_exhaustive()
    }
}

/// RFC 8292 §2.1: `sub` is a `mailto:` or `https:` URI. It goes into JSON (escaped), never
/// into a header, but is kept short and printable all the same.
pub(crate) fn check_subject(subject: &str) -> Result<(), PushError> {
    if !(subject.starts_with("mailto:") || subject.starts_with("https://")) {
        return Err(PushError::InvalidSubject { reason: "must start with mailto: or https://" });
    }
    if subject.len() > MAX_SUBJECT_LEN {
        return Err(PushError::InvalidSubject { reason: "longer than 1024 bytes" });
    }
    if subject.chars().any(char::is_control) {
        return Err(PushError::InvalidSubject { reason: "contains control characters" });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use p256::ecdsa::VerifyingKey;
    use p256::ecdsa::signature::Verifier;

    fn d(s: &str) -> Vec<u8> {
        URL_SAFE_NO_PAD.decode(s).unwrap()
    }

    #[test]
    fn jwt_verifies_and_carries_the_claims() {
        let key = VapidKey::generate();
        let header = key
            .authorization_header(
                "https://updates.push.services.mozilla.com:443/wpush/v2/abc?x",
                "mailto:ops@example.org",
                1_700_000_000,
            )
            .unwrap();
        let rest = header.strip_prefix("vapid t=").unwrap();
        let (jwt, k) = rest.split_once(", k=").unwrap();
        assert_eq!(k, key.public_key_base64url());
        assert_eq!(d(k).len(), 65);
        assert_eq!(d(k)[0], 4);

        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let jose: serde_json::Value = serde_json::from_slice(&d(parts[0])).unwrap();
        assert_eq!(jose, serde_json::json!({"typ": "JWT", "alg": "ES256"}));
        let claims: serde_json::Value = serde_json::from_slice(&d(parts[1])).unwrap();
        assert_eq!(
            claims,
            serde_json::json!({
                "aud": "https://updates.push.services.mozilla.com",
                "exp": 1_700_000_000u64,
                "sub": "mailto:ops@example.org",
            })
        );

        let signature_bytes = d(parts[2]);
        assert_eq!(signature_bytes.len(), 64, "raw r||s, not DER");
        let verifying = VerifyingKey::from_sec1_bytes(&d(k)).unwrap();
        let signature = Signature::from_slice(&signature_bytes).unwrap();
        let signing_input = format!("{}.{}", parts[0], parts[1]);
        verifying.verify(signing_input.as_bytes(), &signature).unwrap();
        let tampered = format!("{}.{}x", parts[0], parts[1]);
        assert!(verifying.verify(tampered.as_bytes(), &signature).is_err());
    }

    #[test]
    fn keys_round_trip_through_base64url() {
        let key = VapidKey::generate();
        let private = key.private_key_base64url();
        assert_eq!(d(&private).len(), 32);
        let again = VapidKey::from_base64url(&private).unwrap();
        assert_eq!(again.public_key_base64url(), key.public_key_base64url());
        assert!(!format!("{key:?}").contains(&private));

        assert!(matches!(VapidKey::from_base64url("%%%"), Err(CryptoError::Base64 { .. })));
        assert!(matches!(VapidKey::from_base64url("AAAA"), Err(CryptoError::InvalidKey { .. })));
        // Zero and the group order are not valid scalars.
        assert!(matches!(VapidKey::from_base64url(&b64(&[0u8; 32])), Err(CryptoError::InvalidKey { .. })));
        assert!(matches!(VapidKey::from_base64url(&b64(&[0xffu8; 32])), Err(CryptoError::InvalidKey { .. })));
    }

    #[test]
    fn subjects_and_endpoints_are_checked() {
        let key = VapidKey::generate();
        assert!(key.authorization_header("https://push.example/x", "https://relay.example/contact", 1).is_ok());
        for subject in ["ops@example.org", "http://relay.example", "mailto:a\nb"] {
            assert!(
                matches!(
                    key.authorization_header("https://push.example/x", subject, 1),
                    Err(PushError::InvalidSubject { .. })
                ),
                "{subject:?}"
            );
        }
        assert!(matches!(
            key.authorization_header("not a url", "mailto:a@b", 1),
            Err(PushError::InvalidEndpoint { .. })
        ));
    }
}
