//! The agents under test: which CLI each adapter runs, where the pinned CLIs are
//! installed, and the environment that points a CLI at the scripted model server.

use std::path::{Path, PathBuf};

/// Set to `1` where the live tests must run (CI): a missing CLI is then a failure,
/// not a skip.
pub const LIVE_ENV: &str = "TERMINULL_LIVE_AGENTS";

/// Set to `1` to save each live run's recording as the agent's fixture.
pub const UPDATE_ENV: &str = "TERMINULL_UPDATE_AGENT_FIXTURES";

/// One built-in adapter and its CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// `claude-code`, running `claude`.
    ClaudeCode,
    /// `codex`, running `codex`.
    Codex,
}

impl Agent {
    /// The adapter's agent id.
    pub fn id(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
        }
    }

    /// The CLI's executable name.
    pub fn cli(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude",
            Agent::Codex => "codex",
        }
    }

    /// The npm package pinned in tests/agents/package.json.
    pub fn package(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "@anthropic-ai/claude-code",
            Agent::Codex => "@openai/codex",
        }
    }

    /// The environment that runs the CLI offline against the model server at
    /// `model_url` (`http://127.0.0.1:PORT`), with `home` as its throwaway HOME. Writes
    /// the configuration files the CLI needs there.
    pub fn environment(self, home: &Path, model_url: &str) -> std::io::Result<Vec<(String, String)>> {
        let home_s = home.display().to_string();
        let pairs: Vec<(&str, String)> = match self {
            Agent::ClaudeCode => vec![
                ("HOME", home_s),
                ("ANTHROPIC_BASE_URL", model_url.to_owned()),
                ("ANTHROPIC_API_KEY", "sk-ant-mock-key".into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("DISABLE_TELEMETRY", "1".into()),
                ("DISABLE_AUTOUPDATER", "1".into()),
                ("DISABLE_ERROR_REPORTING", "1".into()),
                ("DISABLE_BUG_COMMAND", "1".into()),
                // Without it, a model error is retried ten times over three minutes.
                ("CLAUDE_CODE_MAX_RETRIES", "0".into()),
            ],
            Agent::Codex => {
                let codex_home = home.join(".codex");
                std::fs::create_dir_all(&codex_home)?;
                std::fs::write(codex_home.join("config.toml"), codex_config(model_url))?;
                vec![
                    ("HOME", home_s),
                    ("CODEX_HOME", codex_home.display().to_string()),
                    ("MOCK_API_KEY", "sk-mock".into()),
                ]
            }
        };
        Ok(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }
}

/// Codex's config.toml for the model server: the Responses API (the only one it
/// speaks), no retries, no analytics.
fn codex_config(model_url: &str) -> String {
    format!(
        r#"model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "workspace-write"

[model_providers.mock]
name = "Mock"
base_url = "{model_url}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false
"#
    )
}

/// The directory with the installed CLIs (`<cache>/bin`), as scripts/install-agents.sh
/// links them: the cache is `$TERMINULL_AGENTS_DIR`, else
/// `${XDG_CACHE_HOME:-$HOME/.cache}/terminull/agents`.
pub fn installed_bin_dir() -> PathBuf {
    let base = match std::env::var_os("TERMINULL_AGENTS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .unwrap_or_else(|| PathBuf::from("/tmp"));
            cache.join("terminull/agents")
        }
    };
    base.join("bin")
}

/// Whether live tests must run: `TERMINULL_LIVE_AGENTS=1`.
pub fn live_required() -> bool {
    std::env::var(LIVE_ENV).is_ok_and(|v| v == "1")
}

/// Whether to refresh the fixtures from live runs: `TERMINULL_UPDATE_AGENT_FIXTURES=1`.
pub fn update_fixtures() -> bool {
    std::env::var(UPDATE_ENV).is_ok_and(|v| v == "1")
}

/// The pinned version of `agent`'s CLI, read from tests/agents/package.json.
pub fn pinned_version(agent: Agent) -> String {
    let path = crate::workspace::root().join("tests/agents/package.json");
    let text = std::fs::read_to_string(&path).expect("tests/agents/package.json is readable");
    let json: serde_json::Value = serde_json::from_str(&text).expect("tests/agents/package.json is JSON");
    json["dependencies"][agent.package()].as_str().expect("the package is pinned").to_owned()
}
