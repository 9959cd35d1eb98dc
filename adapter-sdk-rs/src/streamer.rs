//! Streaming `text` and `thinking` blocks by the protocol's rule: every chunk holds the
//! full text so far under one stable id, and exactly one `done: true` chunk closes it.
//!
//! ```
//! use terminull_adapter_sdk::streamer::{TextStreamer, mint_id};
//! use terminull_protocol::BlockKind;
//!
//! let mut s = TextStreamer::new_text(mint_id("msg"));
//! let BlockKind::Text(chunk) = s.push("Hello") else { unreachable!() };
//! assert_eq!((chunk.text.as_str(), chunk.done), ("Hello", false));
//! let BlockKind::Text(chunk) = s.push(", world") else { unreachable!() };
//! assert_eq!(chunk.text, "Hello, world");
//! let BlockKind::Text(last) = s.finish().unwrap() else { unreachable!() };
//! assert_eq!((last.text.as_str(), last.done), ("Hello, world", true));
//! assert!(s.finish().is_none());
//! ```

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use terminull_protocol::BlockKind;
use terminull_protocol::blocks::StreamedText;
use terminull_protocol::ids::BlockId;

/// Which block type a [`TextStreamer`] produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// `text` blocks: assistant prose.
    Text,
    /// `thinking` blocks: the model's reasoning.
    Thinking,
}

/// Why [`TextStreamer::try_push`] refused a delta.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamerError {
    /// The id was already closed by its `done: true` chunk; no chunk may follow it.
    #[error("streamed block {id} is already finished")]
    Finished {
        /// The streamer's id.
        id: BlockId,
    },
}

/// Accumulates one streamed `text` or `thinking` message and produces its chunks.
///
/// Every chunk carries the full text so far (never a delta) under the same id, with
/// `done: false`; [`finish`](Self::finish) produces the single `done: true` chunk.
#[derive(Debug, Clone)]
pub struct TextStreamer {
    id: BlockId,
    kind: StreamKind,
    text: String,
    finished: bool,
}

impl TextStreamer {
    /// A streamer of `text` blocks under `id`.
    pub fn new_text(id: impl Into<BlockId>) -> Self {
        Self::new(StreamKind::Text, id)
    }

    /// A streamer of `thinking` blocks under `id`.
    pub fn new_thinking(id: impl Into<BlockId>) -> Self {
        Self::new(StreamKind::Thinking, id)
    }

    /// A streamer of the given kind under `id`.
    pub fn new(kind: StreamKind, id: impl Into<BlockId>) -> Self {
        Self { id: id.into(), kind, text: String::new(), finished: false }
    }

    /// Appends `delta` and returns the chunk to stream: the full text so far, `done: false`.
    ///
    /// After [`finish`](Self::finish) no chunk may follow, so a late delta is dropped
    /// (logged as a warning) and the closing `done: true` chunk is returned again
    /// unchanged; a client that sees it replaces the message with identical content.
    /// Use [`try_push`](Self::try_push) to treat a late delta as an error instead.
    pub fn push(&mut self, delta: &str) -> BlockKind {
        match self.try_push(delta) {
            Ok(kind) => kind,
            Err(_) => {
                tracing::warn!(id = %self.id, "delta pushed after the streamed block was finished; dropped");
                self.chunk(true)
            }
        }
    }

    /// Like [`push`](Self::push), but refuses a delta that arrives after `finish`.
    pub fn try_push(&mut self, delta: &str) -> Result<BlockKind, StreamerError> {
        if self.finished {
            return Err(StreamerError::Finished { id: self.id.clone() });
        }
        self.text.push_str(delta);
        Ok(self.chunk(false))
    }

    /// Replaces the whole text (for agents that report snapshots rather than deltas) and
    /// returns the `done: false` chunk; refused after `finish` like [`try_push`](Self::try_push).
    pub fn replace(&mut self, full_text: impl Into<String>) -> Result<BlockKind, StreamerError> {
        if self.finished {
            return Err(StreamerError::Finished { id: self.id.clone() });
        }
        self.text = full_text.into();
        Ok(self.chunk(false))
    }

    /// Closes the id: returns the one `done: true` chunk carrying the full text, or `None`
    /// when it was already returned. Finishing a streamer that never got a delta yields a
    /// `done: true` chunk with empty text; check [`text`](Self::text) first to skip it.
    pub fn finish(&mut self) -> Option<BlockKind> {
        if self.finished {
            return None;
        }
        self.finished = true;
        Some(self.chunk(true))
    }

    /// The full text so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The stable id of every chunk.
    pub fn id(&self) -> &BlockId {
        &self.id
    }

    /// `text` or `thinking`.
    pub fn kind(&self) -> StreamKind {
        self.kind
    }

    /// True once the `done: true` chunk was returned.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn chunk(&self, done: bool) -> BlockKind {
        let body = StreamedText::snapshot(self.id.clone(), self.text.clone(), done);
        match self.kind {
            StreamKind::Text => BlockKind::Text(body),
            StreamKind::Thinking => BlockKind::Thinking(body),
        }
    }
}

/// Mints an id unique within this process and, with high probability, across
/// processes: `<prefix>-<nonce>-<n>`, where `nonce` is fixed per process (derived from
/// the start time and pid) and `n` counts up from 1.
///
/// The nonce matters because one terminull session can outlive one adapter process (a
/// restart resumes the agent's conversation), and a repeated id would make clients
/// replace an old message with a new one. Use it for block ids and for tool-call ids an
/// agent does not supply; convert with `BlockId::from` / `ToolCallId::from`.
pub fn mint_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", process_nonce())
}

fn process_nonce() -> &'static str {
    static NONCE: OnceLock<String> = OnceLock::new();
    NONCE.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        // Mix in the pid so two processes started in the same tick still differ.
        let mixed = nanos ^ (u64::from(std::process::id())).rotate_left(40);
        format!("{:08x}", (mixed ^ (mixed >> 32)) as u32)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(kind: &BlockKind) -> &StreamedText {
        match kind {
            BlockKind::Text(b) | BlockKind::Thinking(b) => b,
            other => panic!("not a streamed block: {other:?}"),
        }
    }

    #[test]
    fn chunks_carry_the_full_text_and_exactly_one_done() {
        let mut s = TextStreamer::new_text("m1");
        let mut chunks = vec![s.push("Run"), s.push("ning "), s.push(""), s.push("tests")];
        chunks.extend(s.finish());
        assert!(s.finish().is_none(), "a second finish yields nothing");
        assert!(chunks.iter().all(|c| c.block_type() == "text"));
        let texts: Vec<_> = chunks.iter().map(|c| body(c).text.as_str()).collect();
        assert_eq!(texts, ["Run", "Running ", "Running ", "Running tests", "Running tests"]);
        let dones: Vec<_> = chunks.iter().map(|c| body(c).done).collect();
        assert_eq!(dones, [false, false, false, false, true]);
        assert!(chunks.iter().all(|c| body(c).id.as_str() == "m1"));
        assert!(s.is_finished());
        assert_eq!(s.text(), "Running tests");
    }

    #[test]
    fn thinking_streamer_produces_thinking_blocks() {
        let mut s = TextStreamer::new_thinking("t1");
        assert_eq!(s.kind(), StreamKind::Thinking);
        assert_eq!(s.push("hmm").block_type(), "thinking");
        let last = s.finish().unwrap();
        assert_eq!(last, BlockKind::Thinking(StreamedText::snapshot("t1", "hmm", true)));
    }

    #[test]
    fn finishing_an_empty_streamer_closes_it_with_empty_text() {
        let mut s = TextStreamer::new_text("e");
        assert_eq!(body(&s.finish().unwrap()), &StreamedText::snapshot("e", String::new(), true));
    }

    #[test]
    fn late_deltas_never_reopen_a_finished_id() {
        let mut s = TextStreamer::new_text("m");
        s.push("final");
        s.finish().unwrap();
        assert_eq!(s.try_push("x"), Err(StreamerError::Finished { id: "m".into() }));
        assert!(s.replace("y").is_err());
        let again = s.push("late");
        assert_eq!(body(&again), &StreamedText::snapshot("m", "final", true));
        assert_eq!(s.text(), "final");
    }

    #[test]
    fn replace_sets_the_whole_text() {
        let mut s = TextStreamer::new_text("r");
        s.push("draft");
        assert_eq!(body(&s.replace("snapshot").unwrap()).text, "snapshot");
        assert_eq!(body(&s.push("!")).text, "snapshot!");
    }

    #[test]
    fn minted_ids_are_distinct_and_carry_the_prefix() {
        let ids: Vec<_> = (0..100).map(|_| mint_id("msg")).collect();
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        assert!(ids.iter().all(|id| id.starts_with("msg-")), "{ids:?}");
    }
}
