//! Tracking tool calls so each one goes `running` → `done` | `error` under one id and
//! gets exactly one paired `tool_result` (the turn contract, docs/block-protocol.md).
//!
//! ```
//! use serde_json::json;
//! use terminull_adapter_sdk::tools::ToolCallTracker;
//!
//! let mut tools = ToolCallTracker::new();
//! let running = tools.start("call-1", "Bash", json!({"command": "ls"}), None, None).unwrap();
//! assert_eq!(running.block_type(), "tool_call");
//! let closing = tools.finish("call-1", "Cargo.toml".into(), false).unwrap();
//! assert_eq!(closing.iter().map(|b| b.block_type()).collect::<Vec<_>>(), ["tool_call", "tool_result"]);
//! // At turn end, nothing may stay running:
//! tools.start("call-2", "Read", json!({}), None, None).unwrap();
//! assert_eq!(tools.close_all("turn interrupted").len(), 2);
//! assert!(tools.open_ids().is_empty());
//! ```

use std::collections::HashSet;

use serde_json::Value;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{ToolCall, ToolResult, ToolStatus};
use terminull_protocol::ids::ToolCallId;

/// A misuse of [`ToolCallTracker`]; the tracker's state is unchanged by the failed call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrackerError {
    /// `start` with an id this tracker has already seen (running or finished).
    #[error("tool call {id} was already started")]
    AlreadyStarted {
        /// The repeated id.
        id: ToolCallId,
    },
    /// `finish` with an id that was never started.
    #[error("tool call {id} was never started")]
    Unknown {
        /// The id.
        id: ToolCallId,
    },
    /// `finish` with an id that is already done or error.
    #[error("tool call {id} is already finished")]
    AlreadyFinished {
        /// The id.
        id: ToolCallId,
    },
}

/// The tool calls of a session: which are running, which are finished.
///
/// Ids are remembered for the tracker's life, so an id cannot be reused within a
/// session (a client would replace the old card with the new one). Use one tracker per
/// session, and [`close_all`](Self::close_all) at the end of every turn.
#[derive(Debug, Clone, Default)]
pub struct ToolCallTracker {
    /// Running calls in start order.
    running: Vec<ToolCall>,
    /// Ids that reached `done` or `error`.
    finished: HashSet<ToolCallId>,
}

impl ToolCallTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a new call and returns its `tool_call` block with status `running`.
    pub fn start(
        &mut self,
        id: impl Into<ToolCallId>,
        name: impl Into<String>,
        input: Value,
        parent_id: Option<ToolCallId>,
        title: Option<String>,
    ) -> Result<BlockKind, TrackerError> {
        let id = id.into();
        if self.finished.contains(&id) || self.position(&id).is_some() {
            return Err(TrackerError::AlreadyStarted { id });
        }
        let call = ToolCall { id, name: name.into(), input, status: ToolStatus::Running, parent_id, title };
        self.running.push(call.clone());
        Ok(BlockKind::ToolCall(call))
    }

    /// Closes a running call: returns the `tool_call` re-sent with status `done` (or
    /// `error` when `is_error`), same name, input, parent and title, followed by its
    /// `tool_result`.
    pub fn finish(
        &mut self,
        id: impl Into<ToolCallId>,
        output: String,
        is_error: bool,
    ) -> Result<Vec<BlockKind>, TrackerError> {
        let id = id.into();
        let Some(index) = self.position(&id) else {
            return Err(if self.finished.contains(&id) {
                TrackerError::AlreadyFinished { id }
            } else {
                TrackerError::Unknown { id }
            });
        };
        let call = self.running.remove(index);
        Ok(self.close(call, output, is_error))
    }

    /// [`start`](Self::start) for a mapper: a refused start (the id is running or
    /// finished already) is logged and gives no block.
    pub fn start_lenient(
        &mut self,
        id: impl Into<ToolCallId>,
        name: impl Into<String>,
        input: Value,
        title: Option<String>,
    ) -> Option<BlockKind> {
        self.start(id, name, input, None, title).map_err(|e| tracing::debug!("{e}; ignored")).ok()
    }

    /// [`finish`](Self::finish) for a mapper whose agent may report a tool's end
    /// without its start: a call that is not running is started first (no input),
    /// and a refusal is logged and gives nothing.
    pub fn finish_lenient(
        &mut self,
        id: impl Into<ToolCallId>,
        name: impl Into<String>,
        output: String,
        is_error: bool,
    ) -> Vec<BlockKind> {
        let id = id.into();
        let mut out = Vec::new();
        if !self.is_running(&id)
            && let Ok(block) = self.start(id.clone(), name, Value::Null, None, None)
        {
            out.push(block);
        }
        match self.finish(id, output, is_error) {
            Ok(blocks) => out.extend(blocks),
            Err(e) => tracing::debug!("{e}; ignored"),
        }
        out
    }

    /// Ids of the calls still running, in start order.
    pub fn open_ids(&self) -> Vec<ToolCallId> {
        self.running.iter().map(|c| c.id.clone()).collect()
    }

    /// True while `id` is running.
    pub fn is_running(&self, id: &ToolCallId) -> bool {
        self.position(id).is_some()
    }

    /// The running call with this id, as last sent.
    pub fn get(&self, id: &ToolCallId) -> Option<&ToolCall> {
        self.running.iter().find(|c| &c.id == id)
    }

    /// Closes every running call as failed: for each, the `tool_call` with status
    /// `error` and a `tool_result` with `is_error: true` and `reason` as output. Used at
    /// turn end (interrupt, stop, crash of the agent) so nothing is left running.
    ///
    /// The most recently started call is closed first, so calls nested in a sub-agent
    /// close before the call that encloses them. Empty when nothing is running.
    pub fn close_all(&mut self, reason: &str) -> Vec<BlockKind> {
        let running = std::mem::take(&mut self.running);
        if !running.is_empty() {
            tracing::debug!(count = running.len(), reason, "closing running tool calls");
        }
        running.into_iter().rev().flat_map(|call| self.close(call, reason.to_owned(), true)).collect()
    }

    fn position(&self, id: &ToolCallId) -> Option<usize> {
        self.running.iter().position(|c| &c.id == id)
    }

    fn close(&mut self, mut call: ToolCall, output: String, is_error: bool) -> Vec<BlockKind> {
        call.status = if is_error { ToolStatus::Error } else { ToolStatus::Done };
        self.finished.insert(call.id.clone());
        let result = ToolResult { tool_call_id: call.id.clone(), output, is_error };
        vec![BlockKind::ToolCall(call), BlockKind::ToolResult(result)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(kind: &BlockKind) -> &ToolCall {
        match kind {
            BlockKind::ToolCall(c) => c,
            other => panic!("not a tool_call: {other:?}"),
        }
    }

    fn result(kind: &BlockKind) -> &ToolResult {
        match kind {
            BlockKind::ToolResult(r) => r,
            other => panic!("not a tool_result: {other:?}"),
        }
    }

    #[test]
    fn finish_resends_the_call_with_its_status_then_the_result() {
        let mut t = ToolCallTracker::new();
        let started = t
            .start("c1", "Bash", json!({"command": "cargo test"}), Some("agent-1".into()), Some("Run tests".into()))
            .unwrap();
        assert_eq!(call(&started).status, ToolStatus::Running);
        assert_eq!(t.open_ids(), vec![ToolCallId::from("c1")]);
        assert!(t.is_running(&"c1".into()));

        let closed = t.finish("c1", "ok".into(), false).unwrap();
        assert_eq!(closed.len(), 2);
        let done = call(&closed[0]);
        assert_eq!(
            done,
            &ToolCall {
                id: "c1".into(),
                name: "Bash".into(),
                input: json!({"command": "cargo test"}),
                status: ToolStatus::Done,
                parent_id: Some("agent-1".into()),
                title: Some("Run tests".into()),
            }
        );
        assert_eq!(result(&closed[1]), &ToolResult { tool_call_id: "c1".into(), output: "ok".into(), is_error: false });
        assert!(t.open_ids().is_empty());
    }

    #[test]
    fn a_failed_call_ends_with_status_error() {
        let mut t = ToolCallTracker::new();
        t.start("c1", "Edit", json!({}), None, None).unwrap();
        let closed = t.finish("c1", "permission denied".into(), true).unwrap();
        assert_eq!(call(&closed[0]).status, ToolStatus::Error);
        assert!(result(&closed[1]).is_error);
    }

    #[test]
    fn misuse_is_a_typed_error_and_changes_nothing() {
        let mut t = ToolCallTracker::new();
        assert_eq!(t.finish("nope", String::new(), false), Err(TrackerError::Unknown { id: "nope".into() }));
        t.start("c1", "Read", json!({}), None, None).unwrap();
        assert_eq!(t.start("c1", "Read", json!({}), None, None), Err(TrackerError::AlreadyStarted { id: "c1".into() }));
        assert_eq!(t.open_ids().len(), 1);
        t.finish("c1", String::new(), false).unwrap();
        assert_eq!(t.finish("c1", String::new(), false), Err(TrackerError::AlreadyFinished { id: "c1".into() }));
        assert_eq!(
            t.start("c1", "Read", json!({}), None, None),
            Err(TrackerError::AlreadyStarted { id: "c1".into() }),
            "a finished id cannot be reused"
        );
        assert_eq!(TrackerError::Unknown { id: "x".into() }.to_string(), "tool call x was never started");
    }

    #[test]
    fn close_all_fails_every_running_call_innermost_first() {
        let mut t = ToolCallTracker::new();
        t.start("outer", "Task", json!({"prompt": "p"}), None, Some("Sub-agent".into())).unwrap();
        t.start("inner", "Bash", json!({"command": "sleep 9"}), Some("outer".into()), None).unwrap();
        t.start("done", "Read", json!({}), None, None).unwrap();
        t.finish("done", "text".into(), false).unwrap();

        let blocks = t.close_all("interrupted by the user");
        let types: Vec<_> = blocks.iter().map(BlockKind::block_type).collect();
        assert_eq!(types, ["tool_call", "tool_result", "tool_call", "tool_result"]);
        assert_eq!(call(&blocks[0]).id.as_str(), "inner");
        assert_eq!(call(&blocks[0]).parent_id, Some("outer".into()));
        assert_eq!(call(&blocks[2]).id.as_str(), "outer");
        assert_eq!(call(&blocks[2]).title.as_deref(), Some("Sub-agent"));
        for pair in blocks.chunks(2) {
            assert_eq!(call(&pair[0]).status, ToolStatus::Error);
            let r = result(&pair[1]);
            assert_eq!(r.tool_call_id, call(&pair[0]).id);
            assert_eq!((r.output.as_str(), r.is_error), ("interrupted by the user", true));
        }
        assert!(t.open_ids().is_empty());
        assert!(t.close_all("again").is_empty(), "nothing left to close");
        assert_eq!(t.finish("inner", String::new(), false), Err(TrackerError::AlreadyFinished { id: "inner".into() }));
    }
}
