//! Streaming `text` and `thinking` blocks as appends: each chunk carries only the new
//! text and the UTF-8 byte offset it starts at, under one stable id, and exactly one
//! `done: true` chunk closes it (docs/block-protocol.md has the full rule).
//!
//! An append costs the bytes it adds, so every delta an agent reports can be streamed
//! as it comes, however long the answer: no throttle is needed to bound the cost.
//! Adapters that stream appends declare adapter protocol version 2.
//!
//! ```
//! use terminull_adapter_sdk::streamer::{TextStreamer, mint_id};
//! use terminull_protocol::BlockKind;
//!
//! let mut s = TextStreamer::new_text(mint_id("msg"));
//! let BlockKind::Text(chunk) = s.push("Hello") else { unreachable!() };
//! assert_eq!((chunk.offset, chunk.text.as_str(), chunk.done), (Some(0), "Hello", false));
//! let BlockKind::Text(chunk) = s.push(", world") else { unreachable!() };
//! assert_eq!((chunk.offset, chunk.text.as_str()), (Some(5), ", world"));
//! let BlockKind::Text(last) = s.finish().unwrap() else { unreachable!() };
//! assert_eq!((last.offset, last.text.as_str(), last.done), (Some(12), "", true));
//! assert_eq!(s.text(), "Hello, world");
//! assert!(s.finish().is_none());
//! ```

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use terminull_protocol::BlockKind;
use terminull_protocol::blocks::StreamedText;
use terminull_protocol::ids::BlockId;
use terminull_protocol::streamed::merge;

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
/// [`push`](Self::push) gives an append of the delta alone; [`replace`](Self::replace)
/// a snapshot of the whole text (for a rewrite); [`update`](Self::update) whichever of
/// the two a new full text needs; [`finish`](Self::finish) the single `done: true`
/// chunk, in the form the message was last streamed in.
#[derive(Debug, Clone)]
pub struct TextStreamer {
    id: BlockId,
    kind: StreamKind,
    text: String,
    /// True when the last chunk returned was a snapshot, so the closing chunk is one too.
    snapshots: bool,
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
        Self { id: id.into(), kind, text: String::new(), snapshots: false, finished: false }
    }

    /// Appends `delta` and returns the chunk to stream: an append of `delta` at the
    /// offset where the text ended, `done: false`.
    ///
    /// After [`finish`](Self::finish) no chunk may follow, so a late delta is dropped
    /// (logged as a warning) and the closing `done: true` chunk is returned again
    /// unchanged, which a receiver takes as a repeat.
    /// Use [`try_push`](Self::try_push) to treat a late delta as an error instead.
    pub fn push(&mut self, delta: &str) -> BlockKind {
        match self.try_push(delta) {
            Ok(kind) => kind,
            Err(_) => {
                tracing::warn!(id = %self.id, "delta pushed after the streamed block was finished; dropped");
                self.closing()
            }
        }
    }

    /// Like [`push`](Self::push), but refuses a delta that arrives after `finish`.
    pub fn try_push(&mut self, delta: &str) -> Result<BlockKind, StreamerError> {
        self.refuse_if_finished()?;
        let offset = self.len();
        self.text.push_str(delta);
        self.snapshots = false;
        Ok(self.wrap(StreamedText::append(self.id.clone(), offset, delta, false)))
    }

    /// Replaces the whole text (an agent rewrote its message) and returns a snapshot
    /// chunk of it, `done: false`; refused after `finish` like [`try_push`](Self::try_push).
    pub fn replace(&mut self, full_text: impl Into<String>) -> Result<BlockKind, StreamerError> {
        self.refuse_if_finished()?;
        self.text = full_text.into();
        self.snapshots = true;
        Ok(self.wrap(StreamedText::snapshot(self.id.clone(), self.text.clone(), false)))
    }

    /// Takes the whole text so far from an agent that reports snapshots: an append of
    /// what it adds when it extends the text held (the usual case), a snapshot when it
    /// rewrites it, `None` when nothing changed. Refused after `finish`.
    pub fn update(&mut self, full_text: &str) -> Result<Option<BlockKind>, StreamerError> {
        self.refuse_if_finished()?;
        match full_text.strip_prefix(self.text.as_str()) {
            Some("") => Ok(None),
            Some(added) => self.try_push(added).map(Some),
            None => self.replace(full_text).map(Some),
        }
    }

    /// Closes the id: returns the one `done: true` chunk, or `None` when it was already
    /// returned. After appends it is an empty append where the text ends; after a
    /// snapshot, a snapshot of the whole text. Finishing a streamer that never got a
    /// delta yields an empty append at offset 0; check [`text`](Self::text) first to skip it.
    pub fn finish(&mut self) -> Option<BlockKind> {
        if self.finished {
            return None;
        }
        self.finished = true;
        Some(self.closing())
    }

    /// Closes the id with the whole text `full` in one `done: true` chunk: an append of
    /// what `full` adds to the text streamed (empty when nothing), or a snapshot should
    /// it rewrite it or nothing was streamed yet. `None` when already finished.
    pub fn finish_with(&mut self, full: &str) -> Option<BlockKind> {
        if self.finished {
            return None;
        }
        let opened = self.text.is_empty() && !self.snapshots;
        let update = if opened { self.replace(full).ok() } else { self.update(full).ok().flatten() };
        let closing = self.finish()?;
        let Some(update) = update else { return Some(closing) };
        let (mut first, next) = (body_of(update), body_of(closing));
        // The closing chunk starts where the update ends, so they always merge.
        merge(&mut first, &next);
        Some(self.wrap(first))
    }

    /// The full text so far (what a receiver rebuilds from the chunks).
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

    fn refuse_if_finished(&self) -> Result<(), StreamerError> {
        if self.finished { Err(StreamerError::Finished { id: self.id.clone() }) } else { Ok(()) }
    }

    fn len(&self) -> u64 {
        self.text.len() as u64
    }

    fn closing(&self) -> BlockKind {
        let body = if self.snapshots {
            StreamedText::snapshot(self.id.clone(), self.text.clone(), true)
        } else {
            StreamedText::append(self.id.clone(), self.len(), "", true)
        };
        self.wrap(body)
    }

    fn wrap(&self, body: StreamedText) -> BlockKind {
        match self.kind {
            StreamKind::Text => BlockKind::Text(body),
            StreamKind::Thinking => BlockKind::Thinking(body),
        }
    }
}

fn body_of(kind: BlockKind) -> StreamedText {
    match kind {
        BlockKind::Text(body) | BlockKind::Thinking(body) => body,
        // A streamer only ever builds text and thinking blocks.
        other => unreachable!("not a streamed block: {other:?}"),
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
    use terminull_protocol::streamed::{Applied, Assembly};

    use super::*;

    fn body(kind: &BlockKind) -> &StreamedText {
        match kind {
            BlockKind::Text(b) | BlockKind::Thinking(b) => b,
            other => panic!("not a streamed block: {other:?}"),
        }
    }

    /// What a receiver rebuilds from `chunks`, checking every one is taken.
    fn rebuilt(chunks: &[BlockKind]) -> Assembly {
        let mut a = Assembly::default();
        for c in chunks {
            assert_eq!(a.apply(body(c)), Applied::Taken, "{c:?}");
        }
        a
    }

    #[test]
    fn pushes_are_appends_at_the_running_offset_and_exactly_one_done() {
        let mut s = TextStreamer::new_text("m1");
        let mut chunks = vec![s.push("Run"), s.push("ning "), s.push("tésts")];
        chunks.extend(s.finish());
        assert!(s.finish().is_none(), "a second finish yields nothing");
        assert!(chunks.iter().all(|c| c.block_type() == "text" && body(c).id.as_str() == "m1"));
        let pieces: Vec<_> = chunks.iter().map(|c| (body(c).offset, body(c).text.as_str(), body(c).done)).collect();
        assert_eq!(
            pieces,
            [(Some(0), "Run", false), (Some(3), "ning ", false), (Some(8), "tésts", false), (Some(14), "", true)]
        );
        let a = rebuilt(&chunks);
        assert_eq!((a.text(), a.is_done()), ("Running tésts", true));
        assert!(s.is_finished());
        assert_eq!(s.text(), "Running tésts");
    }

    #[test]
    fn an_empty_delta_is_an_empty_append_a_receiver_ignores() {
        let mut s = TextStreamer::new_text("m");
        s.push("a");
        let empty = s.push("");
        assert_eq!(body(&empty), &StreamedText::append("m", 1, "", false));
    }

    #[test]
    fn thinking_streamer_produces_thinking_blocks() {
        let mut s = TextStreamer::new_thinking("t1");
        assert_eq!(s.kind(), StreamKind::Thinking);
        assert_eq!(s.push("hmm").block_type(), "thinking");
        let last = s.finish().unwrap();
        assert_eq!(last, BlockKind::Thinking(StreamedText::append("t1", 3, "", true)));
    }

    #[test]
    fn finishing_an_empty_streamer_closes_it_with_an_empty_append() {
        let mut s = TextStreamer::new_text("e");
        let last = s.finish().unwrap();
        assert_eq!(body(&last), &StreamedText::append("e", 0, "", true));
        assert_eq!(rebuilt(&[last]).text(), "");
    }

    #[test]
    fn late_deltas_never_reopen_a_finished_id() {
        let mut s = TextStreamer::new_text("m");
        let first = s.push("final");
        let last = s.finish().unwrap();
        assert_eq!(s.try_push("x"), Err(StreamerError::Finished { id: "m".into() }));
        assert!(s.replace("y").is_err() && s.update("finally").is_err());
        let again = s.push("late");
        assert_eq!(again, last, "the closing chunk again");
        let mut a = rebuilt(&[first, last]);
        assert_eq!(a.apply(body(&again)), Applied::Repeat);
        assert_eq!(s.text(), "final");
    }

    #[test]
    fn replace_sends_a_snapshot_and_later_pushes_continue_from_it() {
        let mut s = TextStreamer::new_text("r");
        let mut chunks = vec![s.push("draft")];
        chunks.push(s.replace("snapshot").unwrap());
        assert_eq!(body(&chunks[1]), &StreamedText::snapshot("r", "snapshot", false));
        chunks.push(s.push("!"));
        assert_eq!(body(&chunks[2]), &StreamedText::append("r", 8, "!", false));
        chunks.extend(s.finish());
        assert_eq!(body(&chunks[3]), &StreamedText::append("r", 9, "", true));
        assert_eq!(rebuilt(&chunks).text(), "snapshot!");
    }

    #[test]
    fn a_message_streamed_as_snapshots_closes_with_a_snapshot() {
        let mut s = TextStreamer::new_text("r");
        s.replace("whole").unwrap();
        assert_eq!(body(&s.finish().unwrap()), &StreamedText::snapshot("r", "whole", true));
    }

    #[test]
    fn update_appends_what_a_growing_snapshot_adds_and_rewrites_otherwise() {
        let mut s = TextStreamer::new_text("u");
        let mut chunks = vec![s.update("Hel").unwrap().unwrap(), s.update("Hello").unwrap().unwrap()];
        assert_eq!(body(&chunks[1]), &StreamedText::append("u", 3, "lo", false));
        assert_eq!(s.update("Hello").unwrap(), None, "nothing new");
        chunks.push(s.update("Help").unwrap().unwrap());
        assert_eq!(body(&chunks[2]), &StreamedText::snapshot("u", "Help", false));
        chunks.extend(s.finish());
        let a = rebuilt(&chunks);
        assert_eq!((a.text(), a.is_done()), ("Help", true));
    }

    #[test]
    fn finish_with_closes_in_one_chunk() {
        let mut s = TextStreamer::new_text("f");
        let first = s.push("Hel");
        let last = s.finish_with("Hello").unwrap();
        assert_eq!(body(&last), &StreamedText::append("f", 3, "lo", true));
        assert_eq!(rebuilt(&[first, last]).text(), "Hello");
        assert!(s.finish_with("Hello!").is_none());

        let mut s = TextStreamer::new_text("w");
        assert_eq!(body(&s.finish_with("whole").unwrap()), &StreamedText::snapshot("w", "whole", true));

        let mut s = TextStreamer::new_text("r");
        s.push("draft");
        assert_eq!(body(&s.finish_with("other").unwrap()), &StreamedText::snapshot("r", "other", true));

        let mut s = TextStreamer::new_text("same");
        s.push("x");
        assert_eq!(body(&s.finish_with("x").unwrap()), &StreamedText::append("same", 1, "", true));
    }

    #[test]
    fn minted_ids_are_distinct_and_carry_the_prefix() {
        let ids: Vec<_> = (0..100).map(|_| mint_id("msg")).collect();
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        assert!(ids.iter().all(|id| id.starts_with("msg-")), "{ids:?}");
    }
}
