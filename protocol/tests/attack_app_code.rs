//! Attacks on the app's pinned code (docs/web-client.md#app-code-integrity): a server
//! that alters the shell can offer a signature it holds, make one with its own key, or
//! relabel one; [`verify_shell`] refuses each, so the service worker (which checks the
//! same bytes, web/src/sw/integrity.js) keeps the pinned code.

use terminull_protocol::crypto::app_code::{AppSignature, SHELL_PATHS, shell_digest, sign_shell, verify_shell};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::crypto::vectors::hex;

const TRIES: usize = 64;

fn shell(app_js: &[u8]) -> [u8; 32] {
    let files: Vec<(&str, &[u8])> =
        SHELL_PATHS.iter().map(|p| (*p, if *p == "/app.js" { app_js } else { p.as_bytes() })).collect();
    shell_digest(&files).unwrap()
}

/// Counts the forged signatures `forge` makes (for altered code `i`) that the paired bridge's key accepts.
fn accepted(bridge: &Identity, forge: impl Fn(usize, [u8; 32]) -> AppSignature) -> usize {
    (0..TRIES)
        .filter(|i| {
            let altered = shell(format!("app();steal({i})").as_bytes());
            verify_shell(&bridge.public(), &forge(*i, altered)).is_ok()
        })
        .count()
}

#[allow(clippy::print_stdout, reason = "the attack table line")]
#[test]
fn attack_altered_app_code_under_the_bridges_genuine_signature() {
    let bridge = Identity::generate();
    let genuine = sign_shell(&bridge, &shell(b"app()"));
    let n = accepted(&bridge, |_, altered| AppSignature { digest: hex(&altered), ..genuine.clone() });
    println!("attack: altered app.js under the genuine signature relabelled to its digest: {n} of {TRIES} accepted");
    assert_eq!(n, 0);
}

#[allow(clippy::print_stdout, reason = "the attack table line")]
#[test]
fn attack_altered_app_code_signed_by_the_servers_own_key() {
    let bridge = Identity::generate();
    let server = Identity::generate();
    let n = accepted(&bridge, |_, altered| sign_shell(&server, &altered));
    let relabelled = accepted(&bridge, |_, altered| AppSignature {
        bridge_id: bridge.public().bridge_id().0,
        ..sign_shell(&server, &altered)
    });
    println!(
        "attack: altered app.js signed by the server's own key: {n} of {TRIES} accepted, {relabelled} of {TRIES} when relabelled as the bridge"
    );
    assert_eq!((n, relabelled), (0, 0));
}
