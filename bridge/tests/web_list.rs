//! The session list and the agent picker in a real browser (`web/test/browser-list.mjs`,
//! Chromium at 390x844, touch, scale 2) against an in-process bridge on a relay: 20
//! sessions of the echo adapter (18 started through a paired device's link, 2 by the
//! terminal's in-process path), an agent whose CLI is missing and one whose start
//! fails. The page lists them by activity with titles and previews, searches, renames,
//! archives and deletes; this test then checks the bridge's side (the rename in
//! `meta.json`, the deleted history gone, no session from the failed start).
//! Everything runs in a private network namespace; screenshots are kept under
//! `target/tmp/browser-screenshots/list/`.

mod support;

use support::browser::{available, web_dir};

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use terminull_bridge::daemon_client::Client;
use terminull_protocol::blocks::BlockKind;
use terminull_protocol::control::{self as control, BridgeMessage, ControlMessage, ReplyResult, SessionRequest};
use terminull_protocol::ids::SessionId;
use terminull_relay::{Relay, RelayConfig};

/// What the browser script reports.
#[derive(Debug, serde::Deserialize)]
struct Report {
    renamed: String,
    archived: String,
    deleted: String,
    screenshots: Vec<String>,
}

/// Starts an echo session in `cwd` and runs one turn per message in `texts`.
async fn session(client: &mut Client, cwd: &std::path::Path, texts: &[String]) -> SessionId {
    let mut kept = Vec::new();
    let request = ControlMessage::SessionRequest(SessionRequest {
        app_pubkey: "k".into(),
        ..SessionRequest::new("echo", cwd.display().to_string())
    });
    let ReplyResult::SessionStarted { session_id } = client.call(request, &mut kept).await.unwrap() else { panic!() };
    for text in texts {
        let message = ControlMessage::UserMessage(control::UserMessage {
            session_id: session_id.clone(),
            text: text.clone(),
            attachments: Vec::new(),
        });
        client.call(message, &mut kept).await.unwrap();
        let ended = |m: &BridgeMessage| matches!(m, BridgeMessage::Block { session_id: s, block, .. } if *s == session_id && matches!(block.kind, BlockKind::SessionEnd(_)));
        if !kept.iter().any(ended) {
            loop {
                let m = tokio::time::timeout(Duration::from_secs(20), client.next()).await.unwrap().unwrap();
                if ended(&m) {
                    break;
                }
            }
        }
        kept.clear();
    }
    session_id
}

const TOPICS: &[&str] = &[
    "fix the login redirect",
    "add dark mode to settings",
    "write the release notes",
    "speed up the CSV import",
    "rename the config keys",
    "profile the search endpoint",
    "upgrade tokio",
    "flaky websocket test",
    "document the relay limits",
    "parser error messages",
];

#[test]
fn twenty_sessions_are_listed_searched_renamed_archived_and_deleted_and_the_picker_greys_missing_agents_in_chromium() {
    const NAME: &str = "twenty_sessions_are_listed_searched_renamed_archived_and_deleted_and_the_picker_greys_missing_agents_in_chromium";
    if !available(true) || !terminull_netns::body_runs_here(NAME) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let relay = Relay::start(RelayConfig::new("127.0.0.1:0".parse().unwrap(), data.path())).await.unwrap();
        let bridge = support::remote::paired_bridge().await;
        // An agent whose CLI is missing and one whose start fails, as drop-ins.
        let ext = bridge.bridge_home.path().join("ext_adapters");
        std::fs::create_dir_all(&ext).unwrap();
        let script = support::workspace().join("tests/fixtures/adapters/broken.py");
        for mode in ["not-installed", "start-fails"] {
            let path = ext.join(mode);
            std::fs::write(&path, format!("#!/bin/sh\nexec python3 '{}' {mode}\n", script.display())).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        bridge.service.rescan().await;
        support::remote::connect_to_relay(&bridge, relay.ws_url());
        support::remote::until_registered(&relay, &bridge).await;

        let cwd = tempfile::tempdir().unwrap();
        // Two sessions from the terminal (the in-process path), then 18 from a device.
        let mut terminal = Vec::new();
        let mut local = Client::in_process(&bridge.service);
        for i in 0..2 {
            terminal.push(session(&mut local, cwd.path(), &[format!("terminal task {i}")]).await);
        }
        let mut device = None;
        for _ in 0..100 {
            match terminull_client::connection::Connection::open(&bridge.device, &bridge.record, Some(&relay.ws_url()))
                .await
            {
                Ok(c) => {
                    device = Some(Client::remote(c));
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        let mut device = device.expect("a link through the relay");
        let mut app = Vec::new();
        let mut titles = serde_json::Map::new();
        let needle = "zebrafish42";
        let mut needle_session = None;
        for i in 0..18 {
            let title = format!("Task {i:02}: {}", TOPICS[i % TOPICS.len()]);
            let mut texts = vec![format!("{title}\nmore details here")];
            if i == 9 {
                // Only a message holds the word: not the title, not the newest preview.
                texts = vec![format!("{title}\nsee {needle} in the logs"), "done".into()];
            }
            let id = session(&mut device, cwd.path(), &texts).await;
            if i == 9 {
                needle_session = Some(id.clone());
            }
            titles.insert(id.to_string(), json!(title));
            app.push(id);
        }
        app.reverse();
        let expect = json!({
            "app": app.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            "terminal": terminal.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            "titles": titles,
            "needle": needle,
            "needle_session": needle_session.unwrap().as_str(),
        });
        let expect_file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(expect_file.path(), expect.to_string()).unwrap();

        let link =
            support::remote::offer_link(&bridge.home(), Some(relay.ws_url()), None, 300).to_url(&relay.http_url());
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join("list");
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        let mut command = tokio::process::Command::new("node");
        command
            .arg(web_dir().join("test/browser-list.mjs"))
            .args(["--link", &link, "--screenshots"])
            .arg(&shots)
            .arg("--expect")
            .arg(expect_file.path())
            .arg("--cwd")
            .arg(cwd.path())
            .kill_on_drop(true);
        let report: Report = support::browser::run_script(command, Duration::from_secs(300)).await;
        eprintln!("list: screenshots {:?}", report.screenshots);

        // The bridge's side of what the page did.
        let sessions = bridge.bridge_home.path().join("sessions");
        let meta = |id: &str| -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(sessions.join(id).join("meta.json")).unwrap()).unwrap()
        };
        assert_eq!(meta(&report.renamed)["title"], "Renamed on the phone");
        assert_eq!(meta(&report.renamed)["renamed"], true);
        assert_eq!(meta(&report.archived)["archived"], true);
        assert!(!sessions.join(&report.deleted).exists(), "the deleted session's history is gone");
        let left = std::fs::read_dir(&sessions).unwrap().count();
        assert_eq!(left, 19, "20 sessions, one deleted, none from the failed start");
        relay.shutdown().await;
    });
}
