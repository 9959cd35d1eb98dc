//! A session as the app shows it: blocks in `seq` order, a later block with the same
//! replaceable id (`text`, `thinking`, `progress`, `bg_task`) standing for the earlier
//! ones in their place, and a block whose `seq` is already held dropped. Live blocks
//! arrive in order; history sent after `replay_done` (`replay: true`) is older and is
//! merged by `seq`.
//!
//! A `text` or `thinking` message is streamed as snapshots (the whole text so far)
//! and appends (the text from a UTF-8 byte offset on; docs/block-protocol.md). The
//! transcript rebuilds each message from its chunks in `seq` order with
//! [`Assembly`], so it shows each message once with its text rebuilt exactly. A chunk
//! that does not fit (a piece went missing on the way) is a gap: the message keeps
//! the prefix it holds, never a wrong text, and [`Transcript::gaps`] says where to
//! resume the session from so the bridge sends the message again.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use terminull_protocol::blocks::{Block, BlockKind};
use terminull_protocol::control::SessionResume;
use terminull_protocol::ids::SessionId;
use terminull_protocol::streamed::{self, Assembly, StreamedText};

/// What applying one block did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// It was new.
    Added,
    /// Its `seq` was already held: ignored.
    Duplicate,
    /// A replay's snapshot of a message at a `seq` held: it took the place of the
    /// chunk held there, so the message is rebuilt whole (what closes a gap).
    Rebuilt,
    /// It was held, but its message does not rebuild: a piece before it is missing.
    /// The message shows the prefix it holds; resume the session from `since_seq`
    /// (see [`Transcript::session_resume`]) to get the message again.
    Gap {
        /// The `seq` held before the message's first chunk.
        since_seq: u64,
    },
}

/// A message that does not rebuild: what [`Transcript::gaps`] lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// `text` or `thinking`.
    pub block_type: &'static str,
    /// The message's id.
    pub id: String,
    /// The `seq` held before the message's first chunk: a `session_resume` from it
    /// replays the message from its start.
    pub since_seq: u64,
}

/// The key of a streamed message: its block type and id.
type StreamKey = (&'static str, String);

/// One streamed message as held: the `seq`s of its chunks and the text they rebuild.
#[derive(Debug, Clone, Default)]
struct Stream {
    seqs: BTreeSet<u64>,
    /// Chunks that came without a `seq`, in arrival order (applied after the others).
    unsequenced: Vec<StreamedText>,
    assembly: Assembly,
    /// The newest `seq` folded into `assembly`: a chunk after it is applied as it
    /// comes; an older one makes the message be folded again in `seq` order.
    folded_to: Option<u64>,
    /// The last chunk that changed or refused the text did not fit.
    gap: bool,
}

impl Stream {
    fn apply(&mut self, chunk: &StreamedText) {
        match self.assembly.apply(chunk) {
            streamed::Applied::Taken => self.gap = false,
            streamed::Applied::Gap { .. } => self.gap = true,
            streamed::Applied::Repeat | streamed::Applied::AfterDone => {}
        }
    }
}

/// The streamed body of a `text` or `thinking` block.
fn streamed_text(block: &Block) -> Option<&StreamedText> {
    match &block.kind {
        BlockKind::Text(t) | BlockKind::Thinking(t) => Some(t),
        _ => None,
    }
}

fn stream_key(block: &Block) -> Option<StreamKey> {
    streamed_text(block).map(|t| (block.block_type(), t.id.0.clone()))
}

/// One session's transcript.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    by_seq: BTreeMap<u64, Block>,
    /// Blocks without a `seq` (not sent by a bridge; kept in arrival order, last).
    unsequenced: Vec<Block>,
    streams: HashMap<StreamKey, Stream>,
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Self {
        Self::default()
    }

    /// The highest `seq` held (0 when empty).
    pub fn last_seq(&self) -> u64 {
        self.by_seq.keys().next_back().copied().unwrap_or(0)
    }

    /// Where to resume the session from: before the first message that does not
    /// rebuild, or after the newest block held when every message does.
    pub fn resume_seq(&self) -> u64 {
        self.gaps().iter().map(|g| g.since_seq).min().unwrap_or_else(|| self.last_seq())
    }

    /// The `session_resume` that brings this transcript up to date (from
    /// [`Self::resume_seq`]); a link fills in `app_pubkey`.
    pub fn session_resume(&self, session_id: SessionId) -> SessionResume {
        SessionResume { session_id, since_seq: Some(self.resume_seq()), since_ts: None, app_pubkey: String::new() }
    }

    /// Every `seq` held, ascending (replaced chunks included).
    pub fn seqs(&self) -> Vec<u64> {
        self.by_seq.keys().copied().collect()
    }

    /// The messages that do not rebuild (a piece is missing), each with the `seq` to
    /// resume from; empty when every message shows its exact text.
    pub fn gaps(&self) -> Vec<Gap> {
        let mut gaps: Vec<Gap> = self
            .streams
            .iter()
            .filter(|(_, stream)| stream.gap)
            .map(|((block_type, id), stream)| Gap { block_type, id: id.clone(), since_seq: self.since_seq_of(stream) })
            .collect();
        gaps.sort_by(|a, b| (a.since_seq, &a.id).cmp(&(b.since_seq, &b.id)));
        gaps
    }

    /// The entries as shown: in `seq` order, each replaceable id once, at the place
    /// of its first block, with the content of its last; a streamed message's text is
    /// the one its chunks rebuild (as a snapshot: no `offset`).
    pub fn entries(&self) -> Vec<Block> {
        let mut out: Vec<Block> = Vec::with_capacity(self.by_seq.len());
        let mut index: HashMap<(&'static str, &str), usize> = HashMap::new();
        for block in self.by_seq.values().chain(&self.unsequenced) {
            if let Some(key) = block.kind.replace_key() {
                if let Some(&i) = index.get(&key) {
                    out[i] = block.clone();
                    continue;
                }
                index.insert(key, out.len());
            }
            out.push(block.clone());
        }
        for entry in &mut out {
            let Some(key) = stream_key(entry) else { continue };
            let Some(stream) = self.streams.get(&key) else { continue };
            let whole = stream.assembly.snapshot(key.1);
            match &mut entry.kind {
                BlockKind::Text(t) | BlockKind::Thinking(t) => *t = whole,
                _ => {}
            }
        }
        out
    }

    /// The message a `text` or `thinking` block belongs to, as rebuilt so far; `None`
    /// for other blocks and for a message not held.
    pub fn message(&self, block: &Block) -> Option<&Assembly> {
        self.streams.get(&stream_key(block)?).map(|stream| &stream.assembly)
    }

    /// Applies one block received for this session (live or history).
    pub fn apply(&mut self, block: Block) -> Applied {
        let Some(seq) = block.seq else {
            if let Some(key) = stream_key(&block)
                && let Some(chunk) = streamed_text(&block)
            {
                let stream = self.streams.entry(key).or_default();
                stream.unsequenced.push(chunk.clone());
                stream.apply(chunk);
            }
            self.unsequenced.push(block);
            return Applied::Added;
        };
        if let Some(held) = self.by_seq.get(&seq) {
            return self.replace_with_snapshot(seq, held.clone(), block);
        }
        let key = stream_key(&block);
        self.by_seq.insert(seq, block);
        let Some(key) = key else { return Applied::Added };
        let stream = self.streams.entry(key.clone()).or_default();
        stream.seqs.insert(seq);
        if stream.folded_to.is_none_or(|last| seq > last) && stream.unsequenced.is_empty() {
            if let Some(chunk) = self.by_seq.get(&seq).and_then(streamed_text) {
                stream.apply(chunk);
            }
            stream.folded_to = Some(seq);
        } else {
            self.refold(&key);
        }
        self.result_for(&key)
    }

    /// A block at a `seq` held is a duplicate, except a replay's snapshot of the
    /// message whose append is held there: the bridge compacts a message it replays
    /// into one snapshot at its newest `seq`, which is what repairs a gap.
    fn replace_with_snapshot(&mut self, seq: u64, held: Block, block: Block) -> Applied {
        let (Some(key), Some(chunk), Some(held_chunk)) =
            (stream_key(&block), streamed_text(&block), streamed_text(&held))
        else {
            return Applied::Duplicate;
        };
        if chunk.is_append() || !held_chunk.is_append() || stream_key(&held).as_ref() != Some(&key) {
            return Applied::Duplicate;
        }
        self.by_seq.insert(seq, block);
        self.refold(&key);
        match self.result_for(&key) {
            Applied::Added => Applied::Rebuilt,
            other => other,
        }
    }

    /// Folds a message's chunks again from the start, in `seq` order.
    fn refold(&mut self, key: &StreamKey) {
        let Some(stream) = self.streams.get_mut(key) else { return };
        stream.assembly = Assembly::default();
        stream.gap = false;
        let seqs: Vec<u64> = stream.seqs.iter().copied().collect();
        for seq in &seqs {
            if let Some(chunk) = self.by_seq.get(seq).and_then(streamed_text) {
                stream.apply(chunk);
            }
        }
        for chunk in stream.unsequenced.clone() {
            stream.apply(&chunk);
        }
        stream.folded_to = stream.seqs.last().copied();
    }

    fn result_for(&self, key: &StreamKey) -> Applied {
        match self.streams.get(key) {
            Some(stream) if stream.gap => Applied::Gap { since_seq: self.since_seq_of(stream) },
            _ => Applied::Added,
        }
    }

    /// The `seq` held before the message's first chunk (0 when none).
    fn since_seq_of(&self, stream: &Stream) -> u64 {
        let first = stream.seqs.first().copied().unwrap_or(0);
        self.by_seq.range(..first).next_back().map(|(seq, _)| *seq).unwrap_or(0)
    }
}

#[cfg(test)]
#[path = "transcript_tests.rs"]
mod tests;
