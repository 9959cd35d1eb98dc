//! Terminals from a device (docs/terminals.md): the control messages that open,
//! attach, type into, resize and close a terminal on the bridge, and [`TerminalFeed`],
//! which turns the bridge's `terminal_output`/`terminal_exit` messages for one
//! terminal into bytes for a terminal emulator, dropping repeats after a reattach.
//!
//! Send the messages through any client (a [`crate::connection::Connection`]'s `tx` as
//! JSON, or the bridge's own client): on a device's link the connection puts a fresh
//! key in `app_pubkey` and opens the terminal's sealed output with it.

use terminull_protocol::control::{
    BridgeMessage, ControlMessage, ListTerminals, TerminalAttach, TerminalClose, TerminalInput, TerminalOpen,
    TerminalResize,
};
use terminull_protocol::crypto::{b64, from_b64};
use terminull_protocol::terminal::{TerminalExit, TerminalId};

/// `terminal_open` in `cwd` (the bridge's home directory when `None`), `cols`×`rows`.
pub fn open(cwd: Option<String>, cols: u16, rows: u16) -> ControlMessage {
    ControlMessage::TerminalOpen(TerminalOpen { cwd, session_id: None, cols, rows, app_pubkey: String::new() })
}

/// `terminal_attach`: the scrollback after `since_seq` (all when `None`), then live output.
pub fn attach(terminal_id: &TerminalId, since_seq: Option<u64>) -> ControlMessage {
    ControlMessage::TerminalAttach(TerminalAttach {
        terminal_id: terminal_id.clone(),
        since_seq,
        app_pubkey: String::new(),
    })
}

/// `terminal_input` carrying `bytes` (at most 64 KiB; split longer input).
pub fn input(terminal_id: &TerminalId, bytes: &[u8]) -> ControlMessage {
    ControlMessage::TerminalInput(TerminalInput { terminal_id: terminal_id.clone(), data: b64(bytes) })
}

/// `terminal_resize`.
pub fn resize(terminal_id: &TerminalId, cols: u16, rows: u16) -> ControlMessage {
    ControlMessage::TerminalResize(TerminalResize { terminal_id: terminal_id.clone(), cols, rows })
}

/// `terminal_close`.
pub fn close(terminal_id: &TerminalId) -> ControlMessage {
    ControlMessage::TerminalClose(TerminalClose { terminal_id: terminal_id.clone() })
}

/// `list_terminals`.
pub fn list() -> ControlMessage {
    ControlMessage::ListTerminals(ListTerminals {})
}

/// What one bridge message means for the terminal a [`TerminalFeed`] follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalEvent {
    /// Bytes for the screen, in order.
    Output(Vec<u8>),
    /// The terminal ended.
    Exit(TerminalExit),
}

/// One terminal's output as a device receives it.
#[derive(Debug, Clone)]
pub struct TerminalFeed {
    /// The terminal.
    pub terminal_id: TerminalId,
    /// The `seq` of the last output chunk taken: reattach with it as `since_seq`.
    pub last_seq: u64,
    /// Output messages refused (not base64) or dropped as repeats.
    pub dropped: u64,
}

impl TerminalFeed {
    /// A feed for `terminal_id` with nothing received yet.
    pub fn new(terminal_id: TerminalId) -> Self {
        TerminalFeed { terminal_id, last_seq: 0, dropped: 0 }
    }

    /// The event `message` carries for this terminal; `None` for other messages, other
    /// terminals, and output already taken (a reattach repeats what the ring holds
    /// unless `since_seq` said otherwise).
    pub fn accept(&mut self, message: &BridgeMessage) -> Option<TerminalEvent> {
        match message {
            BridgeMessage::TerminalOutput(out) if out.terminal_id == self.terminal_id => {
                if out.seq <= self.last_seq {
                    self.dropped += 1;
                    return None;
                }
                match from_b64("data", &out.data) {
                    Ok(bytes) => {
                        self.last_seq = out.seq;
                        Some(TerminalEvent::Output(bytes))
                    }
                    Err(e) => {
                        tracing::warn!(terminal = %self.terminal_id, "output refused: {e}");
                        self.dropped += 1;
                        None
                    }
                }
            }
            BridgeMessage::TerminalExit(exit) if exit.terminal_id == self.terminal_id => {
                Some(TerminalEvent::Exit(exit.clone()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use terminull_protocol::terminal::TerminalOutput;

    use super::*;

    fn output(id: &str, seq: u64, data: &[u8]) -> BridgeMessage {
        BridgeMessage::TerminalOutput(TerminalOutput { terminal_id: id.into(), seq, data: b64(data), replay: false })
    }

    #[test]
    fn a_feed_takes_its_terminals_output_once_in_order() {
        let mut feed = TerminalFeed::new("t1".into());
        assert_eq!(feed.accept(&output("t1", 1, b"a")), Some(TerminalEvent::Output(b"a".to_vec())));
        assert_eq!(feed.accept(&output("t2", 2, b"x")), None);
        assert_eq!(feed.accept(&output("t1", 1, b"a")), None, "a repeat after a reattach is dropped");
        assert_eq!(feed.accept(&output("t1", 3, b"b")), Some(TerminalEvent::Output(b"b".to_vec())));
        assert_eq!((feed.last_seq, feed.dropped), (3, 1));
    }
}
