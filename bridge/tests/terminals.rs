//! Terminals end to end (docs/terminals.md): a paired device drives a real login shell
//! in a pseudo-terminal on the bridge, through the LAN server and through a relay (both
//! on loopback), with the Rust client — arithmetic, a resize seen by `stty size`,
//! Ctrl-C, a reconnect that shows the scrollback, 1.3 MB of output whole and in order,
//! and `exit` with its status — and a bridge with terminals off refuses every request.

mod support;

use std::time::{Duration, Instant};

use terminull_bridge::daemon_client::{Client, ClientError};
use terminull_bridge::home::{Config, Home};
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::service::Service;
use terminull_bridge::session::SessionPolicy;
use terminull_client::connection::Connection;
use terminull_client::terminal::{self, TerminalEvent, TerminalFeed};
use terminull_protocol::control::{BridgeMessage, ReplyErrorCode, ReplyResult};
use terminull_protocol::terminal::{TerminalEndReason, TerminalExit, TerminalId};

/// How a test reaches the bridge.
#[derive(Debug, Clone)]
enum Path {
    Lan(String),
    Relay(String),
}

async fn connect(paired: &support::remote::Paired, path: &Path) -> Client {
    for _ in 0..100 {
        let opened = match path {
            Path::Lan(url) => Connection::open_lan(&paired.device, &paired.record, url).await,
            Path::Relay(url) => Connection::open(&paired.device, &paired.record, Some(url)).await,
        };
        match opened {
            Ok(connection) => return Client::remote(connection),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    panic!("no link over {path:?}")
}

/// A device's view of one terminal: its client, its feed and what the screen got.
struct Term {
    client: Client,
    feed: TerminalFeed,
    screen: Vec<u8>,
    exit: Option<TerminalExit>,
}

impl Term {
    async fn call(&mut self, message: terminull_protocol::control::ControlMessage) -> Result<ReplyResult, ClientError> {
        let mut kept = Vec::new();
        let result = self.client.call(message, &mut kept).await;
        for m in kept {
            self.take(&m);
        }
        result
    }

    fn take(&mut self, message: &BridgeMessage) {
        match self.feed.accept(message) {
            Some(TerminalEvent::Output(bytes)) => self.screen.extend_from_slice(&bytes),
            Some(TerminalEvent::Exit(exit)) => self.exit = Some(exit),
            None => {}
        }
    }

    async fn type_line(&mut self, line: &str) {
        let id = self.feed.terminal_id.clone();
        self.call(terminal::input(&id, line.as_bytes())).await.expect("input accepted");
    }

    /// Reads output until the screen (from `from` on) holds `needle`; the text from `from`.
    async fn until(&mut self, from: usize, needle: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let from = from.min(self.screen.len());
        // Only the new bytes (and a needle's length before them) are searched each time.
        let mut scanned = from;
        loop {
            let start = scanned.saturating_sub(needle.len()).max(from);
            if self.screen[start..].windows(needle.len()).any(|w| w == needle.as_bytes()) {
                return String::from_utf8_lossy(&self.screen[from..]).into_owned();
            }
            scanned = self.screen.len();
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(message) = tokio::time::timeout(left, self.client.next()).await else {
                let text = String::from_utf8_lossy(&self.screen[from..]);
                panic!("`{needle}` not shown within {secs} s; the screen has:\n{text}")
            };
            self.take(&message.expect("the link is open"));
        }
    }

    async fn until_exit(&mut self, secs: u64) -> TerminalExit {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while self.exit.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = tokio::time::timeout(left, self.client.next()).await.expect("terminal_exit in time").unwrap();
            self.take(&message);
        }
        self.exit.clone().unwrap()
    }
}

/// `text` without its CSI escape sequences (the shell's bracketed-paste switches).
fn without_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('\x40'..='\x7e').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The whole acceptance run over `path`; returns the throughput of `seq 1 200000`, MB/s.
async fn drive_a_terminal(paired: &support::remote::Paired, path: Path) -> f64 {
    let cwd = tempfile::tempdir().unwrap();
    let client = connect(paired, &path).await;
    let mut term = Term { client, feed: TerminalFeed::new(TerminalId::from("")), screen: Vec::new(), exit: None };
    let ReplyResult::Terminal { terminal: listing } =
        term.call(terminal::open(Some(cwd.path().display().to_string()), 80, 24)).await.expect("terminal opens")
    else {
        panic!("not a terminal reply")
    };
    assert_eq!((listing.cols, listing.rows), (80, 24));
    let id = listing.terminal_id.clone();
    term.feed = TerminalFeed::new(id.clone());

    term.type_line("echo $((6*7))\n").await;
    term.until(0, "42\r\n", 20).await;

    term.call(terminal::resize(&id, 100, 37)).await.expect("resize accepted");
    let from = term.screen.len();
    term.type_line("stty size\n").await;
    term.until(from, "37 100\r\n", 20).await;

    // Ctrl-C interrupts the foreground job: the next command runs long before 100 s.
    term.type_line("sleep 100\n").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let interrupted = Instant::now();
    term.call(terminal::input(&id, b"\x03")).await.expect("Ctrl-C accepted");
    let from = term.screen.len();
    term.type_line("echo after-$((1+1))\n").await;
    term.until(from, "after-2", 20).await;
    assert!(interrupted.elapsed() < Duration::from_secs(20));

    // 1.3 MB of output, whole and in order.
    let from = term.screen.len();
    let started = Instant::now();
    term.type_line("seq 1 200000; echo seq-$((100+1))\n").await;
    let text = term.until(from, "seq-101\r\n", 120).await;
    let elapsed = started.elapsed();
    let numbers: Vec<u64> = without_escapes(&text)
        .split('\n')
        .map(|l| l.trim_matches('\r'))
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(numbers.len(), 200_000, "every line of seq arrived");
    assert!(numbers.iter().zip(1..).all(|(n, want)| *n == want), "in order");
    let bytes = text.len() as f64;
    let mb_s = bytes / 1e6 / elapsed.as_secs_f64();

    // A reconnect (a new link) shows the screen from the scrollback, then live output.
    let seen = term.feed.last_seq;
    term.type_line("echo before-$((2+2))\n").await;
    term.until(from, "before-4", 20).await;
    drop(term);
    let client = connect(paired, &path).await;
    let mut again = Term { client, feed: TerminalFeed::new(id.clone()), screen: Vec::new(), exit: None };
    let ReplyResult::Terminal { terminal: listing } = again.call(terminal::attach(&id, None)).await.expect("reattach")
    else {
        panic!("not a terminal reply")
    };
    assert!(listing.last_seq > seen);
    let replay = again.until(0, "before-4", 20).await;
    assert!(replay.contains("199999\r\n200000\r\n"), "the scrollback holds the end of seq's output");
    again.type_line("echo again-$((2+3))\n").await;
    again.until(0, "again-5", 20).await;
    let ReplyResult::Terminals { terminals } = again.call(terminal::list()).await.unwrap() else { panic!() };
    assert!(terminals.iter().any(|t| t.terminal_id == id && t.attached == 1), "{terminals:?}");

    // `exit` ends it, with its status, and it is gone.
    again.type_line("exit 7\n").await;
    let exit = again.until_exit(20).await;
    assert_eq!((exit.reason, exit.exit_code), (TerminalEndReason::Exited, Some(7)));
    match again.call(terminal::attach(&id, None)).await {
        Err(ClientError::Refused { code: ReplyErrorCode::UnknownTerminal, .. }) => {}
        other => panic!("an ended terminal cannot be attached: {other:?}"),
    }
    mb_s
}

#[allow(clippy::print_stdout, reason = "the throughput figure is the test's report")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_through_the_lan_server_runs_commands_survives_a_reconnect_and_exits() {
    let paired = support::remote::paired_bridge().await;
    let lan = support::remote::start_lan(&paired).await;
    let mb_s = drive_a_terminal(&paired, Path::Lan(lan.ws_url())).await;
    eprintln!("terminal throughput over the LAN server: seq 1 200000 (1.29 MB) at {mb_s:.2} MB/s");
    lan.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_through_the_relay_runs_commands_survives_a_reconnect_and_exits() {
    let paired = support::remote::paired_bridge().await;
    let relay_data = tempfile::tempdir().unwrap();
    let relay = terminull_relay::Relay::start(terminull_relay::RelayConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        relay_data.path(),
    ))
    .await
    .unwrap();
    support::remote::connect_to_relay(&paired, relay.ws_url());
    let mb_s = drive_a_terminal(&paired, Path::Relay(relay.ws_url())).await;
    eprintln!("terminal throughput through the relay: seq 1 200000 (1.29 MB) at {mb_s:.2} MB/s");
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_terminals_off_every_terminal_request_is_refused_with_the_reason() {
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home::at(home_dir.path());
    let config = Config::parse("[terminals]\nenabled = false\n").unwrap();
    let mut scan = ScanOptions::new(home.clone(), config.clone());
    scan.exe_dir = Some(support::echo_only_exe_dir());
    let service = Service::start(home.clone(), config, scan, SessionPolicy::default()).await.unwrap();
    let device = support::remote::pair_device(&home, &service);
    let lan = terminull_bridge::lan::start(
        device.ctx.clone(),
        home.clone(),
        terminull_bridge::lan::LanConfig::new("127.0.0.1:0".parse().unwrap()),
    )
    .await
    .unwrap();
    let id = TerminalId::from("t-any");
    let requests = || {
        [
            terminal::open(None, 80, 24),
            terminal::attach(&id, None),
            terminal::input(&id, b"id\n"),
            terminal::resize(&id, 80, 24),
            terminal::close(&id),
            terminal::list(),
        ]
    };
    let lan_client =
        Client::remote(Connection::open_lan(&device.device, &device.record, &lan.ws_url()).await.expect("LAN link"));
    for mut client in [Client::in_process(&service), lan_client] {
        for request in requests() {
            let kind = request.message_type();
            match client.call(request, &mut Vec::new()).await {
                Err(ClientError::Refused { code: ReplyErrorCode::NotSupported, message }) => {
                    assert!(message.contains("terminals are turned off"), "{kind}: {message}");
                    assert!(message.contains("[terminals] enabled = false"), "{kind}: {message}");
                }
                other => panic!("{kind} with terminals off: {other:?}"),
            }
        }
    }
    lan.stop();
}
