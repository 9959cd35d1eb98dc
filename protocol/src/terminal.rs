//! Terminals: a login shell in a pseudo-terminal on the bridge's machine, driven by a
//! client (docs/terminals.md).
//!
//! The control messages (`terminal_open`, `terminal_attach`, `terminal_input`,
//! `terminal_resize`, `terminal_close`, `list_terminals`) are variants of
//! [`crate::control::ControlMessage`]; this module holds what they carry and what the
//! bridge sends back:
//!
//! - [`TerminalOutput`]: bytes the shell wrote, base64, numbered by a `seq` of their
//!   own per terminal (1, 2, …), so a client that reattaches with `since_seq` gets
//!   what it missed that the scrollback still holds;
//! - [`TerminalExit`]: the terminal ended, and why.
//!
//! On a device's encrypted link both travel as sealed `block` envelopes whose
//! `session_id` is the terminal id and whose `block_type` is [`OUTPUT_BLOCK_TYPE`] or
//! [`EXIT_BLOCK_TYPE`], under keys derived from the `app_pubkey` of the
//! `terminal_open`/`terminal_attach` that made the link follow the terminal: the same
//! sealing, counters and batching as a session's blocks.
//!
//! Input bytes travel base64 (standard alphabet, padded) too: a key press may be any
//! byte (Ctrl-C is `\x03`, Alt sends ESC prefixes), and a UTF-8 string could not
//! carry a byte sequence that is not UTF-8.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `block_type` of a sealed [`TerminalOutput`] on a device's link.
pub const OUTPUT_BLOCK_TYPE: &str = "terminal_output";
/// The `block_type` of a sealed [`TerminalExit`] on a device's link.
pub const EXIT_BLOCK_TYPE: &str = "terminal_exit";
/// The most bytes one `terminal_input` may carry (decoded); more is refused with
/// `invalid_message`.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// The most bytes one [`TerminalOutput`] carries (decoded).
pub const MAX_OUTPUT_CHUNK: usize = 64 * 1024;
/// The largest `cols` or `rows` accepted; 0 is refused too.
pub const MAX_DIMENSION: u16 = 1000;

/// A terminal, minted by the bridge (`t-` and 32 hex digits).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(transparent)]
pub struct TerminalId(pub String);

impl TerminalId {
    /// The id as it appears on the wire.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id a sealed envelope of this terminal carries in its `session_id` field
    /// (routing, and the name the terminal's keys are derived under).
    pub fn routing_id(&self) -> crate::ids::SessionId {
        crate::ids::SessionId(self.0.clone())
    }
}

impl std::fmt::Display for TerminalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(&self.0)
    }
}

impl From<&str> for TerminalId {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

/// Bytes a terminal's shell wrote (bridge → client).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct TerminalOutput {
    /// The terminal.
    pub terminal_id: TerminalId,
    /// This chunk's number in the terminal's output, from 1, one more per chunk. A
    /// gap after a reattach means the scrollback no longer held the chunks between.
    pub seq: u64,
    /// The bytes, base64 (standard alphabet, padded); at most [`MAX_OUTPUT_CHUNK`]
    /// decoded. A chunk may end inside a UTF-8 character or an escape sequence: feed
    /// the bytes to a terminal emulator in order, as they come.
    pub data: String,
    /// True for scrollback replayed on attach, false for live output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replay: bool,
}

/// Why a terminal ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum TerminalEndReason {
    /// The shell exited (`exit`, Ctrl-D, a crash).
    Exited,
    /// A client sent `terminal_close`.
    Closed,
    /// Nobody attached, typed or resized for the configured idle time.
    Idle,
    /// The bridge is shutting down.
    Shutdown,
}

/// A terminal ended (bridge → every client following it). Its process group was
/// killed; nothing more comes for it, and it can no longer be attached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct TerminalExit {
    /// The terminal.
    pub terminal_id: TerminalId,
    /// Why.
    pub reason: TerminalEndReason,
    /// The shell's exit status, when it exited normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the shell, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The `seq` of the last output chunk (0: none).
    pub last_seq: u64,
}

/// One open terminal, as `list_terminals`, `terminal_open` and `terminal_attach` describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct TerminalListing {
    /// The terminal.
    pub terminal_id: TerminalId,
    /// The directory its shell started in.
    pub cwd: String,
    /// The shell (program path).
    pub shell: String,
    /// Columns of its window.
    pub cols: u16,
    /// Rows of its window.
    pub rows: u16,
    /// When it was opened, Unix seconds.
    #[cfg_attr(test, proptest(strategy = "crate::arb::timestamp()"))]
    pub started_ts: f64,
    /// The `seq` of its latest output chunk (0: none yet).
    pub last_seq: u64,
    /// How many connections follow it now.
    pub attached: u32,
}

/// Checks a window size from a control message: both within 1..=[`MAX_DIMENSION`].
pub fn check_size(cols: u16, rows: u16) -> Result<(), String> {
    for (name, value) in [("cols", cols), ("rows", rows)] {
        if value == 0 || value > MAX_DIMENSION {
            return Err(format!("`{name}` must be between 1 and {MAX_DIMENSION}, found {value}"));
        }
    }
    Ok(())
}

/// Decodes the `data` of a `terminal_input`: base64, at most [`MAX_INPUT_BYTES`].
pub fn decode_input(data: &str) -> Result<Vec<u8>, String> {
    // base64 is 4 characters per 3 bytes: refuse an oversized field before decoding it.
    if data.len() > MAX_INPUT_BYTES.div_ceil(3) * 4 {
        return Err(format!("`data` is over {MAX_INPUT_BYTES} bytes ({} base64 characters)", data.len()));
    }
    let bytes = crate::crypto::from_b64("data", data)
        .map_err(|_| "`data` is not base64 (standard alphabet, padded)".to_owned())?;
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(format!("`data` is over {MAX_INPUT_BYTES} bytes ({} decoded)", bytes.len()));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_base64_and_bounded() {
        assert_eq!(decode_input("AwA=").unwrap(), vec![3, 0]);
        assert!(decode_input("not base64!").unwrap_err().contains("not base64"));
        let huge = crate::crypto::b64(&vec![b'a'; MAX_INPUT_BYTES + 1]);
        assert!(decode_input(&huge).unwrap_err().contains("over"));
        let max = crate::crypto::b64(&vec![b'a'; MAX_INPUT_BYTES]);
        assert_eq!(decode_input(&max).unwrap().len(), MAX_INPUT_BYTES);
    }

    #[test]
    fn window_sizes_outside_the_bounds_are_named() {
        assert!(check_size(80, 24).is_ok());
        assert!(check_size(0, 24).unwrap_err().contains("`cols`"));
        assert!(check_size(80, 1001).unwrap_err().contains("`rows`"));
    }
}
