//! Terminals (docs/terminals.md): the user's login shell in a pseudo-terminal, opened
//! and driven by any client through the one dispatcher ([`crate::connection`]), its
//! output streamed like a session's blocks (sealed on a device's link).
//!
//! Several terminals per bridge, at most `[terminals] max_open`; each keeps a bounded
//! scrollback that a client (re)attaching is shown, survives its followers leaving,
//! and ends on `exit`, on `terminal_close` from any client, after `idle_secs` with
//! nobody attached or typing, or when the bridge stops — its whole session killed.
//! `[terminals] enabled = false` refuses every terminal request with the reason.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Deserialize;
use terminull_protocol::control::{Control, ControlMessage, Reply, ReplyErrorCode, ReplyResult};
use terminull_protocol::ids::SessionId;
use terminull_protocol::terminal::{TerminalEndReason, TerminalId, check_size, decode_input};

mod follow;
pub mod pty;
mod term;

pub use follow::Following;
use term::{InputError, Terminal};

/// `[terminals]` in `config.toml`; every key optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalsSection {
    /// Whether paired devices and local clients may open terminals; default true.
    /// False refuses every terminal request (`not_supported`, with the reason).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Scrollback kept per terminal, KiB; default [`DEFAULT_SCROLLBACK_KIB`] (at least 16).
    #[serde(default)]
    pub scrollback_kib: Option<usize>,
    /// Seconds a terminal may sit with nobody attached, typing or resizing before it
    /// is closed; default [`DEFAULT_IDLE_SECS`].
    #[serde(default)]
    pub idle_secs: Option<u64>,
    /// The most terminals open at once; default [`DEFAULT_MAX_OPEN`]. One more is refused `busy`.
    #[serde(default)]
    pub max_open: Option<usize>,
}

/// Scrollback per terminal when `[terminals] scrollback_kib` is not set.
pub const DEFAULT_SCROLLBACK_KIB: usize = 256;
/// Idle seconds before a terminal is closed, when `[terminals] idle_secs` is not set (12 h).
pub const DEFAULT_IDLE_SECS: u64 = 12 * 3600;
/// Terminals open at once when `[terminals] max_open` is not set.
pub const DEFAULT_MAX_OPEN: usize = 16;

impl TerminalsSection {
    /// `enabled`, default true.
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    fn scrollback_bytes(&self) -> usize {
        self.scrollback_kib.unwrap_or(DEFAULT_SCROLLBACK_KIB).clamp(16, 64 * 1024) * 1024
    }

    fn idle(&self) -> Duration {
        Duration::from_secs(self.idle_secs.unwrap_or(DEFAULT_IDLE_SECS).max(1))
    }

    fn max_open(&self) -> usize {
        self.max_open.unwrap_or(DEFAULT_MAX_OPEN).max(1)
    }
}

/// The reason every terminal request gets when terminals are off.
pub const DISABLED: &str =
    "terminals are turned off on this bridge (`[terminals] enabled = false` in config.toml); nothing was run";

/// The bridge's open terminals; cheap to clone.
#[derive(Debug, Clone)]
pub struct Terminals {
    inner: Arc<Manager>,
}

#[derive(Debug)]
struct Manager {
    config: TerminalsSection,
    open: Mutex<BTreeMap<TerminalId, Arc<Terminal>>>,
}

impl Drop for Manager {
    fn drop(&mut self) {
        // The bridge is going: no shell it started outlives it.
        let open = std::mem::take(&mut *self.open.lock().unwrap_or_else(|p| p.into_inner()));
        for terminal in open.values() {
            if let Ok(sid) = i32::try_from(terminal.pid) {
                pty::kill_session_now(sid);
            }
        }
    }
}

/// True for the control messages [`Terminals::dispatch`] handles.
pub fn is_terminal_control(message: &ControlMessage) -> bool {
    matches!(
        message,
        ControlMessage::TerminalOpen(_)
            | ControlMessage::TerminalAttach(_)
            | ControlMessage::TerminalInput(_)
            | ControlMessage::TerminalResize(_)
            | ControlMessage::TerminalClose(_)
            | ControlMessage::ListTerminals(_)
    )
}

type Outcome = Result<(ReplyResult, Option<Following>), (ReplyErrorCode, String)>;

impl Terminals {
    /// A manager with `config`; needs a Tokio runtime (an idle reaper runs while it lives).
    pub fn new(config: TerminalsSection) -> Self {
        let inner = Arc::new(Manager { config, open: Mutex::default() });
        if inner.config.enabled() {
            tokio::spawn(reap_idle(Arc::downgrade(&inner)));
        }
        Terminals { inner }
    }

    fn open_terminals(&self) -> std::sync::MutexGuard<'_, BTreeMap<TerminalId, Arc<Terminal>>> {
        self.inner.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, id: &TerminalId) -> Result<Arc<Terminal>, (ReplyErrorCode, String)> {
        self.open_terminals()
            .get(id)
            .filter(|t| !t.ended())
            .cloned()
            .ok_or_else(|| (ReplyErrorCode::UnknownTerminal, format!("no open terminal `{id}`")))
    }

    /// Handles one terminal control message; `session_cwd` finds a session's
    /// directory. The follow, when the message makes the connection follow a terminal.
    pub fn dispatch(
        &self,
        control: Control,
        session_cwd: impl FnOnce(&SessionId) -> Result<String, String>,
    ) -> (Reply, Option<Following>) {
        let id = control.id;
        let outcome = if self.inner.config.enabled() {
            self.handle(control.message, session_cwd)
        } else {
            Err((ReplyErrorCode::NotSupported, DISABLED.to_owned()))
        };
        match outcome {
            Ok((result, follow)) => (Reply::ok(id, result), follow),
            Err((code, message)) => (Reply::error(id, code, message), None),
        }
    }

    fn handle(
        &self,
        message: ControlMessage,
        session_cwd: impl FnOnce(&SessionId) -> Result<String, String>,
    ) -> Outcome {
        let invalid = |m: String| (ReplyErrorCode::InvalidMessage, m);
        let accepted = || Ok((ReplyResult::Accepted {}, None));
        match message {
            ControlMessage::TerminalOpen(m) => {
                check_size(m.cols, m.rows).map_err(invalid)?;
                let cwd = match (m.cwd, m.session_id) {
                    (Some(cwd), _) => cwd,
                    (None, Some(session)) => session_cwd(&session).map_err(|e| (ReplyErrorCode::UnknownSession, e))?,
                    (None, None) => home_dir(),
                };
                if !std::path::Path::new(&cwd).is_dir() {
                    return Err(invalid(format!("cwd `{cwd}` is not a directory")));
                }
                self.open(PathBuf::from(cwd), m.cols, m.rows)
            }
            ControlMessage::TerminalAttach(m) => {
                let terminal = self.get(&m.terminal_id)?;
                let (attachment, snapshot) = terminal.attach(m.since_seq.unwrap_or(0));
                Ok((ReplyResult::Terminal { terminal: terminal.listing() }, Some(Following { attachment, snapshot })))
            }
            ControlMessage::TerminalInput(m) => {
                let bytes = decode_input(&m.data).map_err(|e| invalid(format!("terminal_input: {e}")))?;
                match self.get(&m.terminal_id)?.write(bytes) {
                    Ok(()) => accepted(),
                    Err(InputError::Full) => Err((
                        ReplyErrorCode::Busy,
                        format!("terminal `{}` is not reading its input; this input was dropped", m.terminal_id),
                    )),
                    Err(InputError::Gone) => {
                        Err((ReplyErrorCode::UnknownTerminal, format!("terminal `{}` ended", m.terminal_id)))
                    }
                }
            }
            ControlMessage::TerminalResize(m) => {
                check_size(m.cols, m.rows).map_err(invalid)?;
                self.get(&m.terminal_id)?
                    .resize(m.cols, m.rows)
                    .map_err(|e| (ReplyErrorCode::Internal, format!("resizing `{}`: {e}", m.terminal_id)))?;
                accepted()
            }
            ControlMessage::TerminalClose(m) => {
                self.get(&m.terminal_id)?.end(TerminalEndReason::Closed);
                accepted()
            }
            ControlMessage::ListTerminals(_) => {
                let terminals = self.open_terminals().values().filter(|t| !t.ended()).map(|t| t.listing()).collect();
                Ok((ReplyResult::Terminals { terminals }, None))
            }
            other => {
                Err((ReplyErrorCode::Internal, format!("`{}` is not a terminal control message", other.message_type())))
            }
        }
    }

    fn open(&self, cwd: PathBuf, cols: u16, rows: u16) -> Outcome {
        let mut open = self.open_terminals();
        let max = self.inner.config.max_open();
        if open.len() >= max {
            return Err((
                ReplyErrorCode::Busy,
                format!("{max} terminals are open, the most `[terminals] max_open` allows; close one first"),
            ));
        }
        let id = TerminalId(format!("t-{}", uuid::Uuid::new_v4().simple()));
        let weak = Arc::downgrade(&self.inner);
        let on_end = move |id: &TerminalId| {
            if let Some(manager) = weak.upgrade() {
                manager.open.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
            }
        };
        let shell = pty::login_shell();
        let scrollback = self.inner.config.scrollback_bytes();
        let terminal = Terminal::start(id.clone(), &shell, &cwd, (cols, rows), scrollback, on_end)
            .map_err(|e| (ReplyErrorCode::Internal, e.to_string()))?;
        tracing::info!(terminal = %id, shell = %shell.display(), cwd = %cwd.display(), "terminal opened");
        open.insert(id, terminal.clone());
        drop(open);
        let (attachment, snapshot) = terminal.attach(0);
        Ok((ReplyResult::Terminal { terminal: terminal.listing() }, Some(Following { attachment, snapshot })))
    }

    /// Ends every terminal (the bridge is stopping).
    pub fn shutdown(&self) {
        for terminal in self.open_terminals().values() {
            terminal.end(TerminalEndReason::Shutdown);
        }
    }
}

/// The bridge user's home directory (`$HOME`, else `/`).
fn home_dir() -> String {
    std::env::var("HOME").ok().filter(|h| std::path::Path::new(h).is_dir()).unwrap_or_else(|| "/".to_owned())
}

/// Closes the terminals idle past the configured time, while the manager lives.
async fn reap_idle(manager: Weak<Manager>) {
    loop {
        let (idle, tick) = {
            let Some(manager) = manager.upgrade() else { return };
            let idle = manager.config.idle();
            (idle, (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30)))
        };
        tokio::time::sleep(tick).await;
        let Some(manager) = manager.upgrade() else { return };
        let open: Vec<_> = manager.open.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        for terminal in open {
            if terminal.idle_for(idle) {
                tracing::info!(terminal = %terminal.id, "terminal idle for {idle:?}: closing it");
                terminal.end(TerminalEndReason::Idle);
            }
        }
    }
}
