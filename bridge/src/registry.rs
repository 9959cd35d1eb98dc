//! The adapter registry: which agents this bridge can run.
//!
//! Built-in adapters are executables listed in [`BUILT_INS`], found next to the
//! `terminull` executable first, then on `PATH`. ACP agents declared in `config.toml`
//! (`[acp_agents.<id>]`) are served by the `terminull-acp` built-in, started with the
//! agent's id, name and command on its command line. Drop-ins are executables in
//! `<home>/ext_adapters/`. Every candidate is started once, handshake-checked
//! (the contract check of the protocol crate) and asked `detect`, all in parallel
//! under deadlines. A valid one is registered exactly like a built-in; a malformed
//! one, a non-executable file, or a drop-in whose agent id is already taken is
//! refused with a reason that says what to do, and never stops the others.
//! The result is a snapshot: the daemon keeps it until it rescans.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use terminull_protocol::adapter::{self as proto, ContractViolation, Declaration, DetectResult};

use crate::home::{Config, Home};
use crate::host::{AdapterCommand, HostError, launch};

/// A built-in adapter: its agent id and the executable's file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltIn {
    /// The agent id it must declare.
    pub agent_id: &'static str,
    /// The executable's file name.
    pub executable: &'static str,
}

/// The adapters that ship with terminull. The list grows as adapters land.
pub const BUILT_INS: &[BuiltIn] = &[
    BuiltIn { agent_id: "echo", executable: "echo-rs" },
    BuiltIn { agent_id: "claude-code", executable: "terminull-claude-code" },
    BuiltIn { agent_id: "codex", executable: "terminull-codex" },
    BuiltIn { agent_id: "gemini", executable: "terminull-gemini" },
    BuiltIn { agent_id: "hermes", executable: "terminull-hermes" },
    BuiltIn { agent_id: "opencode", executable: "terminull-opencode" },
    BuiltIn { agent_id: "kilo", executable: "terminull-kilo" },
    BuiltIn { agent_id: "pi", executable: "terminull-pi" },
    BuiltIn { agent_id: "droid", executable: "terminull-droid" },
    BuiltIn { agent_id: "cursor", executable: "terminull-cursor" },
    BuiltIn { agent_id: "qwen", executable: "terminull-qwen" },
    BuiltIn { agent_id: "copilot", executable: "terminull-copilot" },
];

/// The executable that serves the ACP agents declared in `config.toml`.
pub const ACP_HOST: &str = "terminull-acp";

/// Where a registered adapter comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// Shipped with terminull.
    BuiltIn {
        /// The executable found.
        path: PathBuf,
    },
    /// Dropped into `<home>/ext_adapters/`.
    DropIn {
        /// The executable.
        path: PathBuf,
    },
    /// An ACP agent declared in `config.toml` (`[acp_agents.<id>]`), served by
    /// [`ACP_HOST`].
    AcpConfig {
        /// The `terminull-acp` executable.
        path: PathBuf,
        /// The agent's command line, as configured.
        command: Vec<String>,
    },
}

impl Source {
    /// The executable.
    pub fn path(&self) -> &Path {
        match self {
            Source::BuiltIn { path } | Source::DropIn { path } | Source::AcpConfig { path, .. } => path,
        }
    }
}

/// A registered agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agent {
    /// Its checked declaration.
    pub declaration: Declaration,
    /// Where it comes from.
    pub source: Source,
    /// How to start it (with the agent's `env` from config).
    #[serde(skip)]
    pub command: AdapterCommand,
    /// Whether its CLI is installed here.
    pub detected: DetectResult,
}

/// A candidate that was not registered, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The executable (or file) refused.
    pub path: PathBuf,
    /// `built-in`, `acp-config` or `drop-in`.
    pub kind: &'static str,
    /// Why, and what to do.
    pub reason: String,
}

/// The agents this bridge can run, and what it refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Registry {
    /// Registered agents, by agent id.
    pub agents: Vec<Agent>,
    /// Refused candidates, in the order found.
    pub refused: Vec<Refusal>,
}

impl Registry {
    /// The agent with this id.
    pub fn get(&self, agent_id: &str) -> Option<&Agent> {
        self.agents.iter().find(|a| a.declaration.agent_id.as_str() == agent_id)
    }
}

/// What [`scan`] looks at.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// The bridge's home (drop-ins live in its `ext_adapters/`).
    pub home: Home,
    /// The configuration (per-agent env, disabled agents).
    pub config: Config,
    /// The directory of the `terminull` executable, searched before `PATH`.
    pub exe_dir: Option<PathBuf>,
    /// Deadline for each handshake (`[limits] scan_timeout_secs`): a drop-in that never
    /// answers `initialize` is refused after it, and never holds the others up.
    pub handshake_timeout: Duration,
    /// Deadline for each `detect`.
    pub detect_timeout: Duration,
}

impl ScanOptions {
    /// Defaults for a home and config; the executable's directory from the running binary.
    pub fn new(home: Home, config: Config) -> Self {
        let exe_dir = std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf));
        Self {
            home,
            exe_dir,
            handshake_timeout: config.limits.scan_timeout(),
            detect_timeout: Duration::from_secs(30),
            config,
        }
    }
}

/// One adapter to probe.
#[derive(Debug, Clone)]
struct Candidate {
    /// The agent id it must declare (built-ins and config agents).
    expected: Option<String>,
    /// `built-in`, `acp-config` or `drop-in`.
    kind: &'static str,
    /// What a refusal names: the executable, or the config entry.
    shown: PathBuf,
    command: AdapterCommand,
    source: Source,
}

/// Finds, checks and detects every candidate adapter.
pub async fn scan(opts: &ScanOptions) -> Registry {
    scan_progressively(opts, |_| {}).await
}

/// [`scan`], handing `progress` the registry of the candidates probed so far each time
/// one finishes (so an agent is usable before a slow one is done); returns the final one.
pub async fn scan_progressively(opts: &ScanOptions, mut progress: impl FnMut(Registry)) -> Registry {
    use futures::StreamExt as _;
    let mut refused = Vec::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    for built_in in BUILT_INS {
        if opts.config.agent(built_in.agent_id).disabled {
            continue;
        }
        match find_built_in(built_in.executable, opts.exe_dir.as_deref()) {
            Some(path) => {
                let mut command = AdapterCommand::new(&path);
                command.env = opts.config.agent(built_in.agent_id).env.into_iter().collect();
                candidates.push(Candidate {
                    expected: Some(built_in.agent_id.to_owned()),
                    kind: "built-in",
                    shown: path.clone(),
                    command,
                    source: Source::BuiltIn { path },
                });
            }
            None => tracing::info!(agent = built_in.agent_id, "built-in adapter `{}` not found", built_in.executable),
        }
    }
    candidates.extend(acp_candidates(opts, &mut refused));
    let drop_ins = drop_in_candidates(&opts.home.ext_adapters(), opts.home.root(), &mut refused);
    candidates.extend(drop_ins.into_iter().map(|path| Candidate {
        expected: None,
        kind: "drop-in",
        shown: path.clone(),
        command: AdapterCommand::new(&path),
        source: Source::DropIn { path },
    }));

    let mut probes: futures::stream::FuturesUnordered<_> =
        candidates.iter().enumerate().map(|(i, c)| async move { (i, probe(opts, c).await) }).collect();
    let mut results: Vec<Option<Result<Agent, ProbeError>>> = candidates.iter().map(|_| None).collect();
    while let Some((i, result)) = probes.next().await {
        results[i] = Some(result);
        if !probes.is_empty() {
            progress(assemble(opts, &candidates, &results, refused.clone(), false));
        }
    }
    drop(probes);
    assemble(opts, &candidates, &results, refused, true)
}

/// The registry of the probed candidates (`None`: not probed yet), in candidate order
/// so that built-ins win an agent id over drop-ins; `log` for the final one.
fn assemble(
    opts: &ScanOptions,
    candidates: &[Candidate],
    results: &[Option<Result<Agent, ProbeError>>],
    mut refused: Vec<Refusal>,
    log: bool,
) -> Registry {
    let mut agents: BTreeMap<String, Agent> = BTreeMap::new();
    for (candidate, result) in candidates.iter().zip(results) {
        let (kind, path) = (candidate.kind, candidate.shown.clone());
        let agent = match result {
            None => continue,
            Some(Ok(agent)) => agent.clone(),
            Some(Err(e)) => {
                let reason = e.to_string();
                if log {
                    tracing::warn!(path = %path.display(), "{kind} adapter refused: {reason}");
                }
                refused.push(Refusal { path, kind, reason });
                continue;
            }
        };
        let id = agent.declaration.agent_id.to_string();
        if let Some(expected) = &candidate.expected
            && *expected != id
        {
            let reason = format!("declares agent id `{id}`, but this {kind} agent must be `{expected}`");
            refused.push(Refusal { path, kind, reason });
            continue;
        }
        if opts.config.agent(&id).disabled {
            continue;
        }
        if let Some(holder) = agents.get(&id) {
            let taken_by = match &holder.source {
                Source::BuiltIn { path } => format!("the built-in adapter {}", path.display()),
                Source::DropIn { path } => format!("the drop-in {}", path.display()),
                Source::AcpConfig { .. } => format!("the ACP agent `{id}` of config.toml"),
            };
            let hint = if kind == "acp-config" {
                format!("rename [acp_agents.{id}]")
            } else {
                "choose another agent_id".into()
            };
            let reason = format!("agent id `{id}` is already taken by {taken_by}; {hint}");
            if log {
                tracing::warn!(path = %path.display(), "{kind} adapter refused: {reason}");
            }
            refused.push(Refusal { path, kind, reason });
            continue;
        }
        agents.insert(id, agent);
    }
    Registry { agents: agents.into_values().collect(), refused }
}

/// The `[acp_agents.<id>]` of the configuration, each as `terminull-acp --agent-id <id>
/// --name <name> [--lease <lease>] -- <command> <args…>` with the agent's env.
fn acp_candidates(opts: &ScanOptions, refused: &mut Vec<Refusal>) -> Vec<Candidate> {
    if opts.config.acp_agents.is_empty() {
        return Vec::new();
    }
    let host = find_built_in(ACP_HOST, opts.exe_dir.as_deref());
    let mut out = Vec::new();
    for (id, agent) in &opts.config.acp_agents {
        if opts.config.agent(id).disabled {
            continue;
        }
        let shown = PathBuf::from(format!("config.toml [acp_agents.{id}]"));
        let refuse = |reason: String| Refusal { path: shown.clone(), kind: "acp-config", reason };
        if !proto::is_valid_agent_id(id) {
            refused.push(refuse(format!(
                "`{id}` is not a valid agent id (1-64 of a-z 0-9 _ -, starting with a letter or digit)"
            )));
            continue;
        }
        if agent.command.trim().is_empty() {
            refused.push(refuse("`command` is empty; give the agent's executable".to_owned()));
            continue;
        }
        let Some(path) = host.clone() else {
            refused.push(refuse(format!(
                "`{ACP_HOST}` was not found next to terminull or on PATH; it serves the ACP agents of config.toml"
            )));
            continue;
        };
        let mut command = AdapterCommand::new(&path);
        let name = agent.name.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| id.clone());
        command.args = ["--agent-id", id.as_str(), "--name", name.as_str()].iter().map(Into::into).collect();
        if let Some(lease) = agent.lease {
            let lease = match lease {
                proto::LeaseKind::PerTurn => "per_turn",
                proto::LeaseKind::Persistent => "persistent",
            };
            command.args.extend(["--lease".into(), lease.into()]);
        }
        command.args.push("--".into());
        command.args.push(agent.command.clone().into());
        command.args.extend(agent.args.iter().map(Into::into));
        let mut env = agent.env.clone();
        env.extend(opts.config.agent(id).env);
        command.env = env.into_iter().collect();
        let line = std::iter::once(agent.command.clone()).chain(agent.args.iter().cloned()).collect();
        out.push(Candidate {
            expected: Some(id.clone()),
            kind: "acp-config",
            shown,
            command,
            source: Source::AcpConfig { path, command: line },
        });
    }
    out
}

/// `exe_dir/name` when it is an executable file, else `name` on `PATH` (how the daemon
/// finds [`BUILT_INS`] and [`ACP_HOST`]; `terminull --version` and `doctor` list them).
pub fn find_built_in(name: &str, exe_dir: Option<&Path>) -> Option<PathBuf> {
    exe_dir.map(|d| d.join(name)).filter(|p| is_executable(p)).or_else(|| which::which(name).ok())
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Executables in `dir`, sorted by name; non-executable files, and files that someone
/// else owns or could write (the file or a directory up to `home`: OpenSSH StrictModes),
/// are refused with a hint.
fn drop_in_candidates(dir: &Path, home: &Path, refused: &mut Vec<Refusal>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "cannot list drop-in adapters: {e}");
            return Vec::new();
        }
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with('.') || name.to_ascii_lowercase().starts_with("readme") {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if !meta.is_file() {
            continue;
        }
        if meta.permissions().mode() & 0o111 == 0 {
            let reason = format!("not executable; make it runnable with `chmod +x {}`", path.display());
            tracing::warn!(path = %path.display(), "drop-in adapter refused: {reason}");
            refused.push(Refusal { path, kind: "drop-in", reason });
            continue;
        }
        if let Err(reason) = crate::home_guard::check_strict(&path, Some(home)) {
            tracing::warn!(path = %path.display(), "drop-in adapter refused: {reason}");
            refused.push(Refusal { path, kind: "drop-in", reason });
            continue;
        }
        out.push(path);
    }
    out
}

/// Why a candidate was not registered; its text is the [`Refusal`]'s reason.
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    /// The declaration broke the contract.
    #[error("contract check failed: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Contract(Vec<ContractViolation>),
    /// The adapter could not be brought up.
    #[error(transparent)]
    Launch(HostError),
}

/// Starts one candidate, checks its declaration, asks `detect`, and shuts it down.
async fn probe(opts: &ScanOptions, candidate: &Candidate) -> Result<Agent, ProbeError> {
    let mut command = candidate.command.clone();
    let mut hosted = launch(command.clone(), opts.handshake_timeout).await.map_err(|e| match e {
        HostError::Refused { violations, .. } => ProbeError::Contract(violations),
        other => ProbeError::Launch(other),
    })?;
    let declaration = hosted.declaration().clone();
    let detect = tokio::time::timeout(opts.detect_timeout, hosted.call::<proto::Detect>(&proto::Empty {})).await;
    let detected = match detect {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => {
            DetectResult { installed: false, version: None, path: None, reason: Some(format!("detect failed: {e}")) }
        }
        Err(_) => DetectResult {
            installed: false,
            version: None,
            path: None,
            reason: Some(format!("detect did not answer within {:?}", opts.detect_timeout)),
        },
    };
    hosted.shutdown().await;
    if candidate.kind == "drop-in" {
        // Sessions run with the agent's env from config, known now that the id is.
        command.env = opts.config.agent(declaration.agent_id.as_str()).env.into_iter().collect();
    }
    Ok(Agent { declaration, source: candidate.source.clone(), command, detected })
}

/// What identifies the contents of a drop-in directory: name, size, mode and
/// modification time of each entry, sorted. Equal fingerprints mean nothing to rescan.
pub fn fingerprint(dir: &Path) -> Vec<(String, u64, u32, Option<std::time::SystemTime>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let meta = e.metadata().ok()?;
                    Some((
                        e.file_name().to_string_lossy().into_owned(),
                        meta.len(),
                        meta.permissions().mode(),
                        meta.modified().ok(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The capability flags that are on, for one-line listings.
pub fn capability_summary(d: &Declaration) -> String {
    let c = &d.capabilities;
    let flags = [
        (c.cap_images, "images"),
        (c.cap_documents, "documents"),
        (c.cap_thinking, "thinking"),
        (c.cap_permissions, "permissions"),
        (c.cap_subagents, "subagents"),
        (c.cap_interrupt, "interrupt"),
        (c.cap_input_during_turn, "input-during-turn"),
        (c.cap_terminal, "terminal"),
        (c.provides_models, "models"),
        (c.provides_usage, "usage"),
    ];
    let on: Vec<_> = flags.iter().filter(|(on, _)| *on).map(|(_, name)| *name).collect();
    if on.is_empty() { "-".to_owned() } else { on.join(",") }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn declaration(cli_binary: Option<&str>, verified_against: Option<&str>) -> Declaration {
        let mut v = json!({
            "protocol_version": 1, "agent_id": "x", "display_name": "X",
            "cap_images": false, "cap_documents": false, "cap_thinking": false, "cap_permissions": false,
            "cap_subagents": false, "cap_interrupt": false, "cap_input_during_turn": false, "cap_terminal": false,
            "provides_models": false, "provides_usage": false, "lease": "per_turn",
        });
        v["cli_binary"] = json!(cli_binary);
        v["verified_against"] = json!(verified_against);
        proto::check_declaration(&v).unwrap()
    }

    #[test]
    fn terminull_agents_notes_how_an_adapter_was_verified() {
        // `terminull agents` prints the protocol's note; pinned here because its text is CLI output.
        assert_eq!(declaration(None, None).verification_note(), None, "no CLI, nothing to verify");
        assert_eq!(
            declaration(Some("cursor-agent"), None).verification_note().as_deref(),
            Some("not verified against the real binary")
        );
        assert_eq!(
            declaration(Some("codex"), Some("0.171.0")).verification_note().as_deref(),
            Some("verified against 0.171.0")
        );
    }
}
