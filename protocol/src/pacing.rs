//! Pacing streamed appends: a burst of tiny appends becomes a few, with no delay for
//! the first words.
//!
//! The first append after a quiet spell goes out at once. The appends that follow it
//! within [`APPEND_WINDOW`] are held and joined into one ([`Block::join`]), which goes
//! out when the window ends, or sooner when any other block comes (the message's
//! `done: true` chunk joins it and goes out at once). An agent that streams token by
//! token still shows every word within the window; one that prints thousands of
//! deltas at once costs a few lines instead of thousands. The adapter SDK paces what
//! it writes to stdout and the bridge what it stores and sends, with this one type.

use std::time::{Duration, Instant};

use crate::blocks::{Block, BlockKind};

/// How long appends are gathered into one after the first of a burst went out.
pub const APPEND_WINDOW: Duration = Duration::from_millis(20);

/// Holds back the appends of a burst and joins them. The caller sends what
/// [`admit`](Self::admit) returns, and calls [`flush`](Self::flush) at
/// [`flush_at`](Self::flush_at).
#[derive(Debug, Default)]
pub struct AppendPacer {
    held: Option<Block>,
    flush_at: Option<Instant>,
    last_sent: Option<Instant>,
}

impl AppendPacer {
    /// The blocks to send now, in order, for `block` arriving at `now`: none when it
    /// is held (or joined to what is held), else what was held and/or `block`.
    pub fn admit(&mut self, block: Block, now: Instant) -> Vec<Block> {
        let mut out = Vec::new();
        let open_append = is_open_append(&block);
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
    pub fn flush_at(&self) -> Option<Instant> {
        self.flush_at
    }

    /// The held append, to send now.
    pub fn flush(&mut self, now: Instant) -> Option<Block> {
        self.flush_at = None;
        let held = self.held.take()?;
        self.last_sent = Some(now);
        Some(held)
    }
}

/// An append that does not close its message.
fn is_open_append(block: &Block) -> bool {
    matches!(&block.kind, BlockKind::Text(t) | BlockKind::Thinking(t) if t.is_append() && !t.done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::{StreamedText, UserMessage};

    fn append(offset: u64, text: &str, done: bool) -> Block {
        Block::now(BlockKind::Text(StreamedText::append("m", offset, text, done)))
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
    fn a_burst_goes_out_as_its_first_append_then_one_joined_append() {
        let mut pacer = AppendPacer::default();
        let start = Instant::now();
        let mut out = Vec::new();
        let mut offset = 0;
        for i in 0..100u32 {
            let piece = format!("{i:02} ");
            out.extend(pacer.admit(append(offset, &piece, false), start));
            offset += piece.len() as u64;
        }
        assert_eq!(out.len(), 1, "only the first append of the burst went out at once");
        assert_eq!(pacer.flush_at(), Some(start + APPEND_WINDOW));
        out.extend(pacer.flush(start + APPEND_WINDOW));
        let got = chunks(&out);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].offset, Some(3));
        assert_eq!(got.iter().map(|c| c.text.len() as u64).sum::<u64>(), offset);
    }

    #[test]
    fn appends_further_apart_than_the_window_go_out_at_once() {
        let mut pacer = AppendPacer::default();
        let start = Instant::now();
        for i in 0..5u32 {
            let out = pacer.admit(append(u64::from(i), "x", false), start + APPEND_WINDOW * (i + 1));
            assert_eq!(out.len(), 1);
        }
        assert_eq!(pacer.flush_at(), None);
    }

    #[test]
    fn any_other_block_sends_the_held_append_first_and_done_joins_it() {
        let mut pacer = AppendPacer::default();
        let start = Instant::now();
        pacer.admit(append(0, "a", false), start);
        assert!(pacer.admit(append(1, "b", false), start).is_empty());
        let user = Block::now(BlockKind::UserMessage(UserMessage { text: "hi".into(), attachments: vec![] }));
        let out = pacer.admit(user, start);
        assert_eq!(out.len(), 2);
        assert_eq!(chunks(&out[..1]), [StreamedText::append("m", 1, "b", false)]);
        // A closing chunk joins what is held and goes out at once.
        pacer.admit(append(2, "c", false), start);
        let out = pacer.admit(append(3, "", true), start);
        assert_eq!(chunks(&out), [StreamedText::append("m", 2, "c", true)]);
        assert_eq!(pacer.flush_at(), None);
    }
}
