//! What a session list shows about a session besides its id, agent and state: its
//! title, the newest message in a few words, when it was last active, what waits for
//! the user, whether it is archived and where it was started (docs/control-messages.md,
//! "Session lists"). The bridge keeps these in the session's `meta.json`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The longest title `rename_session` accepts, in characters (after trimming).
pub const MAX_TITLE_CHARS: usize = 200;
/// A title made from the first prompt is cut to this many characters (an ellipsis added).
pub const AUTO_TITLE_CHARS: usize = 60;
/// A preview is cut to this many characters (an ellipsis added).
pub const PREVIEW_CHARS: usize = 140;
/// The longest `search_sessions` query, in characters.
pub const MAX_QUERY_CHARS: usize = 200;
/// At most this many sessions are answered to `search_sessions`.
pub const MAX_SEARCH_RESULTS: usize = 50;

/// What a session waits for from the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum Attention {
    /// An answer to a permission request (a tool to allow or deny).
    Permission,
    /// An answer to the agent's question.
    Question,
}

/// Where a session was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum SessionOrigin {
    /// On the computer: `terminull chat` (the local socket or in process).
    Terminal,
    /// From a paired device (the phone app, over the LAN or the relay).
    App,
}

/// One session `search_sessions` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct SessionMatch {
    /// The session.
    pub session_id: crate::ids::SessionId,
    /// The matching text around the first match, one line of at most
    /// [`PREVIEW_CHARS`] characters.
    pub snippet: String,
}

/// `installed` of an agent listed by a bridge that does not say: it was.
pub fn installed_default() -> bool {
    true
}

/// Whether `installed` is the default (`true`), so it is left out of the JSON.
#[allow(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
pub fn is_installed(installed: &bool) -> bool {
    *installed
}

/// One line of at most `max` characters from `text`: whitespace runs made one space,
/// trimmed, an ellipsis added when cut. `None` when nothing is left.
pub fn one_line(text: &str, max: usize) -> Option<String> {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.is_empty() || max == 0 {
        return None;
    }
    if joined.chars().count() <= max {
        return Some(joined);
    }
    let mut cut: String = joined.chars().take(max - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    Some(cut)
}

/// The title a session gets from its first prompt: its first line made one line of at
/// most [`AUTO_TITLE_CHARS`] characters.
pub fn title_from_prompt(text: &str) -> Option<String> {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    one_line(first, AUTO_TITLE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_the_first_non_empty_line_cut_with_an_ellipsis() {
        assert_eq!(title_from_prompt("\n  fix the   login bug \nand more").as_deref(), Some("fix the login bug"));
        let long = "word ".repeat(30);
        let t = title_from_prompt(&long).unwrap();
        assert!(t.chars().count() <= AUTO_TITLE_CHARS, "{t}");
        assert!(t.ends_with('…'), "{t}");
        assert_eq!(title_from_prompt("   \n "), None);
    }

    #[test]
    fn one_line_joins_whitespace_and_cuts_long_words() {
        assert_eq!(one_line("a\n\nb\tc", 10).as_deref(), Some("a b c"));
        assert_eq!(one_line(&"x".repeat(20), 5).as_deref(), Some("xxxx…"));
        assert_eq!(one_line("exactly five", 12).as_deref(), Some("exactly five"));
    }
}
