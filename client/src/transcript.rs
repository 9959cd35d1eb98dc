//! A session as the app shows it: blocks in `seq` order, a later block with the same
//! replaceable id (`text`, `thinking`, `progress`, `bg_task`) replacing the earlier
//! one in place, and duplicates (a block at or below the last `seq` held) dropped.

use std::collections::HashMap;

use terminull_protocol::blocks::Block;

/// What applying one block did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// A new entry.
    Appended,
    /// It replaced the entry with the same id.
    Replaced,
    /// Its `seq` was already held: ignored.
    Duplicate,
}

/// One session's transcript.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    entries: Vec<Block>,
    index: HashMap<(&'static str, String), usize>,
    seqs: Vec<u64>,
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Self {
        Self::default()
    }

    /// The highest `seq` held (0 when empty): what to resume from.
    pub fn last_seq(&self) -> u64 {
        self.seqs.last().copied().unwrap_or(0)
    }

    /// Every `seq` received, in order (replaced chunks included).
    pub fn seqs(&self) -> &[u64] {
        &self.seqs
    }

    /// The entries as shown.
    pub fn entries(&self) -> &[Block] {
        &self.entries
    }

    /// Applies one block received for this session.
    pub fn apply(&mut self, block: Block) -> Applied {
        if let Some(seq) = block.seq {
            if seq <= self.last_seq() {
                return Applied::Duplicate;
            }
            self.seqs.push(seq);
        }
        if let Some((kind, id)) = block.kind.replace_key() {
            let key = (kind, id.to_owned());
            if let Some(&i) = self.index.get(&key) {
                self.entries[i] = block;
                return Applied::Replaced;
            }
            self.index.insert(key, self.entries.len());
        }
        self.entries.push(block);
        Applied::Appended
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
    fn a_repeated_text_id_replaces_and_a_repeated_seq_is_dropped() {
        let mut t = Transcript::new();
        assert_eq!(t.apply(block(1, json!({"type":"text","id":"a","text":"He","done":false}))), Applied::Appended);
        assert_eq!(t.apply(block(2, json!({"type":"text","id":"a","text":"Hello","done":true}))), Applied::Replaced);
        assert_eq!(t.apply(block(2, json!({"type":"text","id":"a","text":"x","done":true}))), Applied::Duplicate);
        assert_eq!(t.entries().len(), 1);
        assert_eq!(t.seqs(), &[1, 2]);
        assert_eq!(t.last_seq(), 2);
    }
}
