//! The terminull adapter for Kilo (`@kilocode/cli`), an OpenCode fork.
//!
//! Kilo's `kilo acp` speaks the same Agent Client Protocol, with the same updates and
//! the same session settings, as `opencode acp`, so this crate is the OpenCode adapter
//! ([`terminull_opencode`]) with Kilo's [`Flavor`]: its names, its `KILO_` environment
//! variables and its configuration file. See `docs/adapters/kilo.md`.

#![warn(missing_docs)]

use terminull_opencode::{Flavor, OpenCodeFamily};

/// Kilo (`@kilocode/cli`, binary `kilo`).
#[derive(Debug, Clone, Copy)]
pub struct Kilo;

impl Flavor for Kilo {
    const AGENT_ID: &'static str = "kilo";
    const DISPLAY_NAME: &'static str = "Kilo";
    const CLI_BINARY: &'static str = "kilo";
    const VERIFIED_AGAINST: &'static str = "7.7.7";
    const ENV_PREFIX: &'static str = "KILO";
    const CONFIG_FILE: &'static str = ".config/kilo/kilo.json";
}

/// The Kilo adapter.
pub type KiloAdapter = OpenCodeFamily<Kilo>;

#[cfg(test)]
mod tests {
    use terminull_adapter_sdk::adapter::declaration;
    use terminull_adapter_sdk::prelude::LeaseKind;

    use super::*;

    #[test]
    fn the_declaration_is_kilos() {
        let d = declaration::<KiloAdapter>();
        assert_eq!((d.agent_id.as_str(), d.display_name.as_str()), ("kilo", "Kilo"));
        assert_eq!(d.cli_binary.as_deref(), Some("kilo"));
        assert_eq!(d.verified_against.as_deref(), Some("7.7.7"));
        assert_eq!(d.lease, LeaseKind::Persistent);
        assert_eq!(Kilo::config_hint(), " (set up in ~/.config/kilo/kilo.json or $KILO_CONFIG_CONTENT)");
    }
}
