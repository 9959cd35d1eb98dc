//! Resume tokens: HS256 JWTs the relay issues to an authenticated device, one per
//! resumable session, and checks on every `control` frame that names a session.
//!
//! A token is `base64url(header) . base64url(claims) . base64url(HMAC-SHA256)` with the
//! header `{"alg":"HS256","typ":"JWT"}` and the claims
//! `{"iss":"terminull-relay","brg":<bridge id>,"sub":<device id>,"sid":<session id>,
//! "iat":<unix s>,"exp":<unix s>}`. The key is the relay's own 32-byte secret: only the
//! relay issues and checks them; apps and bridges treat them as opaque.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use terminull_protocol::crypto::{b64url, from_b64url, hmac_sha256, hmac_sha256_verify};

/// The `iss` claim of every token.
pub const ISSUER: &str = "terminull-relay";
/// The only header the relay issues and accepts.
const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;
/// Longer tokens are refused before any decoding.
const MAX_TOKEN_LEN: usize = 2048;

/// Why a token was refused. The messages go to the client in `error.message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not three base64url parts of JSON.
    #[error("resume token is malformed: {0}")]
    Malformed(&'static str),
    /// The header names another algorithm.
    #[error("resume token uses an algorithm other than HS256")]
    Algorithm,
    /// The MAC does not verify under the relay's key.
    #[error("resume token signature does not verify")]
    Signature,
    /// `exp` has passed.
    #[error("resume token expired")]
    Expired,
    /// Issued for another bridge, device or session.
    #[error("resume token was issued for another {0}")]
    Foreign(&'static str),
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    iss: String,
    brg: String,
    sub: String,
    sid: String,
    iat: u64,
    exp: u64,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
}

/// Issues and checks resume tokens under one key.
#[derive(Clone)]
pub struct ResumeTokens {
    key: [u8; 32],
    ttl: Duration,
}

impl std::fmt::Debug for ResumeTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("ResumeTokens").field("ttl", &self.ttl).finish_non_exhaustive()
    }
}

impl ResumeTokens {
    /// Tokens under `key`, valid for `ttl` after issue.
    pub fn new(key: [u8; 32], ttl: Duration) -> Self {
        Self { key, ttl }
    }

    /// A token for `device_id` to drive `session_id` on `bridge_id`, issued at `now`
    /// (Unix seconds).
    pub fn issue(&self, bridge_id: &str, device_id: &str, session_id: &str, now: u64) -> String {
        let claims = Claims {
            iss: ISSUER.to_owned(),
            brg: bridge_id.to_owned(),
            sub: device_id.to_owned(),
            sid: session_id.to_owned(),
            iat: now,
            exp: now.saturating_add(self.ttl.as_secs()),
        };
        // Claims hold strings and integers only: serializing cannot fail.
        let claims = serde_json::to_vec(&claims).unwrap_or_default();
        let signing_input = format!("{}.{}", b64url(HEADER.as_bytes()), b64url(&claims));
        let mac = hmac_sha256(&self.key, signing_input.as_bytes());
        format!("{signing_input}.{}", b64url(&mac))
    }

    /// Checks `token` for (`bridge_id`, `device_id`, `session_id`) at `now` (Unix seconds).
    pub fn verify(
        &self,
        token: &str,
        bridge_id: &str,
        device_id: &str,
        session_id: &str,
        now: u64,
    ) -> Result<(), TokenError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(TokenError::Malformed("longer than 2048 bytes"));
        }
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(mac_text), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed("not three dot-separated parts"));
        };
        let header_json =
            from_b64url("header", header).map_err(|_| TokenError::Malformed("header is not base64url"))?;
        let header: Header =
            serde_json::from_slice(&header_json).map_err(|_| TokenError::Malformed("header is not JSON"))?;
        if header.alg != "HS256" {
            return Err(TokenError::Algorithm);
        }
        let mac =
            from_b64url("signature", mac_text).map_err(|_| TokenError::Malformed("signature is not base64url"))?;
        // `header.claims`: everything before the last dot.
        let signing_input = &token[..token.len() - mac_text.len() - 1];
        hmac_sha256_verify(&self.key, signing_input.as_bytes(), &mac, "the resume token")
            .map_err(|_| TokenError::Signature)?;
        let claims = from_b64url("claims", claims).map_err(|_| TokenError::Malformed("claims are not base64url"))?;
        let claims: Claims =
            serde_json::from_slice(&claims).map_err(|_| TokenError::Malformed("claims are not the expected JSON"))?;
        if claims.iss != ISSUER {
            return Err(TokenError::Foreign("issuer"));
        }
        if now >= claims.exp {
            return Err(TokenError::Expired);
        }
        if claims.brg != bridge_id {
            return Err(TokenError::Foreign("bridge"));
        }
        if claims.sub != device_id {
            return Err(TokenError::Foreign("device"));
        }
        if claims.sid != session_id {
            return Err(TokenError::Foreign("session"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn tokens() -> ResumeTokens {
        ResumeTokens::new([7; 32], Duration::from_secs(60))
    }

    #[test]
    fn an_issued_token_verifies_for_its_bridge_device_and_session_only() {
        let t = tokens().issue("brg_a", "dev_b", "s1", NOW);
        assert_eq!(tokens().verify(&t, "brg_a", "dev_b", "s1", NOW + 59), Ok(()));
        assert_eq!(tokens().verify(&t, "brg_x", "dev_b", "s1", NOW), Err(TokenError::Foreign("bridge")));
        assert_eq!(tokens().verify(&t, "brg_a", "dev_x", "s1", NOW), Err(TokenError::Foreign("device")));
        assert_eq!(tokens().verify(&t, "brg_a", "dev_b", "s2", NOW), Err(TokenError::Foreign("session")));
    }

    #[test]
    fn a_token_is_refused_from_its_expiry_on() {
        let t = tokens().issue("brg_a", "dev_b", "s1", NOW);
        assert_eq!(tokens().verify(&t, "brg_a", "dev_b", "s1", NOW + 60), Err(TokenError::Expired));
    }

    #[test]
    fn a_token_under_another_key_or_with_edited_claims_is_refused() {
        let other = ResumeTokens::new([8; 32], Duration::from_secs(60)).issue("brg_a", "dev_b", "s1", NOW);
        assert_eq!(tokens().verify(&other, "brg_a", "dev_b", "s1", NOW), Err(TokenError::Signature));

        let t = tokens().issue("brg_a", "dev_b", "s1", NOW);
        let parts: Vec<&str> = t.split('.').collect();
        let forged_claims = b64url(
            format!(r#"{{"iss":"{ISSUER}","brg":"brg_a","sub":"dev_b","sid":"s2","iat":{NOW},"exp":{}}}"#, NOW + 60)
                .as_bytes(),
        );
        let forged = format!("{}.{}.{}", parts[0], forged_claims, parts[2]);
        assert_eq!(tokens().verify(&forged, "brg_a", "dev_b", "s2", NOW), Err(TokenError::Signature));
    }

    #[test]
    fn a_token_naming_another_algorithm_is_refused_before_its_mac_is_checked() {
        let none_header = b64url(br#"{"alg":"none","typ":"JWT"}"#);
        let t = tokens().issue("brg_a", "dev_b", "s1", NOW);
        let rest = t.split_once('.').map(|(_, r)| r).unwrap();
        assert_eq!(
            tokens().verify(&format!("{none_header}.{rest}"), "brg_a", "dev_b", "s1", NOW),
            Err(TokenError::Algorithm)
        );
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for t in ["", "a", "a.b", "a.b.c.d", "!!.??.**", &"x".repeat(5000)] {
            assert!(matches!(tokens().verify(t, "b", "d", "s", NOW), Err(TokenError::Malformed(_))), "{t}");
        }
    }
}
