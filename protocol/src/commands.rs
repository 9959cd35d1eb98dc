//! The bridge's universal slash commands: offered for every agent, listed first in
//! every `agent_info` block. This list is the one place they are defined.

use crate::blocks::{CommandSource, SlashCommand};

/// `(name, description)` of every universal command, in palette order.
pub const UNIVERSAL_SLASH_COMMANDS: [(&str, &str); 6] = [
    ("help", "List the commands this session understands"),
    ("status", "Show the session's agent, model, cost and token usage"),
    ("model", "List the models this agent offers"),
    ("usage", "Show the session's token and cost totals"),
    ("stop", "Interrupt the running turn"),
    ("new", "End this session and start a fresh one with the same agent and directory"),
];

/// The universal commands as [`SlashCommand`]s with `source: bridge`.
pub fn universal_slash_commands() -> Vec<SlashCommand> {
    UNIVERSAL_SLASH_COMMANDS
        .iter()
        .map(|(name, description)| SlashCommand {
            name: (*name).to_owned(),
            description: (*description).to_owned(),
            source: CommandSource::Bridge,
        })
        .collect()
}

/// The palette as the app sees it: the universal commands first, then the agent's
/// own. Entries that claim to be the bridge's, or reuse a universal name, are dropped,
/// so an adapter may send its own commands alone or a list that already starts with
/// the universal ones; both come out the same.
pub fn with_universal_first(commands: Vec<SlashCommand>) -> Vec<SlashCommand> {
    let mut out = universal_slash_commands();
    out.extend(commands.into_iter().filter(|c| c.source == CommandSource::Agent && !is_universal(&c.name)));
    out
}

/// True when `name` (without the slash) is handled by the bridge, not the agent.
pub fn is_universal(name: &str) -> bool {
    UNIVERSAL_SLASH_COMMANDS.iter().any(|(n, _)| *n == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn universal_commands_are_bridge_sourced_and_unique() {
        let cmds = universal_slash_commands();
        assert_eq!(cmds.len(), UNIVERSAL_SLASH_COMMANDS.len());
        assert!(cmds.iter().all(|c| c.source == CommandSource::Bridge && !c.name.starts_with('/')));
        let mut names: Vec<_> = cmds.iter().map(|c| &c.name).collect();
        names.dedup();
        assert_eq!(names.len(), cmds.len());
        assert!(is_universal("status") && !is_universal("compact"));
    }

    #[test]
    fn normalizing_is_idempotent_and_drops_shadowing_commands() {
        let agent =
            |name: &str| SlashCommand { name: name.into(), description: String::new(), source: CommandSource::Agent };
        let once = with_universal_first(vec![agent("compact"), agent("status")]);
        let names: Vec<_> = once.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["help", "status", "model", "usage", "stop", "new", "compact"]);
        assert_eq!(with_universal_first(once.clone()), once);
    }
}
