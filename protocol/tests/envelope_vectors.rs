//! The committed envelope vectors (`docs/vectors/envelope.json`) are what the code
//! computes; `TERMINULL_BLESS=1` rewrites them after an intended change.

use std::path::Path;

#[test]
fn committed_envelope_vectors_match_the_implementation() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/vectors/envelope.json");
    let computed = terminull_protocol::crypto::vectors::envelope_vectors().expect("vectors compute");
    let text = format!("{}\n", serde_json::to_string_pretty(&computed).expect("vectors encode"));
    if std::env::var_os("TERMINULL_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} differs from what the code computes; if the change is intended, run \
         `TERMINULL_BLESS=1 cargo test -p terminull-protocol --test envelope_vectors`",
        path.display()
    );
}
