//! Streamed text (`text` and `thinking` blocks): snapshots and appends, and rebuilding
//! the whole text from them.
//!
//! A message is streamed as chunks under one stable `id`. A chunk is either
//!
//! - a **snapshot** (no `offset`): `text` is the whole text so far, and the receiver
//!   replaces what it holds; or
//! - an **append** (`offset: N`): `text` is what was generated from UTF-8 byte `N` of the
//!   message on, and it extends a copy that holds exactly `N` bytes.
//!
//! Exactly one chunk of an id has `done: true`, and nothing follows it. An append costs
//! the bytes it adds, so a long answer costs O(n) on every hop instead of the O(n²) of
//! full-text chunks; snapshots stay for adapters written against protocol version 1 and
//! for replays, which send a message rebuilt whole.
//!
//! The offsets are the check: a receiver that applied every piece in order holds the
//! text exactly, and a piece that does not start where its copy ends is a gap, a repeat
//! or a reorder, which [`Assembly::apply`] reports instead of showing a wrong text. No
//! digest rides along: the link is sealed and ordered, so only a sender's bug could
//! produce a piece that is consistent with the offsets and still wrong.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ids::BlockId;

/// Body of `text` and `thinking`: one chunk of a streamed message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct StreamedText {
    /// Stable across the chunks of one message.
    pub id: BlockId,
    /// Present on an append: the UTF-8 byte length of the message before this piece,
    /// which must be what the receiver holds. Absent on a snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// A snapshot's whole text so far, or an append's new text.
    pub text: String,
    /// `false` while streaming; exactly one `true` chunk closes the id.
    pub done: bool,
}

impl StreamedText {
    /// A snapshot: `text` is the whole message so far.
    pub fn snapshot(id: impl Into<BlockId>, text: impl Into<String>, done: bool) -> Self {
        Self { id: id.into(), offset: None, text: text.into(), done }
    }

    /// An append: `text` continues a message that is `offset` UTF-8 bytes long.
    pub fn append(id: impl Into<BlockId>, offset: u64, text: impl Into<String>, done: bool) -> Self {
        Self { id: id.into(), offset: Some(offset), text: text.into(), done }
    }

    /// True for an append, false for a snapshot.
    pub fn is_append(&self) -> bool {
        self.offset.is_some()
    }

    /// The message's length in UTF-8 bytes once this chunk is applied.
    pub fn end(&self) -> u64 {
        self.offset.unwrap_or(0).saturating_add(self.text.len() as u64)
    }
}

/// What [`Assembly::apply`] did with a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The chunk was taken: the text (or its `done`) changed.
    Taken,
    /// The chunk repeats what is held already; nothing changed.
    Repeat,
    /// The chunk does not fit the copy held (a piece is missing, or it contradicts
    /// what is held). Nothing changed; the receiver must fetch the message again.
    Gap {
        /// Bytes held.
        held: u64,
        /// Where the chunk starts.
        offset: u64,
    },
    /// A chunk after the `done: true` one. Nothing changed.
    AfterDone,
}

/// One streamed message as a receiver rebuilds it from its chunks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assembly {
    text: String,
    done: bool,
}

impl Assembly {
    /// The text rebuilt so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// True once the `done: true` chunk was taken.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The text's length in UTF-8 bytes (the `offset` the next append must carry).
    pub fn len(&self) -> u64 {
        self.text.len() as u64
    }

    /// True while no text has been taken.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Takes one chunk: a snapshot replaces; an append extends when it starts where the
    /// text ends. An append that overlaps the end is taken for its new part when the
    /// overlap agrees with what is held.
    pub fn apply(&mut self, chunk: &StreamedText) -> Applied {
        if self.done {
            return if chunk.done && self.matches_whole(chunk) { Applied::Repeat } else { Applied::AfterDone };
        }
        let Some(offset) = chunk.offset else {
            if self.text == chunk.text && !chunk.done {
                return Applied::Repeat;
            }
            self.text.clone_from(&chunk.text);
            self.done = chunk.done;
            return Applied::Taken;
        };
        let held = self.len();
        let gap = Applied::Gap { held, offset };
        if offset > held {
            return gap;
        }
        // `offset <= held`, so it fits in usize.
        let start = offset as usize;
        if !self.text.is_char_boundary(start) {
            return gap;
        }
        let overlap = &self.text[start..];
        let Some(new) = chunk.text.strip_prefix(overlap) else {
            // The piece ends inside what is held: a repeat when it agrees with it.
            return if overlap.starts_with(chunk.text.as_str()) && !chunk.done { Applied::Repeat } else { gap };
        };
        if new.is_empty() && !chunk.done {
            return Applied::Repeat;
        }
        self.text.push_str(new);
        self.done = chunk.done;
        Applied::Taken
    }

    /// The whole message as one snapshot chunk under `id` (what a replay sends).
    pub fn snapshot(&self, id: impl Into<BlockId>) -> StreamedText {
        StreamedText::snapshot(id, self.text.clone(), self.done)
    }

    fn matches_whole(&self, chunk: &StreamedText) -> bool {
        let start = chunk.offset.unwrap_or(0);
        start <= self.len() && self.text.is_char_boundary(start as usize) && self.text[start as usize..] == chunk.text
    }
}

/// Turns the chunks of one message, whatever their form, into appends: what the bridge
/// does with the chunks of an adapter written against protocol version 1 (snapshots),
/// so that nothing after it pays for the whole text again.
#[derive(Debug, Clone, Default)]
pub struct AppendWriter {
    assembly: Assembly,
}

impl AppendWriter {
    /// The chunk to pass on for `chunk`: an append of what it adds when it extends the
    /// text held (from an append, or from a snapshot that starts with that text); the
    /// snapshot itself when it rewrites what was sent; `None` when it adds nothing, or
    /// does not fit (an append with a gap, which an adapter must not send) or follows
    /// the `done: true` chunk.
    pub fn next(&mut self, chunk: &StreamedText) -> Option<StreamedText> {
        let before = self.assembly.len();
        let extends = match chunk.offset {
            Some(_) => true,
            None => chunk.text.starts_with(self.assembly.text()),
        };
        match self.assembly.apply(chunk) {
            Applied::Taken if extends => {
                let added = &self.assembly.text()[before as usize..];
                Some(StreamedText::append(chunk.id.clone(), before, added, chunk.done))
            }
            Applied::Taken => Some(chunk.clone()),
            Applied::Repeat | Applied::Gap { .. } | Applied::AfterDone => None,
        }
    }

    /// The message rebuilt so far.
    pub fn assembly(&self) -> &Assembly {
        &self.assembly
    }
}

/// Joins `next` into `first` when both are chunks of one message and `next` continues
/// it (an append where `first` ends, or a snapshot, which replaces), so that one chunk
/// stands for both; false, and nothing changed, otherwise. Coalescing a slow link's
/// queue, batching a burst of appends and compacting a replay all rely on it.
pub fn merge(first: &mut StreamedText, next: &StreamedText) -> bool {
    if first.id != next.id || first.done {
        return false;
    }
    match next.offset {
        None => first.clone_from(next),
        Some(offset) if offset == first.end() => {
            first.text.push_str(&next.text);
            first.done = next.done;
        }
        Some(_) => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn pieces(text: &str, cuts: &[usize]) -> Vec<StreamedText> {
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
        bounds.retain(|b| text.is_char_boundary(*b));
        bounds.extend([0, text.len()]);
        bounds.sort_unstable();
        bounds.dedup();
        let mut out: Vec<StreamedText> =
            bounds.windows(2).map(|w| StreamedText::append("m", w[0] as u64, &text[w[0]..w[1]], false)).collect();
        if out.is_empty() {
            out.push(StreamedText::append("m", 0, "", false));
        }
        out.last_mut().unwrap().done = true;
        out
    }

    #[test]
    fn appends_in_order_rebuild_the_text() {
        let mut a = Assembly::default();
        for chunk in pieces("héllo wörld", &[1, 3, 7]) {
            assert_eq!(a.apply(&chunk), Applied::Taken);
        }
        assert_eq!((a.text(), a.is_done()), ("héllo wörld", true));
    }

    #[test]
    fn a_missing_piece_is_a_gap_and_changes_nothing() {
        let chunks = pieces("abcdef", &[2, 4]);
        let mut a = Assembly::default();
        a.apply(&chunks[0]);
        assert_eq!(a.apply(&chunks[2]), Applied::Gap { held: 2, offset: 4 });
        assert_eq!(a.text(), "ab");
    }

    #[test]
    fn repeats_and_agreeing_overlaps_are_harmless() {
        let mut a = Assembly::default();
        a.apply(&StreamedText::append("m", 0, "abc", false));
        assert_eq!(a.apply(&StreamedText::append("m", 1, "b", false)), Applied::Repeat);
        assert_eq!(a.apply(&StreamedText::append("m", 1, "bcd", false)), Applied::Taken);
        assert_eq!(a.apply(&StreamedText::append("m", 1, "xx", false)), Applied::Gap { held: 4, offset: 1 });
        assert_eq!(a.text(), "abcd");
    }

    #[test]
    fn a_snapshot_replaces_and_nothing_follows_done() {
        let mut a = Assembly::default();
        a.apply(&StreamedText::append("m", 0, "draft", false));
        assert_eq!(a.apply(&StreamedText::snapshot("m", "final", true)), Applied::Taken);
        assert_eq!(a.apply(&StreamedText::append("m", 5, "!", false)), Applied::AfterDone);
        assert_eq!(a.apply(&StreamedText::snapshot("m", "final", true)), Applied::Repeat);
        assert_eq!(a.text(), "final");
    }

    #[test]
    fn the_writer_turns_full_text_chunks_into_appends() {
        let mut w = AppendWriter::default();
        let out: Vec<_> = ["Run", "Running", "Running", "Running tests"]
            .iter()
            .map(|t| w.next(&StreamedText::snapshot("m", *t, false)))
            .collect();
        assert_eq!(out[0], Some(StreamedText::append("m", 0, "Run", false)));
        assert_eq!(out[1], Some(StreamedText::append("m", 3, "ning", false)));
        assert_eq!(out[2], None, "a chunk that adds nothing is not passed on");
        assert_eq!(out[3], Some(StreamedText::append("m", 7, " tests", false)));
        // A rewrite goes on as the snapshot it is; the closing chunk as an empty append.
        assert_eq!(
            w.next(&StreamedText::snapshot("m", "Done", false)),
            Some(StreamedText::snapshot("m", "Done", false))
        );
        assert_eq!(w.next(&StreamedText::snapshot("m", "Done", true)), Some(StreamedText::append("m", 4, "", true)));
        assert_eq!(w.next(&StreamedText::snapshot("m", "Done", true)), None);
    }

    #[test]
    fn merge_joins_contiguous_pieces_only() {
        let mut first = StreamedText::append("m", 0, "ab", false);
        assert!(merge(&mut first, &StreamedText::append("m", 2, "cd", true)));
        assert_eq!(first, StreamedText::append("m", 0, "abcd", true));
        let mut open = StreamedText::append("m", 0, "ab", false);
        assert!(!merge(&mut open, &StreamedText::append("m", 3, "d", false)));
        assert!(!merge(&mut open, &StreamedText::append("n", 2, "c", false)));
        assert!(!merge(&mut first, &StreamedText::append("m", 4, "e", false)), "nothing joins a closed message");
    }

    proptest! {
        /// Whatever happens to the pieces on the way (split anywhere, some dropped,
        /// some repeated, some swapped), the receiver either rebuilds the text exactly
        /// or reports a gap; it never holds a text that is not a prefix of the real one.
        #[test]
        fn a_receiver_never_shows_a_wrong_text(
            text in "(\\PC|[a-zé€😀 ]){0,60}",
            cuts in proptest::collection::vec(0usize..80, 0..8),
            drops in proptest::collection::vec(any::<bool>(), 0..10),
            repeats in proptest::collection::vec(any::<bool>(), 0..10),
            swap in proptest::option::of((0usize..10, 0usize..10)),
        ) {
            let mut chunks = pieces(&text, &cuts);
            let mut sent = Vec::new();
            for (i, c) in chunks.drain(..).enumerate() {
                if drops.get(i).copied().unwrap_or(false) { continue; }
                if repeats.get(i).copied().unwrap_or(false) { sent.push(c.clone()); }
                sent.push(c);
            }
            if let Some((a, b)) = swap && a < sent.len() && b < sent.len() {
                sent.swap(a, b);
            }
            let mut assembly = Assembly::default();
            for c in &sent {
                assembly.apply(c);
                prop_assert!(text.starts_with(assembly.text()), "held {:?} of {:?}", assembly.text(), text);
            }
            // A receiver that took the closing chunk holds the whole text, gap or not.
            if assembly.is_done() {
                prop_assert_eq!(assembly.text(), text.as_str());
            }
        }
    }
}
