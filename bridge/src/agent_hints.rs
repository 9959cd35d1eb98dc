//! How to install an agent's CLI, in the words the app and `terminull chat` show when
//! it is missing (docs/agents.md says more).

/// The install command of a known agent's CLI, `None` for others.
pub fn install_command(agent_id: &str) -> Option<&'static str> {
    Some(match agent_id {
        "claude-code" => "npm install -g @anthropic-ai/claude-code",
        "codex" => "npm install -g @openai/codex",
        "gemini" => "npm install -g @google/gemini-cli",
        "pi" => "npm install -g @mariozechner/pi-coding-agent",
        "opencode" => "npm install -g opencode-ai",
        "kilo" => "npm install -g @kilocode/cli",
        _ => return None,
    })
}

/// One sentence: how to install `agent_id`'s CLI and check it.
pub fn install_hint(agent_id: &str) -> String {
    match install_command(agent_id) {
        Some(command) => format!("install it with `{command}`, then check with `terminull agents`"),
        None => {
            "install it with its vendor's installer (docs/agents.md), then check with `terminull agents`".to_owned()
        }
    }
}

/// The one sentence a start of a missing agent is refused with.
pub fn not_installed(agent_id: &str, display_name: &str) -> String {
    format!("{display_name} ({agent_id}) is not installed on this computer: {}.", install_hint(agent_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_agent_is_one_sentence_with_the_install_command() {
        let s = not_installed("claude-code", "Claude Code");
        assert_eq!(
            s,
            "Claude Code (claude-code) is not installed on this computer: install it with \
             `npm install -g @anthropic-ai/claude-code`, then check with `terminull agents`."
        );
        assert_eq!(s.matches(". ").count(), 0, "one sentence");
    }
}
