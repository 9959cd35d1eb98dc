//! The bridge's home directory and its configuration file.
//!
//! Home is `--home DIR`, else `$TERMINULL_HOME`, else `~/.terminull`. It holds:
//! - `config.toml` — optional; every key optional (docs/configuration.md);
//! - `ext_adapters/` — drop-in adapter executables;
//! - `sessions/` — session history;
//! - `bridge.sock` — the local control socket.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Where the bridge keeps its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

/// Why the home or its configuration could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HomeError {
    /// No `--home`, no `TERMINULL_HOME` and no `HOME` to derive it from.
    #[error("no home directory: pass --home or set TERMINULL_HOME")]
    NoHome,
    /// `config.toml` exists but cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `config.toml` is not valid.
    #[error("{path}: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line and column. Not a `#[source]`: its text is the
        /// message already.
        problem: ConfigSyntaxError,
    },
}

/// `config.toml`'s text is not a valid [`Config`]: the TOML decoder's message, which
/// names the line and column (and the unknown key, for a typo).
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.to_string().trim_end())]
pub struct ConfigSyntaxError(#[from] toml::de::Error);

impl Home {
    /// `flag`, else `$TERMINULL_HOME`, else `$HOME/.terminull`.
    pub fn resolve(flag: Option<PathBuf>) -> Result<Self, HomeError> {
        Self::resolve_with(flag, std::env::var_os("TERMINULL_HOME"), std::env::var_os("HOME"))
    }

    /// [`resolve`](Self::resolve) with the environment given, for tests.
    pub fn resolve_with(
        flag: Option<PathBuf>,
        terminull_home: Option<std::ffi::OsString>,
        home: Option<std::ffi::OsString>,
    ) -> Result<Self, HomeError> {
        let root = flag
            .or_else(|| terminull_home.filter(|v| !v.is_empty()).map(PathBuf::from))
            .or_else(|| home.filter(|v| !v.is_empty()).map(|h| Path::new(&h).join(".terminull")))
            .ok_or(HomeError::NoHome)?;
        Ok(Self { root })
    }

    /// A home at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The home directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Drop-in adapters.
    pub fn ext_adapters(&self) -> PathBuf {
        self.root.join("ext_adapters")
    }

    /// Session history.
    pub fn sessions(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// The configuration file.
    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// The local control socket.
    pub fn socket(&self) -> PathBuf {
        self.root.join("bridge.sock")
    }

    /// The bridge's identity (Ed25519 + X25519 secrets, mode 0600).
    pub fn identity_file(&self) -> PathBuf {
        self.root.join("identity.json")
    }

    /// The paired devices (public keys, mode 0600).
    pub fn devices_file(&self) -> PathBuf {
        self.root.join("devices.json")
    }

    /// Open pairing offers and their results.
    pub fn pairing_dir(&self) -> PathBuf {
        self.root.join("pairing")
    }

    /// This machine's own identity as a device (for `attach`/`chat` through a relay).
    pub fn device_dir(&self) -> PathBuf {
        self.root.join("device")
    }

    /// Where a running daemon writes the URL devices reach its LAN server at (removed
    /// when it stops); `terminull pair` puts it in the link.
    pub fn lan_url_file(&self) -> PathBuf {
        self.root.join("lan-url")
    }

    /// Reads `config.toml`; a missing file is the default configuration.
    pub fn load_config(&self) -> Result<Config, HomeError> {
        let path = self.config_file();
        match std::fs::read_to_string(&path) {
            Ok(text) => Config::parse(&text).map_err(|problem| HomeError::Invalid { path, problem }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(source) => Err(HomeError::Read { path, source }),
        }
    }
}

/// `config.toml`. Unknown keys are refused so that a typo does not pass silently.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Per-agent settings, keyed by agent id (`[agents.claude]`).
    #[serde(default)]
    pub agents: BTreeMap<String, AgentConfig>,
    /// Agents that speak ACP, declared here and served by `terminull-acp`, keyed by
    /// agent id (`[acp_agents.goose]`); see docs/acp.md.
    #[serde(default)]
    pub acp_agents: BTreeMap<String, AcpAgentConfig>,
    /// The relay the bridge connects to (`[relay] url = "wss://…"`), if any.
    #[serde(default)]
    pub relay: Option<RelayConfig>,
    /// The LAN server (`[lan] listen = "0.0.0.0:8478"`); present means enabled.
    #[serde(default)]
    pub lan: Option<LanSection>,
    /// Terminal handoff (`[handoff] poll_ms = 2000`).
    #[serde(default)]
    pub handoff: Option<HandoffSection>,
    /// Limits on what the bridge runs (`[limits] max_live_sessions = 32`); every key
    /// optional, docs/bridge.md "Files, locks and limits".
    #[serde(default)]
    pub limits: LimitsSection,
    /// Terminals (`[terminals] enabled = false` turns them off); docs/terminals.md.
    #[serde(default)]
    pub terminals: crate::terminal::TerminalsSection,
}

/// `[limits]` in the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    /// The most sessions live at once (each may hold an adapter process); default
    /// [`DEFAULT_MAX_LIVE_SESSIONS`]. One more is refused with `busy`.
    #[serde(default)]
    pub max_live_sessions: Option<usize>,
    /// Seconds a session may sit with no follower and no running turn before its
    /// adapter is stopped (the session stays resumable); default [`DEFAULT_IDLE_SECS`].
    #[serde(default)]
    pub idle_secs: Option<u64>,
    /// Seconds each adapter has to answer `initialize` during a scan; default
    /// [`DEFAULT_SCAN_TIMEOUT_SECS`].
    #[serde(default)]
    pub scan_timeout_secs: Option<u64>,
}

/// Live sessions allowed at once when `[limits] max_live_sessions` is not set.
pub const DEFAULT_MAX_LIVE_SESSIONS: usize = 32;
/// Idle seconds before a session's adapter is stopped, when `[limits] idle_secs` is not set.
pub const DEFAULT_IDLE_SECS: u64 = 900;
/// Seconds for each adapter's handshake during a scan, when `[limits] scan_timeout_secs` is not set.
pub const DEFAULT_SCAN_TIMEOUT_SECS: u64 = 10;

impl LimitsSection {
    /// `max_live_sessions`, or its default (at least 1).
    pub fn max_live_sessions(&self) -> usize {
        self.max_live_sessions.unwrap_or(DEFAULT_MAX_LIVE_SESSIONS).max(1)
    }

    /// `idle_secs` as a duration, or its default.
    pub fn idle(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.idle_secs.unwrap_or(DEFAULT_IDLE_SECS))
    }

    /// `scan_timeout_secs` as a duration, or its default (at least 1 s).
    pub fn scan_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.scan_timeout_secs.unwrap_or(DEFAULT_SCAN_TIMEOUT_SECS).max(1))
    }
}

/// `[handoff]` in the configuration (docs/session-handoff.md); `Config::session_policy`
/// (in [`crate::session::policy`], which depends on this module, not the reverse) turns
/// it into the session policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandoffSection {
    /// How often a parked session checks the terminal and mirrors it, in milliseconds.
    pub poll_ms: u64,
}

/// `[lan]` in the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LanSection {
    /// The address the LAN server binds.
    pub listen: String,
    /// Advertise the LAN server by mDNS (`_terminull._tcp`); on by default.
    #[serde(default = "advertise_by_default")]
    pub mdns: bool,
}

fn advertise_by_default() -> bool {
    true
}

/// `[relay]` in the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayConfig {
    /// The relay's base URL (`wss://relay.example` or `ws://127.0.0.1:8477`).
    pub url: String,
}

/// An ACP agent declared in the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcpAgentConfig {
    /// The display name (defaults to the agent id).
    #[serde(default)]
    pub name: Option<String>,
    /// The agent's executable (a name on `PATH` or a path).
    pub command: String,
    /// Its arguments (`["acp"]`, `["--acp"]`, …).
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment for the agent (on top of the bridge's own and `[agents.<id>].env`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `persistent` (the default: one agent process per session) or `per_turn` (a new
    /// process per turn, loading the session; needs the agent's `loadSession`).
    #[serde(default)]
    pub lease: Option<terminull_protocol::adapter::LeaseKind>,
}

/// Settings of one agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Extra environment for the adapter process (on top of the bridge's own).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The agent CLI to use, passed as the `binary` init param when the adapter accepts it.
    #[serde(default)]
    pub binary: Option<String>,
    /// Leave this agent out entirely.
    #[serde(default)]
    pub disabled: bool,
}

impl Config {
    /// Parses the TOML text.
    pub fn parse(text: &str) -> Result<Self, ConfigSyntaxError> {
        Ok(toml::from_str(text)?)
    }

    /// The settings of `agent_id` (defaults when not configured).
    pub fn agent(&self, agent_id: &str) -> AgentConfig {
        self.agents.get(agent_id).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_comes_from_the_flag_then_the_env_then_home() {
        let r = |flag: Option<&str>, th: Option<&str>, h: Option<&str>| {
            Home::resolve_with(flag.map(PathBuf::from), th.map(Into::into), h.map(Into::into)).map(|h| h.root)
        };
        assert_eq!(r(Some("/f"), Some("/t"), Some("/h")).unwrap(), PathBuf::from("/f"));
        assert_eq!(r(None, Some("/t"), Some("/h")).unwrap(), PathBuf::from("/t"));
        assert_eq!(r(None, Some(""), Some("/h")).unwrap(), PathBuf::from("/h/.terminull"));
        assert!(matches!(r(None, None, None), Err(HomeError::NoHome)));
    }

    #[test]
    fn config_keys_are_all_optional_and_typos_are_refused() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
        let c = Config::parse(
            "[agents.claude]\nenv = { ANTHROPIC_BASE_URL = \"http://127.0.0.1:9\" }\nbinary = \"/opt/claude\"\n",
        )
        .unwrap();
        let claude = c.agent("claude");
        assert_eq!(claude.env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9");
        assert_eq!(claude.binary.as_deref(), Some("/opt/claude"));
        assert!(!c.agent("codex").disabled);
        let e = Config::parse("[agents.claude]\nbinnary = \"x\"\n").unwrap_err().to_string();
        assert!(e.contains("binnary"), "{e}");
    }

    #[test]
    fn acp_agents_need_a_command_and_refuse_unknown_keys() {
        let c = Config::parse(
            "[acp_agents.goose]\nname = \"Goose\"\ncommand = \"goose\"\nargs = [\"acp\"]\n\
             env = { GOOSE_MODE = \"auto\" }\nlease = \"per_turn\"\n[acp_agents.plain]\ncommand = \"/opt/a\"\n",
        )
        .unwrap();
        let goose = &c.acp_agents["goose"];
        assert_eq!(
            (goose.name.as_deref(), goose.command.as_str(), goose.args.as_slice()),
            (Some("Goose"), "goose", &["acp".to_owned()][..])
        );
        assert_eq!(goose.env["GOOSE_MODE"], "auto");
        assert_eq!(goose.lease, Some(terminull_protocol::adapter::LeaseKind::PerTurn));
        assert_eq!(c.acp_agents["plain"], AcpAgentConfig { command: "/opt/a".into(), ..AcpAgentConfig::default() });
        let e = Config::parse("[acp_agents.x]\nargs = []\n").unwrap_err().to_string();
        assert!(e.contains("command"), "{e}");
        let e = Config::parse("[acp_agents.x]\ncommand = \"a\"\ncmd = \"b\"\n").unwrap_err().to_string();
        assert!(e.contains("cmd"), "{e}");
    }

    #[test]
    fn missing_config_file_is_the_default_and_a_bad_one_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        assert_eq!(home.load_config().unwrap(), Config::default());
        std::fs::write(home.config_file(), "agents = 3").unwrap();
        let e = home.load_config().unwrap_err().to_string();
        assert!(e.contains("config.toml"), "{e}");
    }
}
