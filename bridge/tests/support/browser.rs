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

/// Runs a browser script that asks the test to act mid-run ([`super::conversing::converse`])
/// and returns its report; panics unless it exits 0 within `limit` and its report says
/// `"ok": true`.
pub async fn run_conversing<R: serde::de::DeserializeOwned>(
    command: tokio::process::Command,
    limit: std::time::Duration,
    mut on_event: impl AsyncFnMut(&str),
) -> R {
    let report = super::conversing::converse(command, limit, async |event: &str| {
        on_event(event).await;
        Ok(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_value(report.clone()).unwrap_or_else(|e| panic!("report `{report}`: {e}"))
}

/// The page holds every block of the session's history, once, in order — except
/// streamed chunks that a later block of the same id superseded (a resume re-sends
/// only the newest) and tool-call updates, which the page shows as one card.
pub fn assert_page_complete(seqs: &[u64], history: &[terminull_protocol::blocks::Block]) {
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "the page's seqs are not strictly increasing: {seqs:?}");
    let known: std::collections::HashSet<u64> = history.iter().filter_map(|b| b.seq).collect();
    assert!(seqs.iter().all(|s| known.contains(s)), "the page shows blocks the bridge never wrote: {seqs:?}");
    for (i, block) in history.iter().enumerate() {
        let seq = block.seq.unwrap();
        if seqs.contains(&seq) {
            continue;
        }
        let key = page_key(block);
        let superseded = key.is_some()
            && history[i + 1..].iter().any(|later| page_key(later) == key && seqs.contains(&later.seq.unwrap()));
        assert!(superseded, "the page lost seq {seq} ({}); it shows {seqs:?}", block.block_type());
    }
    assert_eq!(seqs.last(), history.last().and_then(|b| b.seq).as_ref(), "the page is missing the newest blocks");
}

/// What a later block replaces this one by on the page: the protocol's replace key
/// (streamed text, thinking, progress), or a tool call's id (its status updates).
pub fn page_key(block: &terminull_protocol::blocks::Block) -> Option<(String, String)> {
    if let Some((kind, id)) = block.kind.replace_key() {
        return Some((kind.to_string(), id.to_string()));
    }
    let value = serde_json::to_value(block).ok()?;
    (value["type"] == "tool_call")
        .then(|| ("tool_call".to_owned(), value["id"].as_str().unwrap_or_default().to_owned()))
}
