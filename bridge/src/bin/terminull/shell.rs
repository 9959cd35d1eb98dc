//! `terminull shell`: a terminal on the bridge (docs/terminals.md), from this
//! computer's terminal: stdin in raw mode goes to the shell as input, the window's
//! size follows SIGWINCH, the shell's output goes to stdout. Reaches the bridge like
//! `terminull chat` (the daemon, an in-process bridge, or `--remote/--relay/--lan` as a
//! paired device). Ends when the shell ends; its exit status is this command's.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use terminull_bridge::daemon_client::Client;
use terminull_bridge::home::Home;
use terminull_client::terminal::{self, TerminalEvent, TerminalFeed};
use terminull_protocol::control::{BridgeMessage, ReplyOutcome, ReplyResult};
use tokio::signal::unix::{SignalKind, signal};

use crate::args::RemoteArgs;
use crate::runtime;
use crate::sessions::{client_for, remote_client};

/// Puts stdin in raw mode while it lives (when stdin is a terminal).
struct RawMode(Option<rustix::termios::Termios>);

impl RawMode {
    fn enter() -> Self {
        let stdin = std::io::stdin();
        let Ok(saved) = rustix::termios::tcgetattr(stdin.as_fd()) else { return RawMode(None) };
        let mut raw = saved.clone();
        raw.make_raw();
        let _ = rustix::termios::tcsetattr(stdin.as_fd(), rustix::termios::OptionalActions::Now, &raw);
        RawMode(Some(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = rustix::termios::tcsetattr(std::io::stdin().as_fd(), rustix::termios::OptionalActions::Now, saved);
        }
    }
}

fn window_size() -> (u16, u16) {
    match rustix::termios::tcgetwinsize(std::io::stdout().as_fd()) {
        Ok(ws) if ws.ws_col > 0 && ws.ws_row > 0 => (ws.ws_col, ws.ws_row),
        _ => (80, 24),
    }
}

pub(crate) fn shell(home: Option<PathBuf>, cwd: Option<PathBuf>, remote: RemoteArgs) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    runtime()?.block_on(async move {
        let remote_wanted = remote.remote || remote.relay.is_some() || remote.lan.is_some() || remote.bridge.is_some();
        let (client, service) =
            if remote_wanted { (remote_client(&home, &remote).await?, None) } else { client_for(&home).await? };
        let code = run(client, cwd.map(|c| c.display().to_string())).await;
        if let Some((service, _lock)) = service {
            service.shutdown().await;
        }
        code
    })
}

async fn run(mut client: Client, cwd: Option<String>) -> anyhow::Result<ExitCode> {
    let (cols, rows) = window_size();
    let mut kept = Vec::new();
    let result = client.call(terminal::open(cwd, cols, rows), &mut kept).await.context("opening a terminal")?;
    let ReplyResult::Terminal { terminal: listing } = result else {
        anyhow::bail!("unexpected reply to terminal_open")
    };
    let id = listing.terminal_id.clone();
    eprintln!("terminal {id}: {} in {} (exit the shell to leave)\r", listing.shell, listing.cwd);
    let mut feed = TerminalFeed::new(id.clone());
    let _raw = RawMode::enter();
    let mut stdout = std::io::stdout();
    // stdin is read on a thread of its own (a blocking read), a bounded queue apart.
    let (keys_tx, mut keys) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin();
        let mut buf = [0u8; 4096];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if keys_tx.blocking_send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let mut winch = signal(SignalKind::window_change()).context("watching the window size")?;
    let mut pending = kept.into_iter();
    loop {
        let message = match pending.next() {
            Some(m) => m,
            None => tokio::select! {
                m = client.next() => match m {
                    Some(m) => m,
                    None => anyhow::bail!("the bridge closed the connection"),
                },
                Some(bytes) = keys.recv() => {
                    client.send(terminal::input(&id, &bytes)).await.context("sending input")?;
                    continue;
                }
                _ = winch.recv() => {
                    let (cols, rows) = window_size();
                    client.send(terminal::resize(&id, cols, rows)).await.context("resizing")?;
                    continue;
                }
            },
        };
        if let BridgeMessage::Reply(reply) = &message {
            if let ReplyOutcome::Error { error } = &reply.outcome {
                eprint!("\r\nterminull: {}\r\n", error.message);
            }
            continue;
        }
        match feed.accept(&message) {
            Some(TerminalEvent::Output(bytes)) => {
                stdout.write_all(&bytes).and_then(|()| stdout.flush()).context("writing to stdout")?;
            }
            Some(TerminalEvent::Exit(exit)) => {
                drop(_raw);
                eprintln!(
                    "\r\n[terminal {id} ended: {:?}{}]",
                    exit.reason,
                    match exit.exit_code {
                        Some(code) => format!(", exit status {code}"),
                        None => String::new(),
                    }
                );
                let code = exit.exit_code.and_then(|c| u8::try_from(c).ok()).unwrap_or(1);
                return Ok(ExitCode::from(code));
            }
            None => {}
        }
    }
}
