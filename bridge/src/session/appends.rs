//! Streamed text leaves a session as appends (docs/block-protocol.md#streaming-and-replacement-rules).
//!
//! Whatever form an adapter streams a message in (appends from an SDK adapter, the
//! full text so far from one written against protocol version 1), every chunk is run
//! through the message's [`AppendWriter`], so the history, the followers and every
//! device pay for each byte of text once. A chunk that adds nothing is dropped.
//!
//! A burst of appends is batched: the first append after a quiet spell goes out at
//! once (no added latency for the first words), and the ones that follow within
//! [`APPEND_WINDOW`] are joined into one append sent when the window ends, or sooner
//! when any other block (the message's `done` chunk included) comes. An agent that
//! streams token by token therefore still shows every word within 20 ms, while a burst
//! of thousands of tiny deltas costs a few lines of history and a few frames.

use std::collections::HashMap;
use std::time::Duration;

use terminull_protocol::blocks::{Block, BlockKind};
use terminull_protocol::ids::BlockId;
use terminull_protocol::streamed::AppendWriter;
use tokio::time::Instant;

/// How long appends are gathered into one after the first of a burst went out.
pub(super) const APPEND_WINDOW: Duration = Duration::from_millis(20);

/// Most messages open at once (an adapter that never closes its ids cannot grow this
/// without bound); beyond it the oldest writer is forgotten, and that message's next
/// chunk goes out as the adapter sent it.
const MAX_OPEN_MESSAGES: usize = 256;

/// The session's streamed messages on their way out.
#[derive(Debug, Default)]
pub(super) struct Appends {
    writers: HashMap<(&'static str, BlockId), (u64, AppendWriter)>,
    opened: u64,
    /// An append held back to be joined with those that follow it.
    held: Option<Block>,
    /// When `held` goes out at the latest.
    flush_at: Option<Instant>,
    /// When an append last went out.
    last_sent: Option<Instant>,
}

impl Appends {
    /// The blocks to publish, in order, for `block` arriving at `now`: none while an
    /// append is held (or when it adds nothing), else the held append and/or `block`.
    pub(super) fn admit(&mut self, block: Block, now: Instant) -> Vec<Block> {
        let Some(block) = self.normalize(block) else { return Vec::new() };
        let mut out = Vec::new();
        let open_append =
            matches!(&block.kind, BlockKind::Text(t) | BlockKind::Thinking(t) if t.is_append() && !t.done);
        let block = match self.held.as_mut() {
            Some(held) => match held.join(block) {
                Ok(()) if open_append => return out,
                Ok(()) => {
                    out.extend(self.flush(now));
                    return out;
                }
                Err(block) => {
                    out.extend(self.flush(now));
                    block
                }
            },
            None => block,
        };
        match self.last_sent {
            Some(sent) if open_append && now < sent + APPEND_WINDOW => {
                self.held = Some(block);
                self.flush_at = Some(sent + APPEND_WINDOW);
            }
            _ => {
                if open_append {
                    self.last_sent = Some(now);
                }
                out.push(block);
            }
        }
        out
    }

    /// When the held append must go out, if one is held.
    pub(super) fn flush_at(&self) -> Option<Instant> {
        self.flush_at
    }

    /// The held append, to publish now.
    pub(super) fn flush(&mut self, now: Instant) -> Option<Block> {
        self.flush_at = None;
        let held = self.held.take()?;
        self.last_sent = Some(now);
        Some(held)
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
    use terminull_protocol::blocks::{BlockKind, StreamedText, UserMessage};

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
            out.extend(
                appends.admit(text(StreamedText::snapshot("m", *t, false)), start + APPEND_WINDOW * 3 * i as u32),
            );
        }
        out.extend(appends.admit(text(StreamedText::snapshot("m", "Hello, world", true)), start + APPEND_WINDOW * 20));
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
    fn a_burst_goes_out_as_its_first_append_then_one_joined_append() {
        let mut appends = Appends::default();
        let start = Instant::now();
        let mut out = Vec::new();
        let mut offset = 0;
        for i in 0..100u32 {
            let piece = format!("{i:02} ");
            out.extend(appends.admit(text(StreamedText::append("m", offset, &piece, false)), start));
            offset += piece.len() as u64;
        }
        assert_eq!(out.len(), 1, "only the first append of the burst went out at once");
        assert_eq!(appends.flush_at(), Some(start + APPEND_WINDOW));
        out.extend(appends.flush(start + APPEND_WINDOW));
        let got = chunks(&out);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].offset, Some(3));
        let whole: String = got.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(whole.len() as u64, offset);
    }

    #[test]
    fn any_other_block_sends_the_held_append_first_and_done_joins_it() {
        let mut appends = Appends::default();
        let start = Instant::now();
        appends.admit(text(StreamedText::append("m", 0, "a", false)), start);
        assert!(appends.admit(text(StreamedText::append("m", 1, "b", false)), start).is_empty());
        let user = Block::now(BlockKind::UserMessage(UserMessage { text: "hi".into(), attachments: vec![] }));
        let out = appends.admit(user, start);
        assert_eq!(out.len(), 2);
        assert_eq!(chunks(&out[..1]), [StreamedText::append("m", 1, "b", false)]);
        // A closing chunk joins what is held and goes out at once.
        appends.admit(text(StreamedText::append("m", 2, "c", false)), start);
        let out = appends.admit(text(StreamedText::append("m", 3, "", true)), start);
        assert_eq!(chunks(&out), [StreamedText::append("m", 2, "c", true)]);
        assert_eq!(appends.flush_at(), None);
    }
}
