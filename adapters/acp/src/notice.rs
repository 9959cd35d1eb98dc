//! What an ACP agent says about its failing model calls outside ACP's structure: a
//! retry announced as message text (Copilot CLI) or only on stderr (Hermes, OpenCode),
//! and a final failure written as an ordinary answer (`stopReason: end_turn`). A
//! profile recognises those lines ([`Notices`]); the mapper turns a retry into a
//! `progress` block (one id per turn, replaced at each attempt, `done` once the model
//! answers or the turn ends) and a failure into the turn's `error` and an `error`
//! `session_end`.

/// One line of an agent, recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A model call failed and the agent will try again.
    Retrying {
        /// The attempt that failed (1-based), when the agent says; else the mapper
        /// counts the notices of the turn.
        attempt: Option<u64>,
        /// How many attempts the agent makes in all, when it says.
        total: Option<u64>,
        /// Why it failed, as the agent puts it.
        why: String,
    },
    /// The agent gave up: the turn failed, for this reason.
    GaveUp(String),
}

/// Recognises one line (a message chunk's text, or one stderr line).
pub type NoticeMatch = fn(&str) -> Option<Notice>;

/// Recognises nothing.
pub fn no_notice(_: &str) -> Option<Notice> {
    None
}

/// The lines a profile recognises.
#[derive(Debug, Clone, Copy)]
pub struct Notices {
    /// Message text (`agent_message_chunk`): a recognised chunk is not shown as text.
    pub message: NoticeMatch,
    /// Lines of the agent's stderr, read while a turn runs.
    pub stderr: NoticeMatch,
}

impl Notices {
    /// Recognises nothing (the default).
    pub const NONE: Notices = Notices { message: no_notice, stderr: no_notice };
}

/// The value of `key=` in a `key=value key2="quoted value"` log line.
pub fn log_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let pattern = format!(" {key}=");
    let start = line.find(&pattern)? + pattern.len();
    let rest = &line[start..];
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.find('"').map(|end| &quoted[..end]),
        None => Some(rest.split(' ').next().unwrap_or(rest)),
    }
}

/// `n/m` (as in `attempt 1/3`) after `marker` in `line`.
pub fn fraction_after(line: &str, marker: &str) -> Option<(u64, u64)> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let digits = |s: &str| s.chars().take_while(char::is_ascii_digit).collect::<String>();
    let n = digits(rest);
    let m = digits(rest.get(n.len() + 1..)?);
    if rest[n.len()..].starts_with('/') { Some((n.parse().ok()?, m.parse().ok()?)) } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_fields_are_read_quoted_or_bare() {
        let line = r#"level=ERROR message="stream error" small=false error.error="AI_APICallError: scripted failure""#;
        assert_eq!(log_field(line, "message"), Some("stream error"));
        assert_eq!(log_field(line, "small"), Some("false"));
        assert_eq!(log_field(line, "error.error"), Some("AI_APICallError: scripted failure"));
        assert_eq!(log_field(line, "missing"), None);
    }

    #[test]
    fn fractions_are_read_after_their_marker() {
        assert_eq!(fraction_after("API call failed (attempt 1/3) error", "(attempt "), Some((1, 3)));
        assert_eq!(fraction_after("attempt 12", "attempt "), None);
        assert_eq!(fraction_after("no marker", "attempt "), None);
    }
}
