//! Web Push from the page, end to end encrypted, in a real browser: a relay (admitting
//! a loopback push endpoint), a bridge with the echo adapter, and Debian's Chromium
//! driven by `web/test/push-browser.mjs` at a phone viewport, all in a private network
//! namespace. The script turns notifications on, checks that nothing is pushed while
//! the session is visible, closes the page, and asks this test (stdout `CMD` lines) to
//! act on the bridge: the relay's Web Push requests land on the script's loopback push
//! endpoint, hold no plaintext, decrypt and show one replaced notification per session
//! naming the agent, the tool and the command; Allow from the notification runs the
//! tool, which this test then finds in the bridge's history. A second bridge is then
//! paired in the same page: it gets its own worker record, its push opens with it,
//! and the tap opens its session and answers on its link. Screenshots are kept
//! under `target/tmp/browser-screenshots/push/`.

mod support;

use support::browser::{available, web_dir};

use std::path::PathBuf;
use std::time::Duration;

use terminull_protocol::blocks::BlockKind;
use terminull_protocol::control::{self, Control, ControlMessage, ReplyOutcome};
use terminull_protocol::ids::SessionId;
use terminull_relay::{Relay, RelayConfig};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[derive(Debug, serde::Deserialize)]
struct Command {
    cmd: String,
    session_id: String,
    #[serde(default)]
    text: String,
    /// Which bridge: 2 for the second one, else the first.
    #[serde(default)]
    bridge: Option<u8>,
}

#[derive(Debug, serde::Deserialize)]
struct Report {
    ok: bool,
    session_id: Option<String>,
    secret: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

async fn act(service: &terminull_bridge::service::Service, command: &Command) {
    let session_id = SessionId(command.session_id.clone());
    let message = match command.cmd.as_str() {
        "send" => ControlMessage::UserMessage(control::UserMessage {
            session_id,
            text: command.text.clone(),
            attachments: Vec::new(),
        }),
        "interrupt" => ControlMessage::Interrupt(control::Interrupt { session_id }),
        other => panic!("unknown command `{other}`"),
    };
    let reply = service.dispatch(Control { id: None, message }).await.reply;
    assert!(matches!(reply.outcome, ReplyOutcome::Ok { .. }), "{command:?}: {reply:?}");
}

#[test]
fn a_permission_request_on_a_closed_page_is_a_web_push_the_phone_opens_and_answers_in_chromium() {
    const NAME: &str = "a_permission_request_on_a_closed_page_is_a_web_push_the_phone_opens_and_answers_in_chromium";
    if !available(true) || !terminull_netns::body_runs_here(NAME) {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), data.path());
        config.allow_insecure_push_endpoints = true;
        config.push_allowed_hosts = vec!["127.0.0.1".parse().unwrap()];
        let relay = Relay::start(config).await.unwrap();
        let bridge = support::remote::paired_bridge().await;
        support::remote::connect_to_relay(&bridge, relay.ws_url());
        tokio::time::sleep(Duration::from_millis(500)).await;
        let link =
            support::remote::offer_link(&bridge.home(), Some(relay.ws_url()), None, 300).to_url(&relay.http_url());
        // A second computer, paired later in the same page: its pushes open too.
        let second = support::remote::paired_bridge().await;
        support::remote::connect_to_relay(&second, relay.ws_url());
        tokio::time::sleep(Duration::from_millis(500)).await;
        let link2 =
            support::remote::offer_link(&second.home(), Some(relay.ws_url()), None, 300).to_url(&relay.http_url());

        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots").join("push");
        let _ = std::fs::remove_dir_all(&shots);
        let cwd = tempfile::tempdir().unwrap();
        let mut child = tokio::process::Command::new("node")
            .arg(web_dir().join("test/push-browser.mjs"))
            .args(["--link", &link, "--link2", &link2, "--screenshots"])
            .arg(&shots)
            .arg("--cwd")
            .arg(cwd.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut report = None;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
        while let Ok(Ok(Some(line))) = tokio::time::timeout_at(deadline, lines.next_line()).await {
            if let Some(json) = line.strip_prefix("CMD ") {
                let command: Command = serde_json::from_str(json).unwrap();
                let target = if command.bridge == Some(2) { &second } else { &bridge };
                act(&target.service, &command).await;
                stdin.write_all(b"OK\n").await.unwrap();
            } else if line.trim_start().starts_with('{') {
                report = Some(serde_json::from_str::<Report>(&line).unwrap_or_else(|e| panic!("report `{line}`: {e}")));
            }
        }
        let status = tokio::time::timeout(Duration::from_secs(20), child.wait()).await.expect("node exits").unwrap();
        let report = report.expect("a report line from the browser script");
        assert!(report.ok && status.success(), "the browser script failed: {:?}", report.error);
        let session_id = SessionId(report.session_id.unwrap());
        let secret = report.secret.unwrap();
        // Allow from the notification ran the tool: the echo's answer is in the history.
        let history = support::remote::history(bridge.bridge_home.path(), &session_id);
        let texts: String = history
            .iter()
            .filter_map(|b| match &b.kind {
                BlockKind::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        let said = texts.contains(&format!("You said: ask {secret}"));
        assert!(said, "the tool allowed from the notification did not run");
        relay.shutdown().await;
    });
}
