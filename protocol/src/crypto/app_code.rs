//! The phone app's code, vouched for by a bridge (docs/web-client.md#threat-model-who-serves-the-code).
//!
//! The app shell is the fixed list of files in [`SHELL_PATHS`]. Its digest is
//! `SHA-256(transcript("terminull/v1 app-shell", path₁, bytes₁, path₂, bytes₂, …))`
//! over those paths in that order, each file's bytes exactly as served. A bridge signs
//! the digest of the build it embeds:
//! `Ed25519(bridge identity, transcript("terminull/v1 app-signature", bridge_id, digest))`
//! and hands `{bridge_id, digest, sig}` ([`AppSignature`]) to its relay, which serves
//! it unchanged; the bridge's LAN server serves its own. The app's service worker takes
//! a new shell only when its digest carries a valid signature by a bridge the device
//! paired with. `docs/vectors/app-signature.json` fixes one example byte for byte.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::keys::{Identity, PublicIdentity};
use super::{CryptoError, b64, from_b64, transcript};

/// The app shell, in digest order: the page, its script, its style sheet, the web app
/// manifest, its three icons and the service worker.
pub const SHELL_PATHS: &[&str] = &[
    "/",
    "/app.js",
    "/style.css",
    "/manifest.webmanifest",
    "/icons/icon-192.png",
    "/icons/icon-512.png",
    "/icons/icon-maskable-512.png",
    "/sw.js",
];

/// Label of the shell digest's transcript.
pub const SHELL_LABEL: &str = "terminull/v1 app-shell";
/// Label of the signed bytes' transcript.
pub const SIGNATURE_LABEL: &str = "terminull/v1 app-signature";

/// A bridge's signature over an app shell digest, as the relay and the LAN server
/// serve it at `GET /v1/bridges/{bridge_id}/app-signature` and as `register.app` carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(deny_unknown_fields)]
pub struct AppSignature {
    /// The signing bridge's id.
    pub bridge_id: String,
    /// The shell digest the bridge vouches for, 64 lowercase hex digits.
    pub digest: String,
    /// Ed25519 signature by the bridge's identity key over
    /// `transcript("terminull/v1 app-signature", bridge_id, digest bytes)`, base64.
    pub sig: String,
}

/// The digest of an app shell given as `(path, bytes)` in [`SHELL_PATHS`] order.
/// Refuses a list that is not exactly those paths in that order.
pub fn shell_digest(files: &[(&str, &[u8])]) -> Result<[u8; 32], CryptoError> {
    let paths: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
    if paths != SHELL_PATHS {
        return Err(CryptoError::AppShell(format!("expected the files {SHELL_PATHS:?}, got {paths:?}")));
    }
    let mut parts: Vec<&[u8]> = vec![SHELL_LABEL.as_bytes()];
    for (path, bytes) in files {
        parts.push(path.as_bytes());
        parts.push(bytes);
    }
    Ok(Sha256::digest(transcript(&parts)).into())
}

/// The bytes a bridge signs for `digest`.
pub fn signature_bytes(bridge_id: &str, digest: &[u8; 32]) -> Vec<u8> {
    transcript(&[SIGNATURE_LABEL.as_bytes(), bridge_id.as_bytes(), digest])
}

/// The bridge's signature over `digest`.
pub fn sign_shell(bridge: &Identity, digest: &[u8; 32]) -> AppSignature {
    let bridge_id = bridge.public().bridge_id().0;
    let sig = b64(&bridge.sign(&signature_bytes(&bridge_id, digest)));
    AppSignature { bridge_id, digest: hex(digest), sig }
}

/// Checks `signature` against `bridge`'s key: the id is the key's, the digest is 32
/// bytes of hex, the signature verifies. Returns the digest.
pub fn verify_shell(bridge: &PublicIdentity, signature: &AppSignature) -> Result<[u8; 32], CryptoError> {
    if bridge.bridge_id().0 != signature.bridge_id {
        return Err(CryptoError::BadSignature("the app shell (signed under another bridge's id)"));
    }
    let digest = unhex32(&signature.digest)?;
    bridge.verify(
        &signature_bytes(&signature.bridge_id, &digest),
        &from_b64("sig", &signature.sig)?,
        "the app shell",
    )?;
    Ok(digest)
}

/// Lowercase hex (as the digest travels).
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex32(text: &str) -> Result<[u8; 32], CryptoError> {
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(CryptoError::Encoding { field: "digest", encoding: "lowercase hex (64 digits)" });
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
            .map_err(|_| CryptoError::Encoding { field: "digest", encoding: "lowercase hex" })?;
    }
    Ok(out)
}

/// The committed vector (`docs/vectors/app-signature.json`): a fixed shell (each
/// file's bytes are its path repeated, as UTF-8), a fixed bridge identity, the digest
/// and the signature.
pub fn app_signature_vector() -> serde_json::Value {
    let bridge = Identity::from_bytes(std::array::from_fn(|i| 0x40 + i as u8), [7; 32]);
    let contents: Vec<String> = SHELL_PATHS.iter().map(|p| format!("contents of {p}\n")).collect();
    let files: Vec<(&str, &[u8])> = SHELL_PATHS.iter().zip(&contents).map(|(p, c)| (*p, c.as_bytes())).collect();
    let digest = shell_digest(&files).expect("the vector lists the shell paths");
    let signature = sign_shell(&bridge, &digest);
    serde_json::json!({
        "description": "docs/web-client.md#app-code-integrity: digest = SHA-256(transcript(\"terminull/v1 app-shell\", path, bytes, ...)) over the shell files in order; sig = Ed25519(transcript(\"terminull/v1 app-signature\", bridge_id, digest)); transcript = each part as a 4-byte big-endian length then its bytes",
        "bridge_ed25519_seed_hex": hex(&std::array::from_fn::<u8, 32, _>(|i| 0x40 + i as u8)),
        "bridge_keys": bridge.public().to_wire(),
        "files": SHELL_PATHS.iter().zip(&contents).map(|(p, c)| serde_json::json!({"path": p, "utf8": c})).collect::<Vec<_>>(),
        "transcript_sha256_input_hex": hex(&{
            let mut parts: Vec<&[u8]> = vec![SHELL_LABEL.as_bytes()];
            for (p, b) in &files { parts.push(p.as_bytes()); parts.push(b); }
            transcript(&parts)
        }),
        "signed_bytes_hex": hex(&signature_bytes(&signature.bridge_id, &digest)),
        "signature": signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(app_js: &[u8]) -> [u8; 32] {
        let files: Vec<(&str, &[u8])> =
            SHELL_PATHS.iter().map(|p| (*p, if *p == "/app.js" { app_js } else { p.as_bytes() })).collect();
        shell_digest(&files).unwrap()
    }

    #[test]
    fn a_signed_shell_verifies_with_its_bridge_key_only() {
        let bridge = Identity::generate();
        let digest = shell(b"app");
        let signature = sign_shell(&bridge, &digest);
        assert_eq!(verify_shell(&bridge.public(), &signature).unwrap(), digest);
        let other = Identity::generate();
        assert!(verify_shell(&other.public(), &signature).is_err(), "another bridge's key");
        let mut relabelled = signature.clone();
        relabelled.bridge_id = other.public().bridge_id().0;
        assert!(verify_shell(&other.public(), &relabelled).is_err(), "relabelled to another bridge");
    }

    #[test]
    fn an_altered_file_changes_the_digest_and_fails_the_signature() {
        let bridge = Identity::generate();
        let mut signature = sign_shell(&bridge, &shell(b"app"));
        signature.digest = hex(&shell(b"app; steal()"));
        assert!(verify_shell(&bridge.public(), &signature).is_err());
    }

    #[test]
    fn a_shell_with_other_files_or_order_is_refused() {
        let files: Vec<(&str, &[u8])> = SHELL_PATHS.iter().rev().map(|p| (*p, &b""[..])).collect();
        assert!(shell_digest(&files).is_err());
        assert!(shell_digest(&[("/", b"")]).is_err());
    }

    #[test]
    fn a_malformed_digest_is_an_encoding_error_not_a_panic() {
        let bridge = Identity::generate();
        for digest in ["", "zz", &"A".repeat(64), &"é".repeat(32)] {
            let signature =
                AppSignature { bridge_id: bridge.public().bridge_id().0, digest: digest.into(), sig: String::new() };
            assert!(
                matches!(verify_shell(&bridge.public(), &signature), Err(CryptoError::Encoding { .. })),
                "{digest}"
            );
        }
    }
}
