//! Write a terminull adapter in Rust.
//!
//! An adapter is an executable that speaks the adapter protocol
//! (docs/adapter-protocol.md) on its stdin/stdout. Implement [`Adapter`] and call
//! [`serve`] from `main`:
//!
//! - [`adapter`]: the trait, its explicit declaration, the optional surfaces.
//! - [`session`]: the [`Turn`] an adapter emits blocks through.
//! - [`action`]: the [`Action`]s a pure mapper asks for and the [`Conversation`] they
//!   update (the id to resume, the usage totals).
//! - [`per_turn`]: the read loop of an agent run once per turn.
//! - [`handoff`]: the handoff hooks, implemented once as a [`Handoff`] or
//!   [`SessionFiles`].
//! - [`settings`]: checking init params, the working directory and the CLI at `start`.
//! - [`streamer`], [`tools`], [`bounds`]: text/thinking chunks, tool-call pairing,
//!   bounded text and tool inputs.
//! - [`detect`], [`child`]: probing and running the agent CLI.
//! - `testing` (cargo feature `testing`): the adapter served in memory for tests.
//!
//! docs/adapter-sdk.md walks through writing an adapter with these.
//!
//! stdout belongs to the protocol: never `println!` in an adapter; log with `tracing`
//! (it goes to stderr).

#![warn(missing_docs)]

pub mod action;
pub mod adapter;
pub mod bounds;
pub mod child;
pub mod detect;
pub mod error;
pub mod handoff;
mod paced;
pub mod per_turn;
pub mod serve;
pub mod session;
pub mod settings;
pub mod streamer;
pub mod tap;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tools;
pub mod usage;

pub use action::{Action, Conversation};
pub use adapter::{Adapter, AdapterError, Caps, GetUsage, ListModels, NotProvided, Provided, StartInfo, declaration};
pub use handoff::{Handoff, SessionFiles};
pub use serve::{DeclarationOverride, serve, serve_io, serve_io_with, serve_with};
pub use session::{Session, Turn, TurnError};

/// Everything an adapter implementation usually needs.
pub mod prelude {
    pub use crate::action::{Action, Conversation};
    pub use crate::adapter::{
        Adapter, AdapterError, Caps, EVERY_INIT_PARAM, GetUsage, ListModels, NotProvided, Provided, StartInfo,
        declaration,
    };
    pub use crate::caps;
    pub use crate::handoff::{Handoff, SessionFiles};
    pub use crate::serve::serve;
    pub use crate::session::{Session, Turn, TurnError};
    pub use crate::streamer::{StreamKind, TextStreamer, mint_id};
    pub use crate::tools::ToolCallTracker;
    pub use terminull_protocol::BlockKind;
    pub use terminull_protocol::adapter::{HandoffHook, InitParam, LeaseKind, ModelInfo, StartParams};
    pub use terminull_protocol::blocks::{EndReason, PermissionOption, PermissionOptionKind, Usage, UserMessage};
}

/// The guide, docs/adapter-sdk.md: its examples run as this crate's doc-tests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/adapter-sdk.md")]
pub struct AdapterSdkGuide;

use terminull_protocol::adapter::Declaration;
use terminull_protocol::blocks::{AgentInfo, SlashCommand};
use terminull_protocol::commands::with_universal_first;

/// Builds the `agent_info` body for `start` from the adapter's declaration.
///
/// The capabilities are copied from the declaration (its single source of truth);
/// the slash commands are the bridge's universal ones first, then the agent's own,
/// minus any agent command that would shadow a universal one.
pub fn make_agent_info(
    declaration: &Declaration,
    version: Option<String>,
    model: Option<String>,
    agent_commands: Vec<SlashCommand>,
) -> AgentInfo {
    AgentInfo {
        agent_id: declaration.agent_id.clone(),
        name: declaration.display_name.clone(),
        version,
        model,
        capabilities: declaration.capabilities,
        slash_commands: with_universal_first(agent_commands),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::adapter::LeaseKind;
    use terminull_protocol::blocks::CommandSource;
    use terminull_protocol::capabilities::Capabilities;
    use terminull_protocol::commands::UNIVERSAL_SLASH_COMMANDS;

    fn declaration() -> Declaration {
        Declaration {
            protocol_version: 1,
            agent_id: "echo".into(),
            display_name: "Echo".into(),
            cli_binary: None,
            adapter_version: None,
            verified_against: None,
            capabilities: Capabilities {
                cap_images: false,
                cap_documents: false,
                cap_thinking: true,
                cap_permissions: false,
                cap_subagents: false,
                cap_interrupt: false,
                cap_input_during_turn: false,
                cap_terminal: false,
                provides_models: false,
                provides_usage: true,
            },
            lease: LeaseKind::PerTurn,
            accepted_init_params: vec![],
            handoff_hooks: vec![],
        }
    }

    fn agent(name: &str) -> SlashCommand {
        SlashCommand { name: name.into(), description: String::new(), source: CommandSource::Agent }
    }

    #[test]
    fn universal_commands_come_first_then_the_agents_own() {
        let info = make_agent_info(&declaration(), Some("1.0".into()), None, vec![agent("compact"), agent("review")]);
        let names: Vec<_> = info.slash_commands.iter().map(|c| c.name.as_str()).collect();
        let universal: Vec<_> = UNIVERSAL_SLASH_COMMANDS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names[..universal.len()], universal[..]);
        assert_eq!(names[universal.len()..], ["compact", "review"]);
    }

    #[test]
    fn agent_command_cannot_shadow_a_universal_one() {
        let info = make_agent_info(&declaration(), None, None, vec![agent("status")]);
        let status: Vec<_> = info.slash_commands.iter().filter(|c| c.name == "status").collect();
        assert_eq!(status.len(), 1);
        assert_eq!(status[0].source, CommandSource::Bridge);
    }

    #[test]
    fn capabilities_come_from_the_declaration() {
        let info = make_agent_info(&declaration(), None, Some("m1".into()), vec![]);
        assert!(info.capabilities.cap_thinking && info.capabilities.provides_usage);
        assert!(!info.capabilities.cap_images);
        assert_eq!((info.agent_id.as_str(), info.name.as_str(), info.model.as_deref()), ("echo", "Echo", Some("m1")));
    }
}
