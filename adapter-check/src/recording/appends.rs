//! Runs of appends: where an adapter's appends of one message are split is timing (the
//! SDK joins a burst into one), so recordings store each run of consecutive appends of
//! a message joined into one line, and replay compares a run as the text it adds up to.

use serde_json::Value;

use super::Entry;

/// A `stream` line carrying an append of a `text` or `thinking` message: the line
/// without the piece, and the piece.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct AppendRun {
    /// The line with `text` emptied and `done` false: what every line of the run shares
    /// once `offset` is set to where the run starts.
    pub(super) shape: Value,
    pub(super) offset: u64,
    pub(super) text: String,
    pub(super) done: bool,
}

impl AppendRun {
    pub(super) fn of(entry: &Entry) -> Option<Self> {
        let Entry::FromAdapter(msg) = entry else { return None };
        if msg.get("method")? != "stream" {
            return None;
        }
        let block = msg.get("params")?.get("block")?;
        if !matches!(block.get("type")?.as_str()?, "text" | "thinking") {
            return None;
        }
        let offset = block.get("offset")?.as_u64()?;
        let text = block.get("text")?.as_str()?.to_owned();
        let done = block.get("done")?.as_bool()?;
        let mut shape = msg.clone();
        let shaped = shape.get_mut("params")?.get_mut("block")?;
        shaped["text"] = Value::String(String::new());
        shaped["done"] = Value::Bool(false);
        shaped["offset"] = Value::from(0);
        Some(Self { shape, offset, text, done })
    }

    /// Adds `next` when it continues this run (same message, where it ends).
    pub(super) fn extend(&mut self, next: &AppendRun) -> bool {
        let continues = !self.done && next.shape == self.shape && next.offset == self.offset + self.text.len() as u64;
        if continues {
            self.text.push_str(&next.text);
            self.done = next.done;
        }
        continues
    }

    /// The `stream` line that carries the whole run.
    pub(super) fn entry(&self) -> Entry {
        let mut line = self.shape.clone();
        line["params"]["block"]["offset"] = Value::from(self.offset);
        line["params"]["block"]["text"] = Value::String(self.text.clone());
        line["params"]["block"]["done"] = Value::Bool(self.done);
        Entry::FromAdapter(line)
    }
}

/// `entries` with each run of consecutive appends of one message joined into one line.
pub(super) fn join_appends(entries: Vec<Entry>) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    let mut open: Option<AppendRun> = None;
    for entry in entries {
        let piece = AppendRun::of(&entry);
        if let (Some(run), Some(piece)) = (open.as_mut(), piece.as_ref())
            && run.extend(piece)
        {
            if let Some(last) = out.last_mut() {
                *last = run.entry();
            }
            continue;
        }
        open = piece;
        out.push(entry);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn append(id: &str, offset: u64, text: &str, done: bool) -> Entry {
        Entry::FromAdapter(json!({"jsonrpc": "2.0", "method": "stream", "params": {"block": {
            "type": "text", "id": id, "ts": 0, "offset": offset, "text": text, "done": done}}}))
    }

    #[test]
    fn consecutive_appends_of_one_message_join_and_nothing_else_does() {
        let other =
            Entry::FromAdapter(json!({"jsonrpc": "2.0", "method": "stream", "params": {"block": {"type": "plan"}}}));
        let entries = vec![
            append("a", 0, "You ", false),
            append("a", 4, "said", false),
            append("b", 0, "x", false),
            append("a", 8, "!", false),
            other.clone(),
            append("a", 9, "", true),
            append("a", 9, "late", false),
        ];
        assert_eq!(
            join_appends(entries),
            vec![
                append("a", 0, "You said", false),
                append("b", 0, "x", false),
                append("a", 8, "!", false),
                other,
                append("a", 9, "", true),
                append("a", 9, "late", false),
            ]
        );
    }
}
