//! The composer in a real browser (`web/test/browser-compose.mjs`, Chromium at 390x844,
//! touch, scale 2) against an in-process bridge on a relay, with the echo adapter (which
//! declares images and documents): attachments picked, shown, removed, refused over the
//! limit and sent end to end encrypted; the queue shown, edited, cancelled, kept or
//! dropped at Stop; `/status` kept after a reload; End session. This test then checks
//! the bridge's side: the echo-py session's model changed mid-session (Mode & model) is
//! kept in its metadata; the history holds the message with both images, decodable, the
//! photo re-encoded as a JPEG within the limits, and never the dropped message.
//! Everything runs in a private network namespace; screenshots are kept under
//! `target/tmp/browser-screenshots/compose/`.

mod support;

use support::browser::{available, web_dir};

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use terminull_protocol::blocks::BlockKind;
use terminull_protocol::ids::SessionId;
use terminull_relay::{Relay, RelayConfig};

/// What the browser script reports.
#[derive(Debug, serde::Deserialize)]
struct Report {
    session: String,
    options_session: String,
    screenshots: Vec<String>,
}

#[test]
fn attachments_reach_the_agent_and_the_queue_is_shown_edited_cancelled_and_dropped_at_stop_in_chromium() {
    const NAME: &str =
        "attachments_reach_the_agent_and_the_queue_is_shown_edited_cancelled_and_dropped_at_stop_in_chromium";
    if !available(true) || !terminull_netns::body_runs_here(NAME) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let relay = Relay::start(RelayConfig::new("127.0.0.1:0".parse().unwrap(), data.path())).await.unwrap();
        let bridge = support::remote::paired_bridge().await;
        // An agent that lists models and resumes: the Python example adapter, as a drop-in.
        let ext = bridge.bridge_home.path().join("ext_adapters");
        std::fs::create_dir_all(&ext).unwrap();
        std::fs::copy(support::workspace().join("examples/ext_adapter_example.py"), ext.join("echo-py")).unwrap();
        bridge.service.rescan().await;
        support::remote::connect_to_relay(&bridge, relay.ws_url());
        support::remote::until_registered(&relay, &bridge).await;

        let cwd = tempfile::tempdir().unwrap();
        let link =
            support::remote::offer_link(&bridge.home(), Some(relay.ws_url()), None, 300).to_url(&relay.http_url());
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join("compose");
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        let mut command = tokio::process::Command::new("node");
        command
            .arg(web_dir().join("test/browser-compose.mjs"))
            .args(["--link", &link, "--screenshots"])
            .arg(&shots)
            .arg("--cwd")
            .arg(cwd.path())
            .kill_on_drop(true);
        let report: Report = support::browser::run_script(command, Duration::from_secs(300)).await;
        eprintln!("compose: screenshots {:?}", report.screenshots);

        // The bridge's side: what reached the agent, from the session's history.
        let session = SessionId::from(report.session.as_str());
        let history = support::remote::history(bridge.bridge_home.path(), &session);
        let messages: Vec<_> = history
            .iter()
            .filter_map(|b| match &b.kind {
                BlockKind::UserMessage(m) => Some(m),
                _ => None,
            })
            .collect();
        let with = messages.iter().find(|m| !m.attachments.is_empty()).expect("a message with attachments");
        assert_eq!(with.text, "what is in these?");
        let kinds: Vec<_> = with.attachments.iter().map(|a| (a.name.as_str(), a.mime_type.as_str())).collect();
        assert_eq!(kinds, [("photo.jpg", "image/jpeg"), ("diagram.png", "image/png")], "the text file was removed");
        let b64 = base64::engine::general_purpose::STANDARD;
        let photo = b64.decode(&with.attachments[0].data).expect("standard base64");
        let diagram = b64.decode(&with.attachments[1].data).expect("standard base64");
        assert_eq!(&photo[..3], [0xff, 0xd8, 0xff], "a JPEG");
        assert_eq!(&diagram[..8], b"\x89PNG\r\n\x1a\n", "the diagram as it was");
        let total = photo.len() + diagram.len();
        assert!(total <= 512 * 1024, "{total} bytes of attachments, over the 512 KiB a message carries");
        eprintln!("compose: photo re-encoded to {} bytes, diagram {} bytes", photo.len(), diagram.len());
        let texts: Vec<_> = messages.iter().map(|m| m.text.as_str()).collect();
        assert!(texts.contains(&"first queued, edited") && texts.contains(&"third queued"), "{texts:?}");
        assert!(!texts.iter().any(|t| *t == "second queued" || *t == "never to be sent"), "{texts:?}");
        // set_session_options kept the model for the echo-py session's later restarts.
        let meta_file = bridge.bridge_home.path().join("sessions").join(&report.options_session).join("meta.json");
        let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(meta_file).unwrap()).unwrap();
        assert_eq!(meta["model"], "echo-1-mini", "{meta}");
        relay.shutdown().await;
    });
}
