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
