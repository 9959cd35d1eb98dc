//! Streamed text leaves a session as appends (docs/block-protocol.md#streaming-and-replacement-rules).
//!
//! Whatever form an adapter streams a message in (appends from an SDK adapter, the
//! full text so far from one written against protocol version 1), every chunk is run
//! through the message's [`AppendWriter`], so the history, the followers and every
//! device pay for each byte of text once. A chunk that adds nothing is dropped.
//!
//! A burst of appends is joined by the protocol's [`AppendPacer`]: the first append
//! after a quiet spell goes out at once, the ones that follow within its window go out
//! joined.

use std::collections::HashMap;

use terminull_protocol::blocks::{Block, BlockKind};
use terminull_protocol::ids::BlockId;
use terminull_protocol::pacing::AppendPacer;
use terminull_protocol::streamed::AppendWriter;
use tokio::time::Instant;

/// Most messages open at once (an adapter that never closes its ids cannot grow this
/// without bound); beyond it the oldest writer is forgotten, and that message's next
/// chunk goes out as the adapter sent it.
const MAX_OPEN_MESSAGES: usize = 256;

/// The session's streamed messages on their way out.
#[derive(Debug, Default)]
pub(super) struct Appends {
    writers: HashMap<(&'static str, BlockId), (u64, AppendWriter)>,
    opened: u64,
    pacer: AppendPacer,
}

impl Appends {
    /// The blocks to publish, in order, for `block` arriving at `now`: none while an
    /// append is held (or when it adds nothing), else the held append and/or `block`.
    pub(super) fn admit(&mut self, block: Block, now: Instant) -> Vec<Block> {
        match self.normalize(block) {
            Some(block) => self.pacer.admit(block, now.into_std()),
            None => Vec::new(),
        }
    }

    /// When the held append must go out, if one is held.
    pub(super) fn flush_at(&self) -> Option<Instant> {
        self.pacer.flush_at().map(Instant::from_std)
    }

    /// The held append, to publish now.
    pub(super) fn flush(&mut self, now: Instant) -> Option<Block> {
        self.pacer.flush(now.into_std())
    }

    /// Takes in a chunk already published (read back from the history) without
    /// publishing anything, so the chunks that follow continue it.
    pub(super) fn prime(&mut self, block: &Block) {
        let _ = self.normalize(block.clone());
    }

    /// `block` with its text chunk as an append, or `None` when it adds nothing.
    fn normalize(&mut self, mut block: Block) -> Option<Block> {
        let block_type = block.kind.block_type();
        let (BlockKind::Text(chunk) | BlockKind::Thinking(chunk)) = &mut block.kind else { return Some(block) };
        let key = (block_type, chunk.id.clone());
        if !self.writers.contains_key(&key) && self.writers.len() >= MAX_OPEN_MESSAGES {
            let oldest = self.writers.iter().min_by_key(|(_, (opened, _))| *opened).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                tracing::warn!(id = %oldest.1, "more than {MAX_OPEN_MESSAGES} streamed messages open; forgetting the oldest");
                self.writers.remove(&oldest);
            }
        }
        self.opened += 1;
        let opened = self.opened;
        let (_, writer) = self.writers.entry(key.clone()).or_insert_with(|| (opened, AppendWriter::default()));
        let next = writer.next(chunk);
        if chunk.done || writer.assembly().is_done() {
            self.writers.remove(&key);
        }
        *chunk = next?;
        Some(block)
    }
}

#[cfg(test)]
mod tests {
    use terminull_protocol::blocks::{BlockKind, StreamedText};

    use super::*;

    fn text(chunk: StreamedText) -> Block {
        Block::now(BlockKind::Text(chunk))
    }

    fn chunks(blocks: &[Block]) -> Vec<StreamedText> {
        blocks
            .iter()
            .filter_map(|b| match &b.kind {
                BlockKind::Text(t) => Some(t.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn full_text_chunks_leave_as_appends_and_repeats_are_dropped() {
        let mut appends = Appends::default();
        let start = Instant::now();
        let mut out = Vec::new();
        for (i, t) in ["He", "Hello", "Hello", "Hello, world"].iter().enumerate() {
            // Far apart: no batching.
            out.extend(appends.admit(
                text(StreamedText::snapshot("m", *t, false)),
                start + terminull_protocol::pacing::APPEND_WINDOW * 3 * i as u32,
            ));
        }
        out.extend(appends.admit(
            text(StreamedText::snapshot("m", "Hello, world", true)),
            start + terminull_protocol::pacing::APPEND_WINDOW * 20,
        ));
        assert_eq!(
            chunks(&out),
            [
                StreamedText::append("m", 0, "He", false),
                StreamedText::append("m", 2, "llo", false),
                StreamedText::append("m", 5, ", world", false),
                StreamedText::append("m", 12, "", true),
            ]
        );
    }

    #[test]
    fn a_burst_of_full_text_chunks_leaves_as_two_appends() {
        let mut appends = Appends::default();
        let start = Instant::now();
        let mut out = Vec::new();
        let mut whole = String::new();
        for i in 0..50 {
            whole.push_str(&format!("{i} "));
            out.extend(appends.admit(text(StreamedText::snapshot("m", whole.as_str(), false)), start));
        }
        out.extend(appends.admit(text(StreamedText::snapshot("m", whole.as_str(), true)), start));
        assert_eq!(
            chunks(&out),
            [StreamedText::append("m", 0, "0 ", false), StreamedText::append("m", 2, &whole[2..], true)]
        );
    }
}
