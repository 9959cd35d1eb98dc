//! Bounding what an agent prints before it becomes a block: text, titles and tool
//! inputs cut on a character boundary, saying so where the reader should know.

use serde_json::{Value, json};

// The limits the adapters built on the SDK share: one block stays well under the
// bridge's line bound (docs/adapter-protocol.md), however much the agent prints.

/// Most bytes of one `text` or `thinking` block's text.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;
/// Most bytes of one `tool_result` output.
pub const MAX_TOOL_OUTPUT_BYTES: usize = 256 * 1024;
/// Most bytes of a tool call's `input` once encoded as JSON.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// Most characters of a tool call's `title`.
pub const MAX_TITLE_CHARS: usize = 120;
/// Most bytes of an error message.
pub const MAX_ERROR_BYTES: usize = 16 * 1024;
/// Most item ids a mapper remembers per turn (to drop repeated or late items).
pub const MAX_TRACKED_IDS: usize = 65_536;

/// `text` cut to at most `max` bytes, on a character boundary.
pub use terminull_protocol::text::prefix_within as cut;

/// `text` cut to at most `max` bytes on a character boundary, with a note saying so.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}\n… [truncated: {} bytes in all]", cut(text, max), text.len())
}

/// `text` cut to its first `max` characters, `…` marking the cut.
pub fn bounded_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The first line of `text`, trimmed and cut to `max` characters (a title).
pub fn first_line(text: &str, max: usize) -> String {
    bounded_chars(text.lines().next().unwrap_or_default().trim(), max)
}

/// A tool input that fits `max` bytes once encoded: the value itself, or
/// `{"truncated": "<start of its JSON>"}`.
pub fn bounded_input(value: Value, max: usize) -> Value {
    let encoded = value.to_string();
    if encoded.len() <= max { value } else { json!({ "truncated": bounded(&encoded, max) }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_keep_characters_whole() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(bounded("héllo", 10), "héllo");
        assert_eq!(bounded("héllo", 2), "h\n… [truncated: 6 bytes in all]");
        assert_eq!(bounded_chars("héllo", 2), "hé…");
        assert_eq!(first_line("  a title  \nmore", 80), "a title");
        assert_eq!(bounded_input(json!({"a": 1}), 100), json!({"a": 1}));
        assert!(bounded_input(json!({"a": "x".repeat(50)}), 20)["truncated"].is_string());
    }
}
