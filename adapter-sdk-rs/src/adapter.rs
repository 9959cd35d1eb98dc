//! The [`Adapter`] trait: the adapter contract of
//! [docs/adapter-protocol.md](../../docs/adapter-protocol.md) in Rust.
//!
//! The declaration is made of associated consts and types with no defaults for what
//! the spec calls "explicit opt-out": an adapter that does not state its capability
//! flags ([`Caps`] has no `Default`), whether it provides models and whether it
//! provides usage does not compile. The two optional surfaces are types, so
//! claiming one without implementing it does not compile either.
//!
//! A complete minimal adapter:
//!
//! ```
//! use terminull_adapter_sdk::prelude::*;
//!
//! struct Quiet;
//!
//! impl Adapter for Quiet {
//!     const AGENT_ID: &'static str = "quiet";
//!     const DISPLAY_NAME: &'static str = "Quiet";
//!     const CLI_BINARY: Option<&'static str> = None;
//!     const LEASE: LeaseKind = LeaseKind::PerTurn;
//!     const INIT_PARAMS: &'static [InitParam] = &[];
//!     const CAPS: Caps = Caps {
//!         images: false, documents: false, thinking: false, permissions: false,
//!         subagents: false, interrupt: false, input_during_turn: false, terminal: false,
//!     };
//!     type Models = NotProvided;
//!     type Usage = NotProvided;
//!     async fn start(_: StartParams, _: &Session) -> Result<(Self, StartInfo), AdapterError> {
//!         Ok((Quiet, StartInfo::default()))
//!     }
//!     async fn send(&mut self, _: UserMessage, _: &mut Turn) -> Result<EndReason, AdapterError> {
//!         Ok(EndReason::Completed)
//!     }
//! }
//! assert!(!declaration::<Quiet>().capabilities.provides_usage);
//! ```
//!
//! Leaving out `type Usage` (provides_usage not stated):
//!
//! ```compile_fail,E0046
//! use terminull_adapter_sdk::prelude::*;
//!
//! struct Quiet;
//!
//! impl Adapter for Quiet {
//!     const AGENT_ID: &'static str = "quiet";
//!     const DISPLAY_NAME: &'static str = "Quiet";
//!     const CLI_BINARY: Option<&'static str> = None;
//!     const LEASE: LeaseKind = LeaseKind::PerTurn;
//!     const INIT_PARAMS: &'static [InitParam] = &[];
//!     const CAPS: Caps = Caps {
//!         images: false, documents: false, thinking: false, permissions: false,
//!         subagents: false, interrupt: false, input_during_turn: false, terminal: false,
//!     };
//!     type Models = NotProvided;
//!     // `type Usage` is missing: provides_usage was not stated, so this does not compile.
//!     async fn start(_: StartParams, _: &Session) -> Result<(Self, StartInfo), AdapterError> {
//!         Ok((Quiet, StartInfo::default()))
//!     }
//!     async fn send(&mut self, _: UserMessage, _: &mut Turn) -> Result<EndReason, AdapterError> {
//!         Ok(EndReason::Completed)
//!     }
//! }
//! ```
//!
//! Claiming `provides_models` without implementing [`ListModels`]:
//!
//! ```compile_fail,E0277
//! use terminull_adapter_sdk::prelude::*;
//!
//! struct Liar;
//!
//! impl Adapter for Liar {
//!     const AGENT_ID: &'static str = "liar";
//!     const DISPLAY_NAME: &'static str = "Liar";
//!     const CLI_BINARY: Option<&'static str> = None;
//!     const LEASE: LeaseKind = LeaseKind::PerTurn;
//!     const INIT_PARAMS: &'static [InitParam] = &[];
//!     const CAPS: Caps = Caps {
//!         images: false, documents: false, thinking: false, permissions: false,
//!         subagents: false, interrupt: false, input_during_turn: false, terminal: false,
//!     };
//!     // Claims provides_models without implementing ListModels: does not compile.
//!     type Models = Provided;
//!     type Usage = NotProvided;
//!     async fn start(_: StartParams, _: &Session) -> Result<(Self, StartInfo), AdapterError> {
//!         Ok((Liar, StartInfo::default()))
//!     }
//!     async fn send(&mut self, _: UserMessage, _: &mut Turn) -> Result<EndReason, AdapterError> {
//!         Ok(EndReason::Completed)
//!     }
//! }
//! ```
//!
//! Leaving a capability flag out:
//!
//! ```compile_fail,E0063
//! use terminull_adapter_sdk::prelude::*;
//! // A capability left out of `Caps` does not compile either (no `Default`, no `..`).
//! const CAPS: Caps = Caps { images: false, documents: false };
//! ```
//!
//! The same with [`caps!`](crate::caps), which writes the eight flags from two lists:
//!
//! ```compile_fail,E0063
//! use terminull_adapter_sdk::prelude::*;
//! // `terminal` is in neither list.
//! const CAPS: Caps = caps! {
//!     supported: [thinking, interrupt],
//!     unsupported: [images, documents, permissions, subagents, input_during_turn],
//! };
//! ```
//!
//! and a flag named in both lists:
//!
//! ```compile_fail,E0062
//! use terminull_adapter_sdk::prelude::*;
//! const CAPS: Caps = caps! {
//!     supported: [thinking, interrupt, terminal],
//!     unsupported: [images, documents, permissions, subagents, input_during_turn, terminal],
//! };
//! ```

use std::future::Future;
use std::time::Duration;

use terminull_protocol::adapter::{
    Declaration, DetectResult, HandoffHook, InitParam, LeaseKind, ModelInfo, PROTOCOL_VERSION, StartParams,
};
use terminull_protocol::blocks::{EndReason, SlashCommand, Usage, UserMessage};
use terminull_protocol::capabilities::Capabilities;

pub use crate::error::AdapterError;
use crate::handoff::hooks::{Handoff, NoHandoff};
use crate::session::{Session, Turn};

/// The eight capability flags. No `Default`: every adapter writes all eight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// `cap_images`: `send` may carry image attachments.
    pub images: bool,
    /// `cap_documents`: `send` may carry other files.
    pub documents: bool,
    /// `cap_thinking`: the adapter streams thinking blocks.
    pub thinking: bool,
    /// `cap_permissions`: the adapter asks through [`Turn::ask_permission`].
    pub permissions: bool,
    /// `cap_subagents`: tool calls may nest via `parent_id`.
    pub subagents: bool,
    /// `cap_interrupt`: the adapter stops its turn when [`Turn::is_interrupted`] becomes true.
    pub interrupt: bool,
    /// `cap_input_during_turn`: the adapter reads [`Turn::next_input`] while a turn runs.
    pub input_during_turn: bool,
    /// `cap_terminal`: the agent can open a terminal on the device.
    pub terminal: bool,
}

/// Writes [`Caps`] from two lists of flag names, what the adapter supports and what it
/// does not. Together they must name each of the eight flags exactly once: a flag left
/// out, or named twice, does not compile, so every adapter still decides each one.
///
/// ```
/// use terminull_adapter_sdk::prelude::*;
/// const CAPS: Caps = caps! {
///     supported: [thinking, interrupt],
///     unsupported: [images, documents, permissions, subagents, input_during_turn, terminal],
/// };
/// assert!(CAPS.interrupt && !CAPS.images);
/// ```
#[macro_export]
macro_rules! caps {
    (supported: [$($yes:ident),* $(,)?], unsupported: [$($no:ident),* $(,)?] $(,)?) => {
        $crate::Caps { $($yes: true,)* $($no: false,)* }
    };
}

/// Marker for an optional surface the adapter implements (`type Models = Provided`
/// requires `impl ListModels`, `type Usage = Provided` requires `impl GetUsage`).
#[derive(Debug, Clone, Copy)]
pub enum Provided {}

/// Marker for an optional surface the adapter explicitly does not offer.
#[derive(Debug, Clone, Copy)]
pub enum NotProvided {}

/// The `list_models` surface. Class-level: the picker is filled before a session exists.
pub trait ListModels {
    /// Models for the new-session picker.
    fn list_models() -> impl Future<Output = Result<Vec<ModelInfo>, AdapterError>>;
}

/// The `get_usage` surface.
pub trait GetUsage {
    /// Cost and token totals of this session.
    fn get_usage(&mut self) -> impl Future<Output = Result<Usage, AdapterError>>;
}

/// Connects the `Models` type of an adapter to `list_models`.
pub trait ModelSurface<A> {
    /// The `provides_models` flag.
    const PROVIDED: bool;
    /// Answers `list_models`.
    fn list() -> impl Future<Output = Result<Vec<ModelInfo>, AdapterError>>;
}

impl<A> ModelSurface<A> for NotProvided {
    const PROVIDED: bool = false;
    async fn list() -> Result<Vec<ModelInfo>, AdapterError> {
        Err(AdapterError::not_supported("list_models"))
    }
}

impl<A: ListModels> ModelSurface<A> for Provided {
    const PROVIDED: bool = true;
    fn list() -> impl Future<Output = Result<Vec<ModelInfo>, AdapterError>> {
        A::list_models()
    }
}

/// Connects the `Usage` type of an adapter to `get_usage`.
pub trait UsageSurface<A> {
    /// The `provides_usage` flag.
    const PROVIDED: bool;
    /// Answers `get_usage`.
    fn usage(adapter: &mut A) -> impl Future<Output = Result<Usage, AdapterError>>;
}

impl<A> UsageSurface<A> for NotProvided {
    const PROVIDED: bool = false;
    async fn usage(_: &mut A) -> Result<Usage, AdapterError> {
        Err(AdapterError::not_supported("get_usage"))
    }
}

impl<A: GetUsage> UsageSurface<A> for Provided {
    const PROVIDED: bool = true;
    fn usage(adapter: &mut A) -> impl Future<Output = Result<Usage, AdapterError>> {
        adapter.get_usage()
    }
}

/// What `start` tells the bridge besides the declaration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartInfo {
    /// The agent CLI's version, when known.
    pub version: Option<String>,
    /// The model the session runs, when known.
    pub model: Option<String>,
    /// The agent's own slash commands (the universal ones are added in front).
    pub slash_commands: Vec<SlashCommand>,
}

/// An agent adapter. One value of the implementing type is one session.
///
/// Only what the bridge talks to is here; [`crate::serve`] runs the protocol loop.
pub trait Adapter: Sized + 'static {
    /// `agent_id`: 1–64 of `a-z 0-9 _ -`.
    const AGENT_ID: &'static str;
    /// `display_name`.
    const DISPLAY_NAME: &'static str;
    /// `cli_binary`: the CLI the default [`Adapter::detect`] probes, if any.
    const CLI_BINARY: Option<&'static str>;
    /// The eight capability flags.
    const CAPS: Caps;
    /// `lease`: how the agent is held between turns.
    const LEASE: LeaseKind;
    /// `accepted_init_params`: `start` receives only these.
    const INIT_PARAMS: &'static [InitParam];
    /// `handoff_hooks`: the hooks this adapter implements (default: none).
    const HANDOFF_HOOKS: &'static [HandoffHook] = &[];
    /// The adapter's own version (defaults to none).
    const ADAPTER_VERSION: Option<&'static str> = None;
    /// `verified_against`: the version of the agent CLI this adapter was checked
    /// against. `None` (the default) says it was never run against the real CLI, and
    /// `terminull agents` shows it as not verified.
    const VERIFIED_AGAINST: Option<&'static str> = None;

    /// `provides_models`: [`Provided`] (with `impl ListModels`) or [`NotProvided`].
    type Models: ModelSurface<Self>;
    /// `provides_usage`: [`Provided`] (with `impl GetUsage`) or [`NotProvided`].
    type Usage: UsageSurface<Self>;

    /// Starts the session. `init` carries only the init params in
    /// [`INIT_PARAMS`](Self::INIT_PARAMS); report the agent's own session id through
    /// `session` when it is known.
    fn start(init: StartParams, session: &Session) -> impl Future<Output = Result<(Self, StartInfo), AdapterError>>;

    /// Runs one turn for one user message, emitting blocks through `turn`. Return
    /// how the turn ended; the SDK closes anything left open and sends the single
    /// `session_end`. An `Err` ends the turn with an error block and reason `error`.
    fn send(&mut self, message: UserMessage, turn: &mut Turn) -> impl Future<Output = Result<EndReason, AdapterError>>;

    /// Ends the session and releases the agent. Called once, before the process exits.
    fn stop(&mut self) -> impl Future<Output = ()> {
        async {}
    }

    /// Lets go of a persistent agent between turns (only when `Release` is declared).
    fn release(&mut self) -> impl Future<Output = Result<(), AdapterError>> {
        async { Err(AdapterError::not_supported("release")) }
    }

    /// Is the agent installed here. Default: `which CLI_BINARY` + `--version`, given 25 s
    /// (a CLI's first `--version` on a loaded machine took over 10 s; the bridge waits 30 s).
    fn detect() -> impl Future<Output = DetectResult> {
        async {
            match Self::CLI_BINARY {
                Some(binary) => crate::detect::detect_cli(binary, Duration::from_secs(25)).await,
                None => DetectResult { installed: true, version: None, path: None, reason: None },
            }
        }
    }

    /// The handoff hooks in [`HANDOFF_HOOKS`](Self::HANDOFF_HOOKS) other than
    /// `release`, answered by one [`Handoff`] (see [`crate::handoff::hooks`]). Default:
    /// none. The serve loop calls it only for a declared hook.
    fn handoff() -> Option<impl Handoff> {
        None::<NoHandoff>
    }
}

/// Every init param, in the protocol's order: the `INIT_PARAMS` of an adapter that
/// takes them all (the working directory, model, binary, session to resume, the
/// `session_id` notification, effort and permission mode).
pub const EVERY_INIT_PARAM: &[InitParam] = &InitParam::ALL;

/// The declaration (`initialize` result) of adapter `A`, built from its consts.
pub fn declaration<A: Adapter>() -> Declaration {
    let c = A::CAPS;
    Declaration {
        protocol_version: PROTOCOL_VERSION,
        agent_id: A::AGENT_ID.into(),
        display_name: A::DISPLAY_NAME.to_owned(),
        cli_binary: A::CLI_BINARY.map(str::to_owned),
        adapter_version: A::ADAPTER_VERSION.map(str::to_owned),
        verified_against: A::VERIFIED_AGAINST.map(str::to_owned),
        capabilities: Capabilities {
            cap_images: c.images,
            cap_documents: c.documents,
            cap_thinking: c.thinking,
            cap_permissions: c.permissions,
            cap_subagents: c.subagents,
            cap_interrupt: c.interrupt,
            cap_input_during_turn: c.input_during_turn,
            cap_terminal: c.terminal,
            provides_models: <A::Models as ModelSurface<A>>::PROVIDED,
            provides_usage: <A::Usage as UsageSurface<A>>::PROVIDED,
        },
        lease: A::LEASE,
        accepted_init_params: A::INIT_PARAMS.to_vec(),
        handoff_hooks: A::HANDOFF_HOOKS.to_vec(),
    }
}
