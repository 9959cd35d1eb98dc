//! Recordings of an adapter's stdio: the format, a recorder that drives an adapter
//! through a fixed script, and a replay harness that checks an adapter still answers the
//! way a recording says. The user's guide is `docs/transcripts.md`, which calls these
//! files *transcripts* (the `terminull adapter record / replay` commands and the golden
//! files under `tests/transcripts/`); in code they are *recordings*, so as not to be
//! confused with a device's transcript of a session (`terminull_client::transcript`).
//!
//! # Format
//!
//! A recording is JSONL: one entry per line, in the order the messages crossed the
//! adapter's stdio. Each entry is an object with `dir` and either `msg` or `raw`:
//!
//! ```text
//! {"dir":"to_adapter","msg":{"id":1,"jsonrpc":"2.0","method":"initialize","params":{…}}}
//! {"dir":"from_adapter","msg":{"id":1,"jsonrpc":"2.0","result":{…}}}
//! {"dir":"from_adapter","raw":"npm WARN something printed to stdout"}
//! ```
//!
//! - `to_adapter`: a message the bridge side wrote to the adapter's stdin (`msg` only).
//! - `from_adapter` with `msg`: one JSON line the adapter wrote to stdout (any JSON
//!   value, normally a JSON-RPC response or notification).
//! - `from_adapter` with `raw`: a stdout line that is not JSON, as text. A line over
//!   the protocol's 8 MiB cap is recorded as `raw` `"<line N too long: B bytes>"`.
//!
//! Blank lines of a recording file are ignored. Blank stdout lines are skipped, as the
//! protocol's framing does.
//!
//! # Normalisation
//!
//! Entries are stored normalised, so that two runs of a deterministic adapter give the
//! same recording ([`Normalizer`]). Both directions go through the same rules:
//!
//! - every `ts`, `server_ts` and `updated_at` whose value is a number becomes `0`;
//! - the `id` of a `text`, `thinking`, `progress`, `bg_task` or `tool_call` block (an
//!   object whose `type` is one of those) and every string under `tool_call_id`,
//!   `parent_id` or `request_id` becomes `<id-1>`, `<id-2>`, … numbered by first
//!   appearance (one numbering for all of them, so a `tool_result` points at the
//!   placeholder of its call);
//! - every string under `agent_session_id` or `resume_session_id` becomes
//!   `<agent-session-1>`, `<agent-session-2>`, … by first appearance;
//! - the session's working directory (a fresh temporary directory, also in its
//!   canonical form) becomes `<cwd>` wherever it occurs inside a string, `raw` lines
//!   included;
//! - in the result of `detect`, `path` becomes `<path>` and `version` becomes `<version>`
//!   when present (they describe the machine, not the adapter);
//! - consecutive `stream` lines that append to one `text` or `thinking` message (each
//!   starting where the one before ends) are stored as one line carrying their joined
//!   text: where a burst of appends is split is timing, not behaviour (the SDK joins a
//!   burst that arrives within 20 ms).
//!
//! JSON-RPC request ids are kept: the script numbers them 1, 2, 3, … Within one message,
//! object keys are visited in sorted order, so the numbering does not depend on the
//! order in which the adapter wrote its keys.
//!
//! # Recording
//!
//! [`record`] runs a fixed, deterministic [`Script`] on one adapter process with a plain
//! line driver (one request at a time, nothing concurrent): `initialize` → `detect` →
//! `list_models` (only when the declaration says `provides_models`) → `start` → `send`
//! and the turn up to its `session_end` block → `get_usage` (only when `provides_usage`)
//! → `stop` → the adapter's exit. Every line both ways is recorded in order.
//!
//! # Replaying
//!
//! [`replay`] starts the adapter afresh with a new temporary directory as the session's
//! `cwd` and walks the recording: a `to_adapter` entry is written (with `<cwd>` and the
//! id placeholders turned back into this run's values), a `from_adapter` entry is
//! compared with the next line the adapter writes, normalised by the same rules with
//! fresh numbering; a run of appends is compared as the text it adds up to, however
//! either side split it. It stops at the first difference and reports it
//! ([`Mismatch`]). After the last entry the adapter must write nothing more and exit.

mod appends;
mod driven;
mod entry;
mod error;
mod normalize;
mod record;
mod replay;

pub use entry::{Direction, Entry, parse_jsonl, to_jsonl};
pub use error::RecordingError;
pub use normalize::{Normalizer, normalize};
pub use record::{Script, record};
pub use replay::{Mismatch, MismatchKind, ReplayOptions, ReplayReport, replay, replay_with};

/// The environment variable that tells the golden-recording tests to re-record the
/// files under `tests/transcripts/` instead of checking them (`TERMINULL_UPDATE_TRANSCRIPTS=1`).
pub const UPDATE_ENV: &str = "TERMINULL_UPDATE_TRANSCRIPTS";

/// The placeholder for the session's working directory.
pub const CWD_PLACEHOLDER: &str = "<cwd>";
