//! A session revived from history after a bridge restart: a turn its log left open
//! (the bridge was killed mid-turn, so no `session_end` was ever written) is closed
//! before anyone follows the session, through the normal publishing path, so every
//! device sees it end.

use terminull_protocol::blocks::{Block, BlockKind, EndReason, MIRRORED_META};
use terminull_protocol::turn::TurnTracker;

use super::actor::Actor;

/// The message of the `error` block and the `session_end` that close a turn the bridge
/// was stopped in the middle of.
pub const BRIDGE_STOPPED: &str = "the bridge stopped";

/// Blocks read from the end of the log at first to find the last `session_end`; the
/// window grows eightfold until one is found or the whole log is read.
const FIRST_WINDOW: u64 = 256;

impl Actor {
    /// Closes the turn the log left open, if any: `done: true` for every open text,
    /// `error` for every running tool call (with its `tool_result`), then an `error`
    /// block and `session_end` (reason `error`, message [`BRIDGE_STOPPED`]).
    pub(super) fn close_interrupted_turn(&mut self) {
        let tail = match self.tail_after_last_end() {
            Ok(tail) => tail,
            Err(e) => {
                tracing::warn!(session = %self.spec.meta.session_id, "cannot read history to close an interrupted turn: {e}");
                return;
            }
        };
        let Some(tracker) = interrupted_turn(&tail, self.pending.queued.len()) else { return };
        tracing::info!(session = %self.spec.meta.session_id, "closing the turn the bridge was stopped in");
        // The closing chunks continue the texts devices already hold.
        for block in tail.iter().filter(|b| matches!(b.kind, BlockKind::Text(_) | BlockKind::Thinking(_))) {
            if !is_mirrored(block) {
                self.appends.prime(block);
            }
        }
        self.turn = Some(tracker);
        self.end_turn(EndReason::Error, Some(BRIDGE_STOPPED));
    }

    /// The blocks after the log's last `session_end` (all of them when there is none).
    fn tail_after_last_end(&self) -> crate::history::Result<Vec<Block>> {
        let last = self.log.last_seq();
        let mut window = FIRST_WINDOW;
        loop {
            let after = last.saturating_sub(window);
            let mut blocks = self.log.read_since_seq(after)?;
            if let Some(end) = blocks.iter().rposition(|b| matches!(b.kind, BlockKind::SessionEnd(_))) {
                return Ok(blocks.split_off(end + 1));
            }
            if after == 0 {
                return Ok(blocks);
            }
            window = window.saturating_mul(8);
        }
    }
}

/// Whether the blocks after a log's last `session_end` hold an open turn, and if so
/// the tracker that closes it. `queued` is how many of the `user_message` blocks there
/// were queued and never delivered (they open no turn; they are delivered after the
/// revival). A turn is open when a message was delivered (more messages than queued),
/// or something streamed is still open. The terminal's mirrored turns are not ours.
pub(super) fn interrupted_turn(tail: &[Block], queued: usize) -> Option<TurnTracker> {
    let mut tracker = TurnTracker::new();
    let mut messages = 0usize;
    let mut turn_content = false;
    for block in tail {
        if is_mirrored(block) {
            continue;
        }
        match &block.kind {
            BlockKind::UserMessage(_) => messages += 1,
            BlockKind::Text(_)
            | BlockKind::Thinking(_)
            | BlockKind::ToolCall(_)
            | BlockKind::ToolResult(_)
            | BlockKind::PermissionRequest(_) => turn_content = true,
            _ => {}
        }
        // A compacted replay may not satisfy every rule; what it breaks is not tracked.
        let _ = tracker.observe(&block.kind);
    }
    let open = messages > queued || turn_content || !tracker.open_violations().is_empty();
    open.then_some(tracker)
}

fn is_mirrored(block: &Block) -> bool {
    block.meta.as_ref().is_some_and(|m| m.get(MIRRORED_META) == Some(&serde_json::Value::Bool(true)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::blocks::{SessionEnd, StreamedText, UserMessage, now_ts};

    fn block(kind: BlockKind) -> Block {
        Block { seq: None, ts: now_ts(), meta: None, kind }
    }

    fn message(text: &str) -> Block {
        block(BlockKind::UserMessage(UserMessage { text: text.into(), attachments: Vec::new() }))
    }

    fn text(id: &str, done: bool) -> Block {
        block(BlockKind::Text(StreamedText { id: id.into(), text: "partial".into(), done, offset: None }))
    }

    #[test]
    fn a_delivered_message_without_session_end_is_an_open_turn_closed_with_done_chunks() {
        let tail = [message("hi"), text("t1", false)];
        let mut tracker = interrupted_turn(&tail, 0).expect("open turn");
        let closing = tracker.close(EndReason::Error, Some(BRIDGE_STOPPED));
        assert!(matches!(&closing[0], BlockKind::Text(t) if t.done && t.id.as_str() == "t1"), "{closing:?}");
        assert!(matches!(
            closing.last(),
            Some(BlockKind::SessionEnd(SessionEnd { reason: EndReason::Error, message: Some(m), .. })) if m == BRIDGE_STOPPED
        ));
        assert!(interrupted_turn(&[message("hi")], 0).is_some(), "a message delivered, nothing streamed yet");
    }

    #[test]
    fn queued_messages_and_informational_blocks_open_no_turn() {
        assert!(interrupted_turn(&[], 0).is_none());
        assert!(interrupted_turn(&[message("queued while parked")], 1).is_none());
        let mut mirrored = text("m1", false);
        mirrored.meta = Some([(MIRRORED_META.to_owned(), true.into())].into_iter().collect());
        assert!(interrupted_turn(&[mirrored], 0).is_none(), "the terminal's turn is not ours");
        // One delivered, one queued behind it: the delivered one's turn is open.
        assert!(interrupted_turn(&[message("a"), text("t", true), message("b")], 1).is_some());
    }
}
