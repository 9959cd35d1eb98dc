//! Attacks on terminals (docs/terminals.md#threat-model) by a client that may open
//! them: oversized or malformed input and window sizes are refused naming the field,
//! and a client that stops reading while its shell floods output neither grows the
//! bridge's memory without bound nor holds the shell up. Through the in-process path:
//! the one dispatcher serves every transport alike (bridge/tests/sessions.rs).

mod support;

use std::time::{Duration, Instant};

use terminull_bridge::daemon_client::{Client, ClientError};
use terminull_bridge::home::{Config, Home};
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::service::Service;
use terminull_bridge::session::SessionPolicy;
use terminull_client::terminal::{self, TerminalEvent, TerminalFeed};
use terminull_protocol::control::{ControlMessage, ReplyErrorCode, ReplyResult, TerminalInput};
use terminull_protocol::crypto::b64;
use terminull_protocol::terminal::{MAX_INPUT_BYTES, TerminalId};

fn rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

async fn bridge() -> (tempfile::TempDir, Service) {
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home::at(home_dir.path());
    let mut scan = ScanOptions::new(home.clone(), Config::default());
    scan.exe_dir = Some(support::echo_only_exe_dir());
    let service = Service::start(home, Config::default(), scan, SessionPolicy::default()).await.unwrap();
    (home_dir, service)
}

async fn open(client: &mut Client, cwd: &std::path::Path) -> TerminalId {
    let opened = client.call(terminal::open(Some(cwd.display().to_string()), 80, 24), &mut Vec::new()).await;
    let Ok(ReplyResult::Terminal { terminal }) = opened else { panic!("terminal_open: {opened:?}") };
    terminal.terminal_id
}

fn refused(outcome: Result<ReplyResult, ClientError>) -> (ReplyErrorCode, String) {
    match outcome {
        Err(ClientError::Refused { code, message }) => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_terminal_oversized_or_malformed_input_and_sizes() {
    let (_home, service) = bridge().await;
    let cwd = tempfile::tempdir().unwrap();
    let mut client = Client::in_process(&service);
    let id = open(&mut client, cwd.path()).await;
    let input = |data: String| ControlMessage::TerminalInput(TerminalInput { terminal_id: id.clone(), data });
    let cases = [
        (input(b64(&vec![b'x'; MAX_INPUT_BYTES + 1])), "over 65536 bytes"),
        (input("a".repeat(4 << 20)), "over 65536 bytes"),
        (input("%%% not base64".into()), "not base64"),
        (terminal::resize(&id, 0, 24), "`cols`"),
        (terminal::resize(&id, 80, 5000), "`rows`"),
        (terminal::open(None, 65535, 24), "`cols`"),
    ];
    let n = cases.len();
    for (message, expected) in cases {
        let (code, text) = refused(client.call(message, &mut Vec::new()).await);
        assert_eq!(code, ReplyErrorCode::InvalidMessage, "{text}");
        assert!(text.contains(expected), "`{expected}` in: {text}");
    }
    let ReplyResult::Terminals { terminals } = client.call(terminal::list(), &mut Vec::new()).await.unwrap() else {
        panic!()
    };
    assert_eq!(terminals.len(), 1, "the refused open started nothing");
    eprintln!(
        "attack: terminal oversized/malformed input and sizes: {n} of {n} refused invalid_message, naming the field"
    );
    client.call(terminal::close(&id), &mut Vec::new()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_terminal_stalled_reader_under_an_output_flood() {
    let (_home, service) = bridge().await;
    let cwd = tempfile::tempdir().unwrap();
    // The attacker: room for 8 messages, then it never reads again.
    let mut stalled = Client::in_process_with_inbox(&service, 8);
    let id = open(&mut stalled, cwd.path()).await;
    let before = rss_mib();
    // About 100 MB of output while nobody reads.
    stalled.send(terminal::input(&id, b"head -c 100000000 /dev/zero | tr '\\0' x; echo\n")).await.unwrap();
    let started = Instant::now();
    let mut peak = before;
    // Another client follows along and sees the flood end: the shell was not held up.
    let mut watcher = Client::in_process(&service);
    let mut kept = Vec::new();
    watcher.call(terminal::attach(&id, Some(u64::MAX)), &mut kept).await.unwrap();
    let mut feed = TerminalFeed::new(id.clone());
    let mut seen = 0usize;
    let mut sent_marker = false;
    let mut tail: Vec<u8> = Vec::new();
    loop {
        assert!(started.elapsed() < Duration::from_secs(240), "the flood did not end in 240 s ({seen} bytes seen)");
        let message = tokio::time::timeout(Duration::from_secs(60), watcher.next()).await.unwrap().unwrap();
        peak = peak.max(rss_mib());
        if let Some(TerminalEvent::Output(bytes)) = feed.accept(&message) {
            seen += bytes.len();
            tail.extend_from_slice(&bytes);
            if tail.len() > 4096 {
                tail.drain(..tail.len() - 4096);
            }
        }
        if seen > 10_000_000 && !sent_marker {
            watcher.send(terminal::input(&id, b"echo alive-$((40+2))\n")).await.unwrap();
            sent_marker = true;
        }
        if String::from_utf8_lossy(&tail).contains("alive-42") {
            break;
        }
    }
    let grown = peak.saturating_sub(before);
    eprintln!(
        "attack: terminal stalled reader: RSS {before} MiB -> peak {peak} MiB (+{grown}, bound +64) under 100 MB of output; the shell answered after {:.1} s (a watcher took {seen} bytes live, the rest skipped past the scrollback)",
        started.elapsed().as_secs_f64()
    );
    assert!(grown < 64, "the stalled client grew the bridge by {grown} MiB");
    let _ = watcher.call(terminal::close(&id), &mut Vec::new()).await;
    drop(stalled);
}
