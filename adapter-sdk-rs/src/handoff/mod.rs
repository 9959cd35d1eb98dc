//! Building blocks of the handoff hooks ([docs/session-handoff.md](../../../docs/session-handoff.md),
//! [docs/adapter-protocol.md §5.4](../../../docs/adapter-protocol.md#54-handoff-hooks)), shared by every
//! adapter whose agent keeps its sessions on disk:
//!
//! - [`ProcessTable`]: the machine's processes read from `/proc` (pid, parent, program
//!   names, cwd, and whether terminull started it), and [`native_owner`], which finds a
//!   native agent process driving a directory — one not descending from the bridge.
//!   Every process an adapter or the bridge starts through [`crate::child::AgentProcess`]
//!   carries [`SESSION_MARKER_ENV`] in its environment, and its descendants inherit it;
//!   a process with the marker, or with an ancestor that has it, is terminull's own.
//! - [`read_jsonl`]: a bounded read of a JSONL transcript from a [`JsonlCursor`], for the
//!   read-only `mirror`: only complete lines, each at most a given length, at most a given
//!   number of bytes per call; a bad line is reported with its file and line number and
//!   skipped, never a panic.
//!
//! Session files and `/proc` are untrusted input: every read here is bounded.
//!
//! [`hooks`] has the trait an adapter implements them with: [`Handoff`], or
//! [`SessionFiles`] for an agent that keeps its sessions in files.

pub mod hooks;
pub mod replayed;

pub use hooks::{Handoff, NoHandoff, SessionFiles};

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;
use terminull_protocol::adapter::{
    ExternalSession, HandoffHook, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, LatestSidForCwdParams,
    LatestSidForCwdResult, MirrorResult, ScanExternalSessionsParams,
};

/// The five hooks an adapter declares when it implements handoff for an agent that keeps
/// its sessions on disk and holds no CLI process between turns (a per-turn lease).
pub const PER_TURN_HOOKS: &[HandoffHook] = &[
    HandoffHook::ScanExternalSessions,
    HandoffHook::IsCwdExternallyOwned,
    HandoffHook::Mirror,
    HandoffHook::LatestSidForCwd,
    HandoffHook::TerminalResumeCommand,
];

/// [`PER_TURN_HOOKS`] and `release`: for a persistent adapter, which lets its CLI
/// process go when the conversation is handed to a terminal.
pub const PERSISTENT_HOOKS: &[HandoffHook] = &[
    HandoffHook::ScanExternalSessions,
    HandoffHook::IsCwdExternallyOwned,
    HandoffHook::Mirror,
    HandoffHook::LatestSidForCwd,
    HandoffHook::TerminalResumeCommand,
    HandoffHook::Release,
];

/// Set in the environment of every process the bridge or an adapter starts; defined
/// with the process supervisor, which sets it.
pub use terminull_process::SESSION_MARKER_ENV;

/// The `_meta` key marking a mirrored block; defined in the protocol, since the bridge
/// reads it too.
pub use terminull_protocol::blocks::MIRRORED_META;

/// A block mirrored from a terminal's transcript: `kind`, stamped now, with
/// `_meta.mirrored = true`.
pub fn mirrored(kind: terminull_protocol::BlockKind) -> terminull_protocol::blocks::Block {
    let mut meta = serde_json::Map::new();
    meta.insert(MIRRORED_META.into(), Value::Bool(true));
    terminull_protocol::blocks::Block { seq: None, ts: terminull_protocol::blocks::now_ts(), meta: Some(meta), kind }
}

/// `v[key]` when it is a string.
pub fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The answer to `scan_external_sessions` from the sessions an adapter described:
/// those of `params.cwd` (all without one), newest first, at most `params.limit`.
pub fn newest_first(
    sessions: impl IntoIterator<Item = ExternalSession>,
    params: &ScanExternalSessionsParams,
) -> Vec<ExternalSession> {
    let mut sessions: Vec<ExternalSession> = sessions
        .into_iter()
        .filter(|s| params.cwd.as_deref().is_none_or(|want| s.cwd.as_deref() == Some(want)))
        .collect();
    sessions.sort_by(|a, b| b.updated_at.total_cmp(&a.updated_at));
    if let Some(limit) = params.limit {
        sessions.truncate(limit as usize);
    }
    sessions
}

/// `latest_sid_for_cwd` through an adapter's own `scan`: the newest session of the
/// directory (a terminal's `--resume` may have minted a new id).
pub fn latest_by_scan(
    params: &LatestSidForCwdParams,
    scan: impl FnOnce(&ScanExternalSessionsParams) -> Vec<ExternalSession>,
) -> LatestSidForCwdResult {
    let newest = scan(&ScanExternalSessionsParams { cwd: Some(params.cwd.clone()), limit: Some(1) });
    LatestSidForCwdResult { agent_session_id: newest.into_iter().next().map(|s| s.agent_session_id) }
}

/// The most session files one scan looks at.
pub const MAX_SCANNED_FILES: usize = 2000;

/// The longest title of a listed session, in characters.
pub const TITLE_CHARS: usize = 80;

/// Where an agent keeps its state: `$<env_var>` when set and not empty, else
/// `~/<under_home>`; `None` without either.
pub fn agent_home(env_var: Option<&str>, under_home: &str) -> Option<PathBuf> {
    if let Some(dir) = env_var.and_then(std::env::var_os).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(under_home))
}

/// `mirror` of a JSONL transcript: its complete records after `cursor` (bounded by
/// [`JsonlLimits::default`]), each turned into blocks by `record_blocks`.
pub fn mirror_jsonl(
    path: &Path,
    cursor: Option<&str>,
    record_blocks: impl Fn(&Value) -> Vec<terminull_protocol::blocks::Block>,
) -> Result<MirrorResult, crate::AdapterError> {
    let chunk =
        read_jsonl(path, JsonlCursor::parse(cursor), JsonlLimits::default()).map_err(crate::AdapterError::agent)?;
    let blocks = chunk.records.iter().flat_map(|(_, r)| record_blocks(r)).collect();
    Ok(MirrorResult { blocks, cursor: chunk.cursor.encode() })
}

/// `is_cwd_externally_owned` for a CLI named one of `names`: a native process (see
/// [`find_native_owner`]) in the directory, not a probe (`--version`), whose arguments
/// may drive the session asked about (`drives(argv, session id)`).
pub fn owned_by_cli(
    names: &[&str],
    params: &IsCwdExternallyOwnedParams,
    drives: impl Fn(&[String], Option<&str>) -> bool,
) -> IsCwdExternallyOwnedResult {
    let sid = params.agent_session_id.as_ref().map(ToString::to_string);
    let accept = |p: &ProcInfo| !is_probe(&p.argv) && drives(&p.argv, sid.as_deref());
    let pid = find_native_owner(names, Path::new(&params.cwd), accept);
    IsCwdExternallyOwnedResult { owned: pid.is_some(), pid }
}

/// The most bytes read from one `/proc/<pid>/cmdline`.
const MAX_CMDLINE: u64 = 64 * 1024;
/// The most bytes read from one `/proc/<pid>/environ`.
const MAX_ENVIRON: u64 = 512 * 1024;
/// The most bytes read from one `/proc/<pid>/stat`.
const MAX_STAT: u64 = 4096;

/// One process, as far as `/proc` told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid (0 when unknown).
    pub ppid: u32,
    /// The file name of `/proc/<pid>/exe`, when readable.
    pub exe: Option<String>,
    /// Its arguments.
    pub argv: Vec<String>,
    /// Its working directory, when readable.
    pub cwd: Option<PathBuf>,
    /// True when its environment holds [`SESSION_MARKER_ENV`].
    pub marked: bool,
}

impl ProcInfo {
    /// The names this process runs under: the executable's file name, `argv[0]`'s,
    /// and for an interpreter (`node`, `bun`, `python3`, …) its script's, each without
    /// a `.js`/`.cjs`/`.mjs`/`.exe`/`.py` extension.
    pub fn program_names(&self) -> Vec<String> {
        fn push(names: &mut Vec<String>, raw: &str) {
            let base = Path::new(raw).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            let stem = [".js", ".cjs", ".mjs", ".exe", ".py"]
                .iter()
                .find_map(|ext| base.strip_suffix(ext))
                .map(str::to_owned)
                .unwrap_or(base);
            if !stem.is_empty() && !names.contains(&stem) {
                names.push(stem);
            }
        }
        let mut names = Vec::new();
        if let Some(exe) = &self.exe {
            push(&mut names, exe.trim_end_matches(" (deleted)"));
        }
        if let Some(arg0) = self.argv.first() {
            push(&mut names, arg0);
        }
        if names.iter().any(|n| is_interpreter(n)) {
            // The script: the first argument after the interpreter that is not a flag.
            if let Some(script) = self.argv.iter().skip(1).find(|a| !a.starts_with('-')) {
                push(&mut names, script);
            }
        }
        names
    }
}

fn is_interpreter(name: &str) -> bool {
    matches!(name, "node" | "nodejs" | "bun" | "deno" | "python" | "python3" | "sh" | "bash")
        || name.starts_with("python3.")
}

/// A snapshot of the processes of this machine (of this pid namespace).
#[derive(Debug, Clone, Default)]
pub struct ProcessTable {
    procs: HashMap<u32, ProcInfo>,
}

impl ProcessTable {
    /// Reads `/proc`. Processes that vanish or cannot be read while scanning are left
    /// out or listed with what could be read.
    pub fn read() -> Self {
        Self::read_from(Path::new("/proc"))
    }

    /// Reads a `/proc`-like directory (tests point it elsewhere).
    pub fn read_from(proc_root: &Path) -> Self {
        let mut procs = HashMap::new();
        let Ok(entries) = std::fs::read_dir(proc_root) else { return Self { procs } };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            let dir = entry.path();
            let Some(ppid) = read_bounded(&dir.join("stat"), MAX_STAT).and_then(|s| parse_ppid(&s)) else { continue };
            let argv = read_bounded(&dir.join("cmdline"), MAX_CMDLINE)
                .map(|raw| raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(lossy).collect())
                .unwrap_or_default();
            let exe = std::fs::read_link(dir.join("exe"))
                .ok()
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
            let cwd = std::fs::read_link(dir.join("cwd")).ok();
            let marked = read_bounded(&dir.join("environ"), MAX_ENVIRON).is_some_and(|env| has_marker(&env));
            procs.insert(pid, ProcInfo { pid, ppid, exe, argv, cwd, marked });
        }
        Self { procs }
    }

    /// A table of the given processes (tests).
    pub fn from_procs(procs: impl IntoIterator<Item = ProcInfo>) -> Self {
        Self { procs: procs.into_iter().map(|p| (p.pid, p)).collect() }
    }

    /// Every process.
    pub fn iter(&self) -> impl Iterator<Item = &ProcInfo> {
        self.procs.values()
    }

    /// True when `pid` or one of its ancestors carries the marker, or descends from
    /// `self_pid` (the calling adapter).
    pub fn is_terminulls(&self, pid: u32, self_pid: u32) -> bool {
        let mut at = pid;
        // Bounded: a pid loop in a hostile or racy table cannot spin forever.
        for _ in 0..256 {
            if at == self_pid {
                return true;
            }
            let Some(p) = self.procs.get(&at) else { return false };
            if p.marked {
                return true;
            }
            if p.ppid == 0 || p.ppid == at {
                return false;
            }
            at = p.ppid;
        }
        false
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn has_marker(environ: &[u8]) -> bool {
    let key = format!("{SESSION_MARKER_ENV}=");
    environ.split(|b| *b == 0).any(|var| var.starts_with(key.as_bytes()))
}

/// The ppid from `/proc/<pid>/stat`: the fourth field, after the `)` closing the
/// command name (which may itself hold spaces and parentheses).
fn parse_ppid(stat: &[u8]) -> Option<u32> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn read_bounded(path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = File::open(path).ok()?;
    let mut out = Vec::new();
    file.take(max).read_to_end(&mut out).ok()?;
    Some(out)
}

/// The same directory, compared after resolving symlinks when possible.
pub fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || canon(a) == canon(b)
}

/// The native agent process driving `cwd`: a process whose program name is one of
/// `names`, whose working directory is `cwd`, that is not terminull's own (see
/// [`ProcessTable::is_terminulls`]) and that `accept` accepts (an adapter narrows by
/// its arguments, e.g. a `--version` probe is no owner). The lowest pid wins, for a
/// stable answer.
pub fn native_owner(
    table: &ProcessTable,
    names: &[&str],
    cwd: &Path,
    self_pid: u32,
    accept: impl Fn(&ProcInfo) -> bool,
) -> Option<u32> {
    let named = |p: &ProcInfo| p.program_names().iter().any(|n| names.contains(&n.as_str())) && accept(p);
    native_owner_where(table, cwd, self_pid, named)
}

/// [`native_owner`] with the whole test on the process left to `is_agent` (for a CLI
/// known by its package path rather than its name, say).
pub fn native_owner_where(
    table: &ProcessTable,
    cwd: &Path,
    self_pid: u32,
    is_agent: impl Fn(&ProcInfo) -> bool,
) -> Option<u32> {
    let mut owners: Vec<u32> = table
        .iter()
        .filter(|p| p.cwd.as_deref().is_some_and(|d| same_dir(d, cwd)))
        .filter(|p| is_agent(p))
        .filter(|p| !table.is_terminulls(p.pid, self_pid))
        .map(|p| p.pid)
        .collect();
    owners.sort_unstable();
    owners.first().copied()
}

/// [`native_owner`] over the live `/proc`, excluding this process and its children.
pub fn find_native_owner(names: &[&str], cwd: &Path, accept: impl Fn(&ProcInfo) -> bool) -> Option<u32> {
    native_owner(&ProcessTable::read(), names, cwd, std::process::id(), accept)
}

/// [`native_owner_where`] over the live `/proc`, excluding this process and its children.
pub fn find_native_owner_where(cwd: &Path, is_agent: impl Fn(&ProcInfo) -> bool) -> Option<u32> {
    native_owner_where(&ProcessTable::read(), cwd, std::process::id(), is_agent)
}

/// True when `argv` is only a version or help probe, which drives no session.
pub fn is_probe(argv: &[String]) -> bool {
    argv.iter().skip(1).any(|a| matches!(a.as_str(), "--version" | "-v" | "--help" | "-h" | "version"))
        && argv.len() <= 3
}

/// Where a [`read_jsonl`] stopped: the byte offset of the next unread line and its
/// 1-based line number. Opaque text on the wire (`"<offset>:<line>"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JsonlCursor {
    /// Byte offset of the next unread line.
    pub offset: u64,
    /// Number of lines before it.
    pub lines: u64,
}

impl JsonlCursor {
    /// Parses the wire form; `None` or a malformed one reads from the start.
    pub fn parse(text: Option<&str>) -> Self {
        text.and_then(|t| {
            let (offset, lines) = t.split_once(':')?;
            Some(Self { offset: offset.parse().ok()?, lines: lines.parse().ok()? })
        })
        .unwrap_or_default()
    }

    /// The wire form.
    pub fn encode(&self) -> String {
        format!("{}:{}", self.offset, self.lines)
    }
}

/// Limits of one [`read_jsonl`].
#[derive(Debug, Clone, Copy)]
pub struct JsonlLimits {
    /// A line longer than this is skipped (reported, not parsed).
    pub max_line: usize,
    /// At most this many bytes are read per call; the rest comes with the next one.
    pub max_read: usize,
}

impl Default for JsonlLimits {
    fn default() -> Self {
        Self { max_line: 4 * 1024 * 1024, max_read: 16 * 1024 * 1024 }
    }
}

/// What [`read_jsonl`] read.
#[derive(Debug, Clone, Default)]
pub struct JsonlChunk {
    /// The parsed lines with their 1-based line numbers.
    pub records: Vec<(u64, Value)>,
    /// Lines that were skipped, each naming the file and line.
    pub problems: Vec<String>,
    /// Where to continue.
    pub cursor: JsonlCursor,
}

/// Why a transcript could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// Opening or reading it failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

/// Reads the complete lines of the JSONL file at `path` after `cursor`. A trailing line
/// without its newline (still being written) is left for the next call. A file shorter
/// than the cursor (rewritten) is read again from the start.
pub fn read_jsonl(path: &Path, cursor: JsonlCursor, limits: JsonlLimits) -> Result<JsonlChunk, TranscriptError> {
    let io = |source| TranscriptError::Io { path: path.to_path_buf(), source };
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let cursor = if cursor.offset > len { JsonlCursor::default() } else { cursor };
    file.seek(SeekFrom::Start(cursor.offset)).map_err(io)?;
    let mut buf = Vec::new();
    file.take(limits.max_read as u64).read_to_end(&mut buf).map_err(io)?;
    let mut chunk = JsonlChunk { cursor, ..JsonlChunk::default() };
    let mut start = 0usize;
    while let Some(nl) = buf[start..].iter().position(|b| *b == b'\n') {
        let line = &buf[start..start + nl];
        chunk.cursor.lines += 1;
        chunk.cursor.offset += (nl + 1) as u64;
        start += nl + 1;
        let number = chunk.cursor.lines;
        if line.len() > limits.max_line {
            chunk.problems.push(format!(
                "{}:{number}: line of {} bytes is over the {} byte limit; skipped",
                path.display(),
                line.len(),
                limits.max_line
            ));
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(value) => chunk.records.push((number, value)),
            Err(e) => chunk.problems.push(format!("{}:{number}: not JSON: {e}", path.display())),
        }
    }
    // A single line longer than the whole read window: skip to its end next time
    // rather than stalling on it forever.
    if start == 0 && buf.len() == limits.max_read && limits.max_read > 0 {
        chunk.cursor.offset += buf.len() as u64;
        chunk.problems.push(format!(
            "{}:{}: line longer than {} bytes; skipped",
            path.display(),
            chunk.cursor.lines + 1,
            limits.max_read
        ));
    }
    for problem in &chunk.problems {
        tracing::warn!("{problem}");
    }
    Ok(chunk)
}

/// The first `max` characters of `text` on one line, for titles.
pub fn title_of(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line,
    }
}

/// Modification time of `path` as Unix seconds (0 when unknown).
pub fn mtime_secs(path: &Path) -> f64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Files under `dir` (recursing at most `depth` levels) whose name ends with `suffix`,
/// at most `max` of them.
pub fn files_with_suffix(dir: &Path, suffix: &str, depth: usize, max: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((d, level)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() && level < depth {
                stack.push((path, level + 1));
            } else if kind.is_file() && path.file_name().is_some_and(|n| n.to_string_lossy().ends_with(suffix)) {
                out.push(path);
                if out.len() >= max {
                    return out;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod hook_list_tests {
    use super::*;

    #[test]
    fn the_persistent_hook_list_is_the_per_turn_list_and_release() {
        assert_eq!(&PERSISTENT_HOOKS[..PER_TURN_HOOKS.len()], PER_TURN_HOOKS);
        assert_eq!(PERSISTENT_HOOKS[PER_TURN_HOOKS.len()..], [HandoffHook::Release]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_persistent_hook_list_is_the_per_turn_list_and_release() {
        assert_eq!(&PERSISTENT_HOOKS[..PER_TURN_HOOKS.len()], PER_TURN_HOOKS);
        assert_eq!(PERSISTENT_HOOKS[PER_TURN_HOOKS.len()..], [HandoffHook::Release]);
    }

    fn proc(pid: u32, ppid: u32, argv: &[&str], cwd: &str, marked: bool) -> ProcInfo {
        ProcInfo {
            pid,
            ppid,
            exe: None,
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            cwd: Some(PathBuf::from(cwd)),
            marked,
        }
    }

    #[test]
    fn a_native_cli_in_the_directory_owns_it_and_terminulls_own_do_not() {
        let table = ProcessTable::from_procs([
            proc(1, 0, &["init"], "/", false),
            proc(10, 1, &["bash"], "/w", false),
            proc(11, 10, &["/opt/bin/claude", "--resume", "x"], "/w", false),
            proc(20, 1, &["terminull", "up"], "/", true),
            proc(21, 20, &["terminull-claude-code"], "/w", true),
            // Scrubbed its environment, but descends from a marked process.
            proc(22, 21, &["claude", "-p"], "/w", false),
            proc(30, 10, &["claude"], "/elsewhere", false),
        ]);
        assert_eq!(native_owner(&table, &["claude"], Path::new("/w"), 999, |_| true), Some(11));
        assert_eq!(native_owner(&table, &["claude"], Path::new("/nobody"), 999, |_| true), None);
        let without_native = ProcessTable::from_procs(table.iter().filter(|p| p.pid != 11).cloned());
        assert_eq!(native_owner(&without_native, &["claude"], Path::new("/w"), 999, |_| true), None);
    }

    #[test]
    fn the_calling_adapter_and_its_children_are_never_owners() {
        let table =
            ProcessTable::from_procs([proc(5, 1, &["adapter"], "/w", false), proc(6, 5, &["codex"], "/w", false)]);
        assert_eq!(native_owner(&table, &["codex"], Path::new("/w"), 5, |_| true), None);
        assert_eq!(native_owner(&table, &["codex"], Path::new("/w"), 4, |_| true), Some(6));
    }

    #[test]
    fn a_script_run_by_node_is_known_by_its_script_name() {
        let p = ProcInfo {
            pid: 1,
            ppid: 0,
            exe: Some("node".into()),
            argv: vec!["node".into(), "/x/node_modules/@openai/codex/bin/codex.js".into(), "exec".into()],
            cwd: None,
            marked: false,
        };
        assert!(p.program_names().contains(&"codex".to_owned()));
        let native = ProcInfo { exe: Some("claude.exe".into()), argv: vec!["claude".into()], ..p };
        assert_eq!(native.program_names(), vec!["claude".to_owned()]);
    }

    #[test]
    fn an_ancestry_loop_does_not_hang() {
        let table = ProcessTable::from_procs([proc(7, 8, &["a"], "/", false), proc(8, 7, &["b"], "/", false)]);
        assert!(!table.is_terminulls(7, 999));
    }

    #[test]
    fn stat_ppid_survives_parentheses_in_the_name() {
        assert_eq!(parse_ppid(b"42 (we (ird) name) S 17 42 42 0 -1"), Some(17));
        assert_eq!(parse_ppid(b"garbage"), None);
    }

    #[test]
    fn the_live_table_finds_this_test_process_with_its_cwd() {
        let table = ProcessTable::read();
        let me = table.iter().find(|p| p.pid == std::process::id()).expect("this process is listed");
        assert_eq!(me.cwd.as_deref().map(|c| same_dir(c, &std::env::current_dir().unwrap())), Some(true));
    }

    #[test]
    fn jsonl_reads_whole_lines_and_continues_from_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{\"a\":1}\nnot json\n{\"b\":2}\n{\"c\":").unwrap();
        let first = read_jsonl(&path, JsonlCursor::default(), JsonlLimits::default()).unwrap();
        assert_eq!(first.records.iter().map(|(n, _)| *n).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(first.problems.len(), 1);
        assert!(first.problems[0].contains("t.jsonl:2: not JSON"), "{:?}", first.problems);
        // The half-written fourth line waits.
        assert_eq!(first.cursor.lines, 3);
        std::fs::write(&path, "{\"a\":1}\nnot json\n{\"b\":2}\n{\"c\":3}\n").unwrap();
        let cursor = JsonlCursor::parse(Some(&first.cursor.encode()));
        let next = read_jsonl(&path, cursor, JsonlLimits::default()).unwrap();
        assert_eq!(next.records, vec![(4, serde_json::json!({"c": 3}))]);
    }

    #[test]
    fn an_oversized_line_is_skipped_with_its_line_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.jsonl");
        std::fs::write(&path, format!("{{\"x\":\"{}\"}}\n{{\"ok\":true}}\n", "y".repeat(100))).unwrap();
        let chunk = read_jsonl(&path, JsonlCursor::default(), JsonlLimits { max_line: 50, max_read: 1 << 20 }).unwrap();
        assert_eq!(chunk.records.len(), 1);
        assert!(chunk.problems[0].contains("big.jsonl:1:"), "{:?}", chunk.problems);
        // A line longer than the whole read window is stepped over, not stalled on.
        let stuck = read_jsonl(&path, JsonlCursor::default(), JsonlLimits { max_line: 50, max_read: 20 }).unwrap();
        assert!(stuck.cursor.offset > 0);
    }

    #[test]
    fn a_truncated_file_is_read_again_from_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, "{}\n").unwrap();
        let chunk = read_jsonl(&path, JsonlCursor { offset: 999, lines: 9 }, JsonlLimits::default()).unwrap();
        assert_eq!(chunk.records.len(), 1);
        assert!(
            read_jsonl(&dir.path().join("missing"), JsonlCursor::default(), JsonlLimits::default())
                .unwrap_err()
                .to_string()
                .contains("missing")
        );
    }
}
