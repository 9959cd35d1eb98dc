//! The turn contract, as one state machine that every party shares: the SDK closes
//! what an adapter left open, the conformance checker reports violations, and the
//! bridge enforces the contract whatever the adapter does.
//!
//! The contract (docs/block-protocol.md): a turn ends with exactly one `session_end`
//! and nothing after it; every `text`/`thinking` id ends with exactly one `done=true`
//! chunk and no chunk after it; every `tool_call` goes `running` → `done` | `error`
//! and has exactly one paired `tool_result`.

use std::collections::BTreeMap;

use crate::blocks::{BlockKind, EndReason, ErrorBlock, SessionEnd, StreamedText, ToolCall, ToolResult, ToolStatus};
use crate::ids::{BlockId, ToolCallId};

/// One breach of the turn contract, naming the block at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TurnViolation {
    /// A chunk arrived for a text/thinking id that was already `done=true`.
    #[error("{block_type} `{id}` got a chunk after its done=true chunk")]
    ChunkAfterDone {
        /// `text` or `thinking`.
        block_type: &'static str,
        /// The id.
        id: BlockId,
    },
    /// The turn ended with a text/thinking id never closed by `done=true`.
    #[error("{block_type} `{id}` never got its done=true chunk")]
    NeverDone {
        /// `text` or `thinking`.
        block_type: &'static str,
        /// The id.
        id: BlockId,
    },
    /// The turn ended with a tool call still `running`.
    #[error("tool_call `{id}` was left running")]
    ToolCallLeftRunning {
        /// The call.
        id: ToolCallId,
    },
    /// The turn ended with a finished tool call that has no `tool_result`.
    #[error("tool_call `{id}` has no tool_result")]
    ToolCallWithoutResult {
        /// The call.
        id: ToolCallId,
    },
    /// A `tool_result` names a call that was never announced.
    #[error("tool_result for unknown tool_call `{id}`")]
    ResultForUnknownCall {
        /// The id it names.
        id: ToolCallId,
    },
    /// A second `tool_result` for the same call.
    #[error("tool_call `{id}` got a second tool_result")]
    DuplicateResult {
        /// The call.
        id: ToolCallId,
    },
    /// A finished tool call changed status again (e.g. `done` → `running`).
    #[error("tool_call `{id}` changed status after it finished")]
    StatusAfterFinish {
        /// The call.
        id: ToolCallId,
    },
    /// A block arrived after the turn's `session_end`.
    #[error("a `{block_type}` block arrived after session_end")]
    AfterSessionEnd {
        /// The late block's type.
        block_type: &'static str,
    },
    /// The turn ended without a `session_end`.
    #[error("the turn ended without a session_end")]
    NoSessionEnd,
    /// An append that does not start where its message ends.
    #[error("{block_type} `{id}`: an append at offset {offset}, but the text so far is {expected} bytes")]
    AppendOutOfPlace {
        /// `text` or `thinking`.
        block_type: &'static str,
        /// The id.
        id: BlockId,
        /// The append's `offset`.
        offset: u64,
        /// The message's length so far.
        expected: u64,
    },
}

#[derive(Debug, Clone)]
struct OpenText {
    block_type: &'static str,
    /// The latest chunk: its `end()` is where the next append starts.
    last: StreamedText,
}

#[derive(Debug, Clone)]
struct CallState {
    call: ToolCall,
    has_result: bool,
}

/// Follows the blocks of one turn.
#[derive(Debug, Clone, Default)]
pub struct TurnTracker {
    /// Text/thinking ids keyed by (type, id) with their latest chunk; `None` once done.
    texts: BTreeMap<(&'static str, BlockId), Option<OpenText>>,
    calls: BTreeMap<ToolCallId, CallState>,
    /// Order in which calls started, so closing goes innermost (latest) first.
    call_order: Vec<ToolCallId>,
    ended: bool,
}

impl TurnTracker {
    /// A tracker for a new turn.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once a `session_end` was seen.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Records one block and returns what it breaks, if anything. A block that breaks
    /// the contract is not recorded: the tracker is left as it was.
    pub fn observe(&mut self, block: &BlockKind) -> Option<TurnViolation> {
        if self.ended {
            return Some(TurnViolation::AfterSessionEnd { block_type: block.block_type() });
        }
        match block {
            BlockKind::Text(t) | BlockKind::Thinking(t) => {
                let key = (block.block_type(), t.id.clone());
                match (self.texts.get(&key), t.offset) {
                    (Some(None), _) => return Some(TurnViolation::ChunkAfterDone { block_type: key.0, id: key.1 }),
                    (open, Some(offset)) if offset != open.and_then(Option::as_ref).map_or(0, |o| o.last.end()) => {
                        let expected = open.and_then(Option::as_ref).map_or(0, |o| o.last.end());
                        return Some(TurnViolation::AppendOutOfPlace {
                            block_type: key.0,
                            id: key.1,
                            offset,
                            expected,
                        });
                    }
                    _ => {
                        let state = (!t.done).then(|| OpenText { block_type: key.0, last: t.clone() });
                        self.texts.insert(key, state);
                    }
                }
            }
            BlockKind::ToolCall(call) => match self.calls.get_mut(&call.id) {
                Some(state) if state.call.status != ToolStatus::Running => {
                    return Some(TurnViolation::StatusAfterFinish { id: call.id.clone() });
                }
                Some(state) => state.call = call.clone(),
                None => {
                    self.call_order.push(call.id.clone());
                    self.calls.insert(call.id.clone(), CallState { call: call.clone(), has_result: false });
                }
            },
            BlockKind::ToolResult(result) => match self.calls.get_mut(&result.tool_call_id) {
                None => return Some(TurnViolation::ResultForUnknownCall { id: result.tool_call_id.clone() }),
                Some(state) if state.has_result => {
                    return Some(TurnViolation::DuplicateResult { id: result.tool_call_id.clone() });
                }
                Some(state) => state.has_result = true,
            },
            BlockKind::SessionEnd(_) => self.ended = true,
            _ => {}
        }
        None
    }

    /// What is still open: every violation the turn would have if it ended now
    /// (without counting a missing `session_end`).
    pub fn open_violations(&self) -> Vec<TurnViolation> {
        let mut out = Vec::new();
        for ((block_type, id), state) in &self.texts {
            if state.is_some() {
                out.push(TurnViolation::NeverDone { block_type, id: id.clone() });
            }
        }
        for id in &self.call_order {
            let state = &self.calls[id];
            if state.call.status == ToolStatus::Running {
                out.push(TurnViolation::ToolCallLeftRunning { id: id.clone() });
            } else if !state.has_result {
                out.push(TurnViolation::ToolCallWithoutResult { id: id.clone() });
            }
        }
        out
    }

    /// Every violation of a turn that ended here.
    pub fn end_violations(&self) -> Vec<TurnViolation> {
        let mut out = self.open_violations();
        if !self.ended {
            out.push(TurnViolation::NoSessionEnd);
        }
        out
    }

    /// The blocks that close everything still open, without ending the turn: a
    /// `done=true` chunk for each open text, each running call as `error` (innermost
    /// first) with a `tool_result` saying `why`, and a result for each finished call
    /// that lacks one. Used when an adapter's own `session_end` arrives too early.
    pub fn close_open(&mut self, why: &str) -> Vec<BlockKind> {
        let mut out = Vec::new();
        let open: Vec<_> = self.texts.values().filter_map(Option::clone).collect();
        for text in open {
            // Closed in the form it was streamed in: an empty append where the text
            // ends, or the last snapshot again.
            let last = text.last;
            let chunk = match last.offset {
                Some(_) => StreamedText::append(last.id.clone(), last.end(), "", true),
                None => StreamedText { done: true, ..last },
            };
            out.push(if text.block_type == "thinking" { BlockKind::Thinking(chunk) } else { BlockKind::Text(chunk) });
        }
        for id in self.call_order.iter().rev() {
            let state = &self.calls[id];
            if state.call.status == ToolStatus::Running {
                out.push(BlockKind::ToolCall(ToolCall { status: ToolStatus::Error, ..state.call.clone() }));
            }
            if !state.has_result {
                let is_error = state.call.status != ToolStatus::Done;
                let output = if is_error { why.to_owned() } else { String::new() };
                out.push(BlockKind::ToolResult(ToolResult { tool_call_id: id.clone(), output, is_error }));
            }
        }
        for block in &out {
            let _ = self.observe(block);
        }
        out
    }

    /// [`close_open`](Self::close_open), then — unless the turn already ended — an
    /// `error` block (when `error` is given) and a `session_end` with `reason`. Feeding
    /// the blocks back through [`observe`](Self::observe) yields no violation.
    pub fn close(&mut self, reason: EndReason, error: Option<&str>) -> Vec<BlockKind> {
        let why = error.unwrap_or(match reason {
            EndReason::Interrupted => "interrupted",
            EndReason::Stopped => "the session was stopped",
            _ => "the turn ended before the tool call finished",
        });
        let mut out = self.close_open(why);
        if !self.ended {
            let mut ending = Vec::new();
            if let Some(message) = error {
                ending.push(BlockKind::Error(ErrorBlock {
                    message: message.to_owned(),
                    recoverable: true,
                    code: None,
                }));
            }
            ending.push(BlockKind::SessionEnd(SessionEnd { reason, usage: None, message: error.map(str::to_owned) }));
            for block in &ending {
                let _ = self.observe(block);
            }
            out.extend(ending);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(id: &str, t: &str, done: bool) -> BlockKind {
        BlockKind::Text(StreamedText::snapshot(id, t, done))
    }

    fn call(id: &str, status: ToolStatus) -> BlockKind {
        BlockKind::ToolCall(ToolCall {
            id: id.into(),
            name: "Bash".into(),
            input: json!({"command": "ls"}),
            status,
            parent_id: None,
            title: None,
        })
    }

    fn result(id: &str) -> BlockKind {
        BlockKind::ToolResult(ToolResult { tool_call_id: id.into(), output: "ok".into(), is_error: false })
    }

    fn end() -> BlockKind {
        BlockKind::SessionEnd(SessionEnd { reason: EndReason::Completed, usage: None, message: None })
    }

    fn run(blocks: &[BlockKind]) -> Vec<TurnViolation> {
        let mut t = TurnTracker::new();
        let mut v: Vec<_> = blocks.iter().filter_map(|b| t.observe(b)).collect();
        v.extend(t.end_violations());
        v
    }

    #[test]
    fn a_well_formed_turn_has_no_violation() {
        let blocks = [
            text("m", "a", false),
            call("t", ToolStatus::Running),
            call("t", ToolStatus::Done),
            result("t"),
            text("m", "ab", true),
            end(),
        ];
        assert_eq!(run(&blocks), vec![]);
    }

    #[test]
    fn each_breach_is_named() {
        let cases: Vec<(Vec<BlockKind>, TurnViolation)> = vec![
            (
                vec![text("m", "a", true), text("m", "ab", false), end()],
                TurnViolation::ChunkAfterDone { block_type: "text", id: "m".into() },
            ),
            (
                vec![text("m1", "a", false), text("m2", "ab", true), end()],
                TurnViolation::NeverDone { block_type: "text", id: "m1".into() },
            ),
            (vec![call("t", ToolStatus::Running), end()], TurnViolation::ToolCallLeftRunning { id: "t".into() }),
            (vec![call("t", ToolStatus::Done), end()], TurnViolation::ToolCallWithoutResult { id: "t".into() }),
            (vec![result("x"), end()], TurnViolation::ResultForUnknownCall { id: "x".into() }),
            (
                vec![call("t", ToolStatus::Done), result("t"), result("t"), end()],
                TurnViolation::DuplicateResult { id: "t".into() },
            ),
            (
                vec![call("t", ToolStatus::Done), call("t", ToolStatus::Running), result("t"), end()],
                TurnViolation::StatusAfterFinish { id: "t".into() },
            ),
            (vec![end(), text("m", "late", true)], TurnViolation::AfterSessionEnd { block_type: "text" }),
            (vec![text("m", "a", true)], TurnViolation::NoSessionEnd),
            (
                vec![
                    BlockKind::Text(StreamedText::append("m", 0, "ab", false)),
                    BlockKind::Text(StreamedText::append("m", 3, "d", true)),
                    BlockKind::Text(StreamedText::append("m", 2, "c", true)),
                    end(),
                ],
                TurnViolation::AppendOutOfPlace { block_type: "text", id: "m".into(), offset: 3, expected: 2 },
            ),
        ];
        for (blocks, want) in cases {
            assert_eq!(run(&blocks), vec![want.clone()], "{want}");
        }
    }

    #[test]
    fn a_message_streamed_as_appends_is_closed_by_an_empty_append_where_it_ends() {
        let mut t = TurnTracker::new();
        assert_eq!(t.observe(&BlockKind::Thinking(StreamedText::append("r", 0, "hmm, ", false))), None);
        assert_eq!(t.observe(&BlockKind::Thinking(StreamedText::append("r", 5, "ok", false))), None);
        assert_eq!(t.close_open("stopped")[0], BlockKind::Thinking(StreamedText::append("r", 7, "", true)));
    }

    #[test]
    fn closing_repairs_everything_and_ends_the_turn_once() {
        let mut t = TurnTracker::new();
        for b in [
            text("m", "partial", false),
            call("outer", ToolStatus::Running),
            call("inner", ToolStatus::Running),
            call("d", ToolStatus::Done),
        ] {
            assert_eq!(t.observe(&b), None);
        }
        let closing = t.close(EndReason::Error, Some("adapter crashed"));
        assert!(t.end_violations().is_empty(), "{:?}", t.end_violations());
        let types: Vec<_> = closing.iter().map(BlockKind::block_type).collect();
        assert_eq!(
            types,
            ["text", "tool_result", "tool_call", "tool_result", "tool_call", "tool_result", "error", "session_end"]
        );
        // The open message is closed in the form it was streamed in.
        assert_eq!(closing[0], text("m", "partial", true));
        // Nothing more to close, and no second session_end.
        assert_eq!(t.close(EndReason::Error, None), vec![]);
    }

    #[test]
    fn a_refused_block_leaves_the_tracker_unchanged() {
        let mut tracker = TurnTracker::new();
        for b in [text("m", "a", false), text("m", "ab", true), call("c", ToolStatus::Done), result("c")] {
            assert_eq!(tracker.observe(&b), None);
        }
        let before = format!("{tracker:?}");
        let refused = [text("m", "abc", false), call("c", ToolStatus::Running), result("c"), result("nope")];
        for b in &refused {
            assert!(tracker.observe(b).is_some(), "{b:?} should be refused");
            assert_eq!(format!("{tracker:?}"), before, "refusing {b:?} changed the tracker");
        }
        assert_eq!(tracker.observe(&end()), None);
        let ended = format!("{tracker:?}");
        assert!(tracker.observe(&text("n", "late", false)).is_some());
        assert_eq!(format!("{tracker:?}"), ended);
    }
}
