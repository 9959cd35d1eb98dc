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
    /// `gemini`, running `gemini --acp`.
    Gemini,
    /// `opencode`, running `opencode acp`.
    OpenCode,
    /// `kilo`, running `kilo acp`.
    Kilo,
    /// `hermes`, running `hermes acp`.
    Hermes,
    /// `pi`, running `pi`.
    Pi,
    /// `droid`, running `droid exec`.
    Droid,
    /// `qwen`, running `qwen --acp`.
    Qwen,
    /// `copilot`, running `copilot --acp`.
    Copilot,
}

/// How an agent's CLI processes carry a conversation from turn to turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// One process serves every turn of a session.
    Persistent,
    /// A process per turn; after the first, its arguments hold this resume flag.
    PerTurn {
        /// The argument that names the conversation to continue (`resume`, `--session`).
        resume_flag: &'static str,
    },
    /// A process per turn whose resume needs the vendor's cloud: offline, the second
    /// turn's resume fails and the adapter forks the conversation instead (droid), so
    /// that turn takes two processes, the second with this flag.
    PerTurnForkedOffline {
        /// The argument that forks the conversation (`--fork`).
        fork_flag: &'static str,
    },
}

/// Where an agent's CLI pin is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// An npm package in tests/agents/package.json.
    Npm(&'static str),
    /// A PyPI package in tests/agents/hermes-requirements.txt.
    PyPi(&'static str),
    /// An npm package in tests/agents/qwen/package.json (installed apart: no lock file
    /// can hold Qwen Code's optional packages).
    NpmApart(&'static str),
}

impl Agent {
    /// Every agent with a live test.
    pub const ALL: [Agent; 10] = [
        Agent::ClaudeCode,
        Agent::Codex,
        Agent::Gemini,
        Agent::OpenCode,
        Agent::Kilo,
        Agent::Hermes,
        Agent::Pi,
        Agent::Droid,
        Agent::Qwen,
        Agent::Copilot,
    ];

    /// The adapter's agent id.
    pub fn id(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::OpenCode => "opencode",
            Agent::Kilo => "kilo",
            Agent::Hermes => "hermes",
            Agent::Pi => "pi",
            Agent::Droid => "droid",
            Agent::Qwen => "qwen",
            Agent::Copilot => "copilot",
        }
    }

    /// The CLI's executable name.
    pub fn cli(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude",
            // Every other CLI is named like its adapter.
            other => other.id(),
        }
    }

    /// The package pinned for the CLI.
    pub fn pin(self) -> Pin {
        match self {
            Agent::ClaudeCode => Pin::Npm("@anthropic-ai/claude-code"),
            Agent::Codex => Pin::Npm("@openai/codex"),
            Agent::Gemini => Pin::Npm("@google/gemini-cli"),
            Agent::OpenCode => Pin::Npm("opencode-linux-x64"),
            Agent::Kilo => Pin::Npm("@kilocode/cli-linux-x64"),
            Agent::Hermes => Pin::PyPi("hermes-agent"),
            Agent::Pi => Pin::Npm("@mariozechner/pi-coding-agent"),
            Agent::Droid => Pin::Npm("@factory/cli-linux-x64"),
            Agent::Qwen => Pin::NpmApart("@qwen-code/qwen-code"),
            Agent::Copilot => Pin::Npm("@github/copilot"),
        }
    }

    /// How the adapter holds the CLI between turns.
    pub fn lease(self) -> Lease {
        match self {
            Agent::Droid => Lease::PerTurnForkedOffline { fork_flag: "--fork" },
            _ => Lease::Persistent,
        }
    }

    /// Whether the CLI continues a conversation in a terminal offline (droid fetches a
    /// resumed session from Factory's cloud: docs/session-handoff.md).
    pub fn terminal_resumes_offline(self) -> bool {
        self != Agent::Droid
    }

    /// Whether the adapter can continue a conversation the CLI started in a terminal
    /// (Hermes' ACP server loads only the conversations its ACP side started:
    /// docs/session-handoff.md).
    pub fn continues_terminal_conversations(self) -> bool {
        self != Agent::Hermes
    }

    /// True when the CLI streams text as it is generated (so an interrupt can wait for
    /// the first text); false when it prints only finished items.
    pub fn streams_text(self) -> bool {
        !matches!(self, Agent::Droid)
    }

    /// The model a test session asks for, for CLIs that need one named (the custom
    /// providers pointing at the model server).
    pub fn test_model(self) -> Option<&'static str> {
        match self {
            Agent::Pi => Some("mockant/mock-claude"),
            Agent::Droid => Some("custom:mock-claude"),
            _ => None,
        }
    }

    /// The permission mode a test session asks for when its scenario names none: Qwen
    /// Code's `default` (asks before edits and shell commands), since its own default,
    /// `auto`, has the model classify each action.
    pub fn test_permission_mode(self) -> Option<&'static str> {
        match self {
            Agent::Qwen => Some("default"),
            _ => None,
        }
    }

    /// The environment that runs the CLI offline against the model server at
    /// `model_url` (`http://127.0.0.1:PORT`), with `home` as its throwaway HOME. Writes
    /// the configuration files the CLI needs there.
    pub fn environment(self, home: &Path, model_url: &str) -> std::io::Result<Vec<(String, String)>> {
        let home_s = home.display().to_string();
        let write = |relative: &str, content: &str| -> std::io::Result<()> {
            let path = home.join(relative);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(path, content)
        };
        let xdg = |pairs: &mut Vec<(&str, String)>| {
            pairs.push(("XDG_CONFIG_HOME", format!("{home_s}/.config")));
            pairs.push(("XDG_DATA_HOME", format!("{home_s}/.local/share")));
            pairs.push(("XDG_CACHE_HOME", format!("{home_s}/.cache")));
            pairs.push(("XDG_STATE_HOME", format!("{home_s}/.local/state")));
        };
        let mut pairs: Vec<(&str, String)> = vec![("HOME", home_s.clone())];
        match self {
            Agent::ClaudeCode => pairs.extend([
                ("ANTHROPIC_BASE_URL", model_url.to_owned()),
                ("ANTHROPIC_API_KEY", "sk-ant-mock-key".into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("DISABLE_TELEMETRY", "1".into()),
                ("DISABLE_AUTOUPDATER", "1".into()),
                ("DISABLE_ERROR_REPORTING", "1".into()),
                ("DISABLE_BUG_COMMAND", "1".into()),
                // Without it, a model error is retried ten times over three minutes.
                ("CLAUDE_CODE_MAX_RETRIES", "0".into()),
            ]),
            Agent::Codex => {
                write(".codex/config.toml", &codex_config(model_url))?;
                pairs.extend([("CODEX_HOME", format!("{home_s}/.codex")), ("MOCK_API_KEY", "sk-mock".into())]);
            }
            Agent::Gemini => {
                write(".gemini/settings.json", GEMINI_SETTINGS)?;
                xdg(&mut pairs);
                pairs.extend([
                    ("GEMINI_API_KEY", "mock-gemini-key".into()),
                    ("GOOGLE_GEMINI_BASE_URL", model_url.to_owned()),
                    ("GEMINI_TELEMETRY_ENABLED", "false".into()),
                ]);
            }
            Agent::OpenCode | Agent::Kilo => {
                let (dir, prefix) = if self == Agent::OpenCode { ("opencode", "OPENCODE") } else { ("kilo", "KILO") };
                write(&format!(".config/{dir}/{dir}.json"), &opencode_config(model_url))?;
                xdg(&mut pairs);
                let mut flags = vec![
                    "DISABLE_MODELS_FETCH",
                    "DISABLE_AUTOUPDATE",
                    "DISABLE_SHARE",
                    "DISABLE_LSP_DOWNLOAD",
                    "DISABLE_DEFAULT_PLUGINS",
                    "DISABLE_CLAUDE_CODE",
                ];
                if self == Agent::Kilo {
                    flags.extend([
                        "DISABLE_SESSION_INGEST",
                        "DISABLE_PRESENCE",
                        "DISABLE_CODEBASE_INDEXING",
                        "NO_DAEMON",
                    ]);
                }
                let mut owned: Vec<(String, String)> =
                    flags.into_iter().map(|f| (format!("{prefix}_{f}"), "1".to_owned())).collect();
                if self == Agent::Kilo {
                    owned.push(("KILO_TELEMETRY_LEVEL".into(), "off".into()));
                    owned.push(("KILO_SESSION_RETRY_LIMIT".into(), "1".into()));
                }
                let mut out: Vec<(String, String)> = pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                out.extend(owned);
                return Ok(out);
            }
            Agent::Hermes => {
                write(".hermes/config.yaml", &hermes_config(model_url))?;
                pairs.extend([
                    ("OPENAI_API_KEY", "sk-mock".into()),
                    ("OPENAI_BASE_URL", format!("{model_url}/v1")),
                    ("HERMES_ACCEPT_HOOKS", "1".into()),
                ]);
            }
            Agent::Pi => {
                write(".pi/agent/models.json", &pi_models(model_url))?;
                // No retries of a failed model call (else ~15 s of back-off).
                write(".pi/agent/settings.json", r#"{"retry":{"enabled":false,"provider":{"maxRetries":0}}}"#)?;
                pairs.extend([("PI_OFFLINE", "1".into()), ("PI_TELEMETRY", "0".into())]);
            }
            Agent::Droid => {
                write(".factory/settings.json", &droid_settings(model_url))?;
                pairs.push(("FACTORY_DISABLE_KEYRING", "1".into()));
            }
            // Both need no file: an OpenAI-compatible endpoint from the environment.
            Agent::Qwen => pairs.extend([
                ("OPENAI_API_KEY", "sk-mock".into()),
                ("OPENAI_BASE_URL", format!("{model_url}/v1")),
                ("OPENAI_MODEL", "mock-model".into()),
            ]),
            Agent::Copilot => pairs.extend([
                ("COPILOT_OFFLINE", "true".into()),
                ("COPILOT_PROVIDER_BASE_URL", format!("{model_url}/v1")),
                ("COPILOT_PROVIDER_API_KEY", "sk-mock".into()),
                ("COPILOT_MODEL", "mock-model".into()),
            ]),
        }
        Ok(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }
}

/// Gemini CLI settings: API-key auth, no folder trust gate, no updates or telemetry; one
/// attempt per model call (else a model error is retried for ~4 minutes); a fixed model
/// (no routing call). The shell keeps its default settings: the adapter gets its output
/// whatever they are (docs/adapters/gemini.md).
const GEMINI_SETTINGS: &str = r#"{"security":{"auth":{"selectedType":"gemini-api-key"},"folderTrust":{"enabled":false}},"general":{"disableAutoUpdate":true,"maxAttempts":1},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},"model":{"name":"gemini-2.5-flash"}}"#;

/// OpenCode's (and Kilo's) config: one OpenAI-compatible provider at the model server,
/// only that provider enabled (Kilo's gateway model fetch stalls offline otherwise),
/// and file edits that ask permission.
fn opencode_config(model_url: &str) -> String {
    format!(
        r#"{{"$schema":"https://opencode.ai/config.json","autoupdate":false,"share":"disabled","model":"mock/mock-model","small_model":"mock/mock-model","enabled_providers":["mock"],"permission":{{"edit":"ask"}},"provider":{{"mock":{{"npm":"@ai-sdk/openai-compatible","name":"Mock","options":{{"baseURL":"{model_url}/v1","apiKey":"sk-mock"}},"models":{{"mock-model":{{"name":"Mock Model","tool_call":true,"reasoning":true,"limit":{{"context":200000,"output":8192}}}}}}}}}}}}"#
    )
}

/// Hermes' config: a custom OpenAI-compatible endpoint; three attempts per model call
/// (the retry scenarios: `mock:flaky` fails twice, then answers).
fn hermes_config(model_url: &str) -> String {
    format!(
        "model:\n  default: mock-model\n  provider: custom\n  base_url: {model_url}/v1\n  api_key: sk-mock\nagent:\n  api_max_retries: 3\n"
    )
}

/// Pi's providers: the model server as an Anthropic Messages and a Chat Completions API.
fn pi_models(model_url: &str) -> String {
    format!(
        r#"{{"providers":{{"mockant":{{"baseUrl":"{model_url}","api":"anthropic-messages","apiKey":"sk-ant-mock","models":[{{"id":"mock-claude","reasoning":true,"input":["text"],"contextWindow":200000,"maxTokens":8192}}]}},"mockoai":{{"baseUrl":"{model_url}/v1","api":"openai-completions","apiKey":"sk-mock","compat":{{"supportsDeveloperRole":false}},"models":[{{"id":"mock-model","reasoning":true}}]}}}}}}"#
    )
}

/// Droid's custom models at the model server (no login needed for them), one of them
/// the default (a session without a model otherwise fails "Authentication failed").
fn droid_settings(model_url: &str) -> String {
    format!(
        r#"{{"customModels":[{{"model":"mock-claude","displayName":"Mock Claude","baseUrl":"{model_url}","apiKey":"sk-ant-mock","provider":"anthropic","maxOutputTokens":8192}}],"sessionDefaultSettings":{{"model":"custom:mock-claude"}}}}"#
    )
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

/// Overrides the version the live tests expect of the CLI under test
/// (`scripts/check-agent-versions.sh --live` runs one agent's tests against its newest
/// release this way).
pub const EXPECT_VERSION_ENV: &str = "TERMINULL_EXPECT_AGENT_VERSION";

/// The pinned version of `agent`'s CLI, from tests/agents/package.json or
/// tests/agents/hermes-requirements.txt (or [`EXPECT_VERSION_ENV`] when set).
pub fn pinned_version(agent: Agent) -> String {
    if let Some(version) = std::env::var(EXPECT_VERSION_ENV).ok().filter(|v| !v.is_empty()) {
        return version;
    }
    let dir = crate::workspace::root().join("tests/agents");
    match agent.pin() {
        Pin::Npm(package) => {
            let text =
                std::fs::read_to_string(dir.join("package.json")).expect("tests/agents/package.json is readable");
            let json: serde_json::Value = serde_json::from_str(&text).expect("tests/agents/package.json is JSON");
            json["dependencies"][package].as_str().expect("the package is pinned").to_owned()
        }
        Pin::NpmApart(package) => {
            let text = std::fs::read_to_string(dir.join("qwen/package.json")).expect("tests/agents/qwen/package.json");
            let json: serde_json::Value = serde_json::from_str(&text).expect("tests/agents/qwen/package.json is JSON");
            json["dependencies"][package].as_str().expect("the package is pinned").to_owned()
        }
        Pin::PyPi(package) => {
            let text =
                std::fs::read_to_string(dir.join("hermes-requirements.txt")).expect("the requirements are readable");
            let prefix = format!("{package}==");
            text.lines().find_map(|l| l.strip_prefix(&prefix)).expect("the package is pinned").trim().to_owned()
        }
    }
}
