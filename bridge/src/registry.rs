//! The adapter registry: which agents this bridge can run.
//!
//! Built-in adapters are executables listed in [`BUILT_INS`], found next to the
//! `terminull` executable first, then on `PATH`. Drop-ins are executables in
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
use terminull_protocol::adapter::{self as proto, Declaration, DetectResult};

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
];

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
}

impl Source {
    /// The executable.
    pub fn path(&self) -> &Path {
        match self {
            Source::BuiltIn { path } | Source::DropIn { path } => path,
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
    /// `built-in` or `drop-in`.
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
    /// Deadline for each handshake.
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
            config,
            exe_dir,
            handshake_timeout: proto::response_timeout(<proto::Initialize as proto::AdapterRequest>::METHOD)
                .unwrap_or(Duration::from_secs(120)),
            detect_timeout: Duration::from_secs(30),
        }
    }
}

/// Finds, checks and detects every candidate adapter.
pub async fn scan(opts: &ScanOptions) -> Registry {
    let mut refused = Vec::new();
    let mut candidates: Vec<(Option<&'static str>, PathBuf)> = Vec::new();
    for built_in in BUILT_INS {
        if opts.config.agent(built_in.agent_id).disabled {
            continue;
        }
        match find_built_in(built_in.executable, opts.exe_dir.as_deref()) {
            Some(path) => candidates.push((Some(built_in.agent_id), path)),
            None => tracing::info!(agent = built_in.agent_id, "built-in adapter `{}` not found", built_in.executable),
        }
    }
    let drop_ins = drop_in_candidates(&opts.home.ext_adapters(), &mut refused);
    candidates.extend(drop_ins.into_iter().map(|p| (None, p)));

    let probes = candidates.iter().map(|(built_in, path)| probe(opts, *built_in, path.clone()));
    let results = futures::future::join_all(probes).await;

    let mut agents: BTreeMap<String, Agent> = BTreeMap::new();
    for ((built_in, path), result) in candidates.into_iter().zip(results) {
        let kind = if built_in.is_some() { "built-in" } else { "drop-in" };
        let agent = match result {
            Ok(agent) => agent,
            Err(reason) => {
                tracing::warn!(path = %path.display(), "{kind} adapter refused: {reason}");
                refused.push(Refusal { path, kind, reason });
                continue;
            }
        };
        let id = agent.declaration.agent_id.to_string();
        if let Some(expected) = built_in
            && expected != id
        {
            let reason = format!("declares agent id `{id}`, but this built-in must be `{expected}`");
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
            };
            let reason = format!("agent id `{id}` is already taken by {taken_by}; choose another agent_id");
            tracing::warn!(path = %path.display(), "{kind} adapter refused: {reason}");
            refused.push(Refusal { path, kind, reason });
            continue;
        }
        agents.insert(id, agent);
    }
    Registry { agents: agents.into_values().collect(), refused }
}

/// `exe_dir/name` when it is an executable file, else `name` on `PATH`.
fn find_built_in(name: &str, exe_dir: Option<&Path>) -> Option<PathBuf> {
    exe_dir.map(|d| d.join(name)).filter(|p| is_executable(p)).or_else(|| which::which(name).ok())
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Executables in `dir`, sorted by name; non-executable files are refused with a hint.
fn drop_in_candidates(dir: &Path, refused: &mut Vec<Refusal>) -> Vec<PathBuf> {
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
        out.push(path);
    }
    out
}

/// Starts one candidate, checks its declaration, asks `detect`, and shuts it down.
async fn probe(opts: &ScanOptions, built_in: Option<&str>, path: PathBuf) -> Result<Agent, String> {
    let mut command = AdapterCommand::new(&path);
    if let Some(id) = built_in {
        command.env = opts.config.agent(id).env.into_iter().collect();
    }
    let mut hosted = launch(command.clone(), opts.handshake_timeout).await.map_err(|e| match e {
        HostError::Refused { violations, .. } => {
            let list: Vec<_> = violations.iter().map(ToString::to_string).collect();
            format!("contract check failed: {}", list.join("; "))
        }
        other => other.to_string(),
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
    // Sessions run with the agent's env from config, known now that the id is.
    command.env = opts.config.agent(declaration.agent_id.as_str()).env.into_iter().collect();
    let source = if built_in.is_some() { Source::BuiltIn { path } } else { Source::DropIn { path } };
    Ok(Agent { declaration, source, command, detected })
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
