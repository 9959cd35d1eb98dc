//! The committed app-signature vector (`docs/vectors/app-signature.json`) is what the
//! code computes, and it verifies; `TERMINULL_BLESS=1` rewrites it after an intended
//! change. The web app's `web/test/app-integrity.test.mjs` checks the same file.

use std::path::Path;

use terminull_protocol::crypto::app_code::{AppSignature, app_signature_vector, verify_shell};
use terminull_protocol::crypto::keys::{PublicIdentity, PublicKeys};

#[test]
fn committed_app_signature_vector_matches_the_implementation_and_verifies() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/vectors/app-signature.json");
    let computed = app_signature_vector();
    let text = format!("{}\n", serde_json::to_string_pretty(&computed).expect("vector encodes"));
    if std::env::var_os("TERMINULL_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} differs from what the code computes; if the change is intended, run \
         `TERMINULL_BLESS=1 cargo test -p terminull-protocol --test app_signature_vector`",
        path.display()
    );
    let keys: PublicKeys = serde_json::from_value(computed["bridge_keys"].clone()).unwrap();
    let signature: AppSignature = serde_json::from_value(computed["signature"].clone()).unwrap();
    verify_shell(&PublicIdentity::from_wire(&keys).unwrap(), &signature).expect("the vector verifies");
}
