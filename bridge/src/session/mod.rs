//! Sessions: one actor task per session that owns its adapter process and its
//! history, and enforces the turn contract whatever the adapter does.
//!
//! Turn state: idle → running → awaiting_permission → running → idle. The actor:
//! - appends every block to the session's history (which assigns `seq`) and
//!   broadcasts it to the clients following the session, streamed text as appends
//!   with bursts joined (`appends`);
//! - checks each block against the shared [`TurnTracker`](terminull_protocol::turn::TurnTracker): a block that breaks the
//!   contract is logged and dropped; what the adapter leaves open when its own
//!   `session_end` arrives is closed first;
//! - when the adapter crashes, exits, or goes silent past the liveness deadline in a
//!   turn, closes the turn with an `error` block and a `session_end` (reason `error`),
//!   and restarts the adapter on the next message, resuming with the agent's own
//!   session id — unless the crash budget is spent;
//! - queues messages sent during a turn when the adapter lacks
//!   `cap_input_during_turn` and delivers them in order after `session_end`;
//! - never becomes a second writer to a conversation a terminal drives
//!   (docs/session-handoff.md): for an agent with the handoff hooks, a message is
//!   delivered only after `is_cwd_externally_owned` says no native process drives the
//!   directory; otherwise the session is *parked*: messages queue, a `session_state`
//!   block tells the app, the terminal's transcript is mirrored read-only, and once the
//!   terminal is idle the lineage head is re-resolved and the queue drained in order.
//!
//! # Files
//!
//! - [`policy`]: the limits and the pure decisions (restart, attach); unit-tested.
//! - [`handle`]: the commands a session takes and the handle that sends them.
//! - [`notices`]: the push [`Notice`](notices::Notice) a session sends: which blocks
//!   become one, and its wording.
//! - `actor`: the actor's state and core (publish, start/stop the adapter, deliver).
//! - `appends`: streamed text made appends, a burst joined into one.
//! - `hooks`, `mirror`, `handoff`: the terminal handoff on top of the core.
//! - `turn`: the turn contract (messages, adapter events).
//! - `revive`: a session revived after a bridge restart closes the turn its log left
//!   open (`session_end` reason `error`, "the bridge stopped").
//! - [`list_entry`]: what a session list shows (title, preview, activity, attention) and
//!   the edits `rename_session` and `archive_session` make; `listing`: the actor keeping it.
//! - `run`: starting an actor and its loop.

mod actor;
mod appends;
mod compact;
pub mod handle;
mod handoff;
mod hooks;
pub mod list_entry;
mod listing;
mod mirror;
pub mod notices;
mod options;
pub mod policy;
mod revive;
mod run;
mod turn;

pub use actor::SessionSpec;
pub use handle::{
    Following, HISTORY_PAGE_BYTES, LIVE_INLINE_BYTES, LiveBlock, OLDER_HISTORY_CAP, SessionCommand, SessionHandle,
};
pub use policy::{AttachDecision, MAX_QUEUED_MESSAGES, SessionPolicy, attach_decision, may_restart};
pub use run::spawn_session;
