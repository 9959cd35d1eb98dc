//! The adapter host against purpose-built faulty adapters: real processes, each fault
//! reported by name, the bridge side never stuck and never crashed.

mod support;

use std::time::Duration;

use terminull_bridge::host::{AdapterCommand, AdapterEvent, HostError, HostedAdapter, launch};
use terminull_protocol::adapter::{self as proto, Empty, StartParams};
use terminull_protocol::blocks::{BlockKind, EndReason, UserMessage};
use terminull_protocol::ndjson::LineError;

fn broken(mode: &str) -> AdapterCommand {
    let (program, args) = support::broken(mode);
    AdapterCommand { program, args: args.into_iter().map(Into::into).collect(), env: Vec::new() }
}

fn start_params() -> StartParams {
    StartParams {
        session_id: "s1".into(),
        cwd: Some("/tmp".into()),
        model: None,
        binary: None,
        resume_session_id: None,
        effort: None,
        permission_mode: None,
    }
}

async fn next(h: &mut HostedAdapter) -> AdapterEvent {
    tokio::time::timeout(Duration::from_secs(15), h.next_event())
        .await
        .expect("no event within 15 s")
        .expect("event stream ended")
}

async fn started(mode: &str) -> HostedAdapter {
    let h = launch(broken(mode), Duration::from_secs(10)).await.unwrap();
    h.call::<proto::Start>(&start_params()).await.unwrap();
    h.call::<proto::Send>(&UserMessage { text: "hello".into(), attachments: vec![] }).await.unwrap();
    h
}

/// Launches the broken adapter in `mode`, which must fail with a message that names
/// every one of `needles`; the error.
async fn launch_fails(mode: &str, needles: &[&str]) -> HostError {
    let err = launch(broken(mode), Duration::from_secs(10)).await.unwrap_err();
    let text = err.to_string();
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} missing: {text}");
    }
    err
}

#[tokio::test]
async fn wrong_protocol_version_is_refused_naming_adapter_path_and_field() {
    let needles = ["broken-wrong-protocol-version", "python3", "protocol_version must be 1 or 2"];
    let err = launch_fails("wrong-protocol-version", &needles).await;
    assert!(matches!(err, HostError::Refused { .. }), "{err}");
}

#[tokio::test]
async fn exit_during_initialize_reports_status_and_stderr() {
    let err = launch_fails("exits-during-initialize", &["exit status: 4", "exiting during initialize"]).await;
    assert!(matches!(err, HostError::ExitedDuringHandshake { .. }), "{err}");
}

#[tokio::test]
async fn handshake_deadline_is_enforced_and_a_slow_adapter_within_it_is_fine() {
    let err = launch(broken("slow-handshake"), Duration::from_millis(500)).await.unwrap_err();
    assert!(matches!(err, HostError::HandshakeTimeout { .. }), "{err}");
    let err = launch(broken("never-initializes"), Duration::from_millis(500)).await.unwrap_err();
    assert!(err.to_string().contains("no answer to initialize"), "{err}");
    let mut ok = launch(broken("slow-handshake"), Duration::from_secs(10)).await.unwrap();
    assert_eq!(ok.declaration().agent_id.as_str(), "broken-slow-handshake");
    ok.shutdown().await;
}

#[tokio::test]
async fn a_20_mib_line_is_skipped_and_the_adapter_kept() {
    let mut h = started("huge-line").await;
    let mut saw_too_long = false;
    loop {
        match next(&mut h).await {
            AdapterEvent::BadLine(LineError::TooLong { length, .. }) => {
                assert_eq!(length, 20 * 1024 * 1024);
                saw_too_long = true;
            }
            AdapterEvent::Block(b) => {
                if let BlockKind::SessionEnd(end) = b.kind {
                    assert_eq!(end.reason, EndReason::Completed);
                    break;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(saw_too_long);
    assert_eq!(h.bad_lines(), 1);
    h.call::<proto::Stop>(&Empty {}).await.unwrap();
    h.shutdown().await;
}

#[tokio::test]
async fn garbage_on_stdout_is_an_event_and_the_turn_goes_on() {
    let mut h = started("stdout-garbage").await;
    let mut events = Vec::new();
    loop {
        let e = next(&mut h).await;
        let end = matches!(&e, AdapterEvent::Block(b) if matches!(b.kind, BlockKind::SessionEnd(_)));
        events.push(e);
        if end {
            break;
        }
    }
    assert!(events.iter().any(|e| matches!(e, AdapterEvent::BadLine(LineError::NotJson { .. }))), "{events:?}");
    h.shutdown().await;
}

#[tokio::test]
async fn a_crash_mid_turn_ends_the_events_with_exit_status_and_stderr_tail() {
    let mut h = started("exits-mid-turn").await;
    loop {
        match next(&mut h).await {
            AdapterEvent::Exited { status, stderr_tail } => {
                assert_eq!(status.and_then(|s| s.code()), Some(3));
                assert!(stderr_tail.contains("exiting with status 3"), "{stderr_tail}");
                break;
            }
            AdapterEvent::Block(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(h.next_event().await.is_none());
    // Calls after the crash fail fast instead of hanging.
    assert!(h.call::<proto::Interrupt>(&Empty {}).await.is_err());
}

#[tokio::test]
async fn shutdown_ends_an_adapter_that_hangs_mid_turn() {
    let mut h = started("hangs-mid-turn").await;
    assert!(matches!(next(&mut h).await, AdapterEvent::Block(_)));
    let pid = h.pid();
    let outcome = tokio::time::timeout(Duration::from_secs(30), h.shutdown()).await.expect("shutdown hung");
    assert!(outcome.status.is_some(), "{outcome:?}");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}/cmdline")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| s.contains(") Z")).unwrap_or(true)
    );
}

#[tokio::test]
async fn notifications_sent_during_start_are_kept_in_order() {
    // echo-rs reports its agent session id while `start` runs, before answering it.
    let mut h = launch(AdapterCommand::new(support::echo_rs()), Duration::from_secs(10)).await.unwrap();
    h.call::<proto::Start>(&start_params()).await.unwrap();
    assert_eq!(next(&mut h).await, AdapterEvent::AgentSessionId("echo-s1".into()));
    h.call::<proto::Send>(&UserMessage { text: "one two".into(), attachments: vec![] }).await.unwrap();
    let mut texts = Vec::new();
    loop {
        match next(&mut h).await {
            AdapterEvent::Block(b) => match b.kind {
                BlockKind::Text(t) => texts.push(t.text),
                BlockKind::SessionEnd(_) => break,
                _ => {}
            },
            other => panic!("unexpected {other:?}"),
        }
    }
    // echo-rs streams appends (adapter protocol version 2), a burst joined by the SDK's
    // pacer: the first word at once, the rest in order, closed by the last chunk.
    assert_eq!(texts[0], "You ");
    assert_eq!(texts.concat(), "You said: one two");
    h.call::<proto::Stop>(&Empty {}).await.unwrap();
    h.shutdown().await;
}
