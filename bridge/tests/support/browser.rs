//! What the browser tests share: where the web app is, and whether Chromium and the
//! app's npm packages are here to drive it.

use std::path::{Path, PathBuf};

/// Set by `.ci/run`: a browser test that cannot run is then a failure, not a skip.
pub const REQUIRED_ENV: &str = "TERMINULL_BROWSER_TESTS";

/// The web app's sources (`web/`).
pub fn web_dir() -> PathBuf {
    super::workspace().join("web")
}

/// Whether the web app's npm packages (and, with `chromium`, Debian's Chromium) are
/// here; panics when [`REQUIRED_ENV`] says the tests must run and they cannot.
pub fn available(chromium: bool) -> bool {
    let missing: Vec<&str> = [
        (chromium && !Path::new("/usr/bin/chromium").exists()).then_some("/usr/bin/chromium"),
        (!web_dir().join("node_modules/playwright-core").exists()).then_some("web/node_modules (npm ci in web/)"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(std::env::var_os(REQUIRED_ENV).is_none(), "{REQUIRED_ENV} is set but {missing:?} missing");
    eprintln!("skipped: {missing:?} missing (scripts/install-test-deps.sh installs them)");
    false
}

/// Runs a browser script (`command`: `node web/test/….mjs` and its arguments) for at
/// most `limit` and returns its report: the last line of its stdout that is a JSON
/// object. Panics with everything the script printed unless it exits 0 and that
/// report says `"ok": true`.
pub async fn run_script<R: serde::de::DeserializeOwned>(
    mut command: tokio::process::Command,
    limit: std::time::Duration,
) -> R {
    let output = tokio::time::timeout(limit, command.kill_on_drop(true).output())
        .await
        .expect("the browser script finished in time")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the browser script failed ({}):\n{stdout}\n{stderr}", output.status);
    let last = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).expect("a JSON report line");
    let report: serde_json::Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("report `{last}`: {e}"));
    assert_eq!(report["ok"], true, "{stdout}");
    serde_json::from_value(report).unwrap_or_else(|e| panic!("report `{last}`: {e}"))
}
