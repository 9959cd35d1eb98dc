//! A session as the app shows it: blocks in `seq` order, a later block with the same
//! replaceable id (`text`, `thinking`, `progress`, `bg_task`) replacing the earlier
//! one in its place, and a block whose `seq` is already held dropped. Live blocks
//! arrive in order; history sent after `replay_done` (`replay: true`) is older and is
//! merged by `seq`.

use std::collections::{BTreeMap, HashMap};

use terminull_protocol::blocks::Block;

/// What applying one block did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// It was new.
    Added,
    /// Its `seq` was already held: ignored.
    Duplicate,
}

/// One session's transcript.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    by_seq: BTreeMap<u64, Block>,
    /// Blocks without a `seq` (not sent by a bridge; kept in arrival order, last).
    unsequenced: Vec<Block>,
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Self {
        Self::default()
    }

    /// The highest `seq` held (0 when empty): what to resume from.
    pub fn last_seq(&self) -> u64 {
        self.by_seq.keys().next_back().copied().unwrap_or(0)
    }

    /// Every `seq` held, ascending (replaced chunks included).
    pub fn seqs(&self) -> Vec<u64> {
        self.by_seq.keys().copied().collect()
    }

    /// The entries as shown: in `seq` order, each replaceable id once, at the place
    /// of its first block, with the content of its last.
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
        out
    }

    /// Applies one block received for this session (live or history).
    pub fn apply(&mut self, block: Block) -> Applied {
        match block.seq {
            Some(seq) if self.by_seq.contains_key(&seq) => Applied::Duplicate,
            Some(seq) => {
                self.by_seq.insert(seq, block);
                Applied::Added
            }
            None => {
                self.unsequenced.push(block);
                Applied::Added
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn block(seq: u64, value: serde_json::Value) -> Block {
        let mut v = value;
        v["seq"] = json!(seq);
        v["ts"] = json!(1.0);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_repeated_text_id_replaces_in_place_and_a_repeated_seq_is_dropped() {
        let mut t = Transcript::new();
        assert_eq!(t.apply(block(1, json!({"type":"text","id":"a","text":"He","done":false}))), Applied::Added);
        t.apply(block(2, json!({"type":"error","message":"x","recoverable":true})));
        assert_eq!(t.apply(block(3, json!({"type":"text","id":"a","text":"Hello","done":true}))), Applied::Added);
        assert_eq!(t.apply(block(3, json!({"type":"text","id":"a","text":"x","done":true}))), Applied::Duplicate);
        let entries = t.entries();
        assert_eq!(entries.len(), 2);
        assert_eq!(serde_json::to_value(&entries[0]).unwrap()["text"], "Hello");
        assert_eq!(t.seqs(), vec![1, 2, 3]);
        assert_eq!(t.last_seq(), 3);
    }

    #[test]
    fn older_history_merges_by_seq() {
        let mut t = Transcript::new();
        t.apply(block(5, json!({"type":"error","message":"late","recoverable":true})));
        t.apply(block(2, json!({"type":"error","message":"early","recoverable":true})));
        assert_eq!(t.seqs(), vec![2, 5]);
        assert_eq!(serde_json::to_value(&t.entries()[0]).unwrap()["message"], "early");
        assert_eq!(t.last_seq(), 5);
    }
}
