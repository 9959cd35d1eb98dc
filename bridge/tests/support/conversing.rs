//! Running a browser script that asks its caller to act mid-run (take the LAN away,
//! give it back). Shared by the bridge's browser tests (through `support::browser`) and
//! `terminull-bench` (included there by path), so it uses nothing else of the tests'
//! support.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// Runs `command` (`node web/….mjs` and its arguments): every `{"event": E}` line on its
/// stdout is handed to `on_event`, then `done` is written to its stdin. Returns its
/// report, the last other JSON line, once it exited 0 within `limit` with `"ok": true`;
/// else what went wrong, with the report.
pub async fn converse(
    mut command: tokio::process::Command,
    limit: Duration,
    mut on_event: impl AsyncFnMut(&str) -> Result<(), String>,
) -> Result<serde_json::Value, String> {
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start the browser script: {e}"))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the browser script's stdio was not piped".into());
    };
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut report = None;
    let talk = async {
        while let Some(line) = lines.next_line().await.map_err(|e| format!("reading the script's output: {e}"))? {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
            match value["event"].as_str() {
                Some(event) => {
                    on_event(event).await?;
                    stdin.write_all(b"done\n").await.map_err(|e| format!("answering the script: {e}"))?;
                }
                None => report = Some(value),
            }
        }
        Ok::<(), String>(())
    };
    tokio::time::timeout(limit, talk).await.map_err(|_| format!("the browser script ran over {limit:?}"))??;
    let status = child.wait().await.map_err(|e| format!("waiting for the browser script: {e}"))?;
    let report = report.ok_or("the browser script printed no JSON report")?;
    if !status.success() || report["ok"] != true {
        return Err(format!("the browser script failed ({status}): {report}"));
    }
    Ok(report)
}
