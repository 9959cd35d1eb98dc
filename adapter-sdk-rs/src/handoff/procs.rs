//! The machine's processes, read from `/proc`, and which of them is a native agent
//! driving a directory (for `is_cwd_externally_owned`).
//!
//! Every process an adapter or the bridge starts through [`crate::child::AgentProcess`]
//! carries [`SESSION_MARKER_ENV`] in its environment, and its descendants inherit it; a
//! process with the marker, or with an ancestor that has it, is terminull's own and never
//! an owner. `/proc` is untrusted input: every read here is bounded.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use terminull_protocol::adapter::{IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult};

use super::SESSION_MARKER_ENV;

/// `is_cwd_externally_owned` for a CLI named one of `names`: a native process (see
/// [`find_native_owner`]) in the directory, not a probe (`--version`), whose arguments
/// may drive the session asked about (`drives(argv, session id)`).
pub fn owned_by_cli(
    names: &[&str],
    params: &IsCwdExternallyOwnedParams,
    drives: impl Fn(&[String], Option<&str>) -> bool,
) -> IsCwdExternallyOwnedResult {
    owned_where(params, |p, sid| {
        p.program_names().iter().any(|n| names.contains(&n.as_str())) && !is_probe(&p.argv) && drives(&p.argv, sid)
    })
}

/// `is_cwd_externally_owned` with the whole test on a process in the directory left to
/// `owns(process, session id)` (for a CLI known by its package path rather than its
/// name, say).
pub fn owned_where(
    params: &IsCwdExternallyOwnedParams,
    owns: impl Fn(&ProcInfo, Option<&str>) -> bool,
) -> IsCwdExternallyOwnedResult {
    let sid = params.agent_session_id.as_ref().map(ToString::to_string);
    let pid = find_native_owner_where(Path::new(&params.cwd), |p| owns(p, sid.as_deref()));
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

/// `dir` is `root` or lies under it (whole path components, after resolving symlinks
/// when possible): a CLI started in a subdirectory of a session's directory may write
/// into its conversation (it can resume it by id), so it counts as an owner.
pub fn within_dir(dir: &Path, root: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    dir.starts_with(root) || canon(dir).starts_with(canon(root))
}

/// The native agent process driving `cwd`: a process whose program name is one of
/// `names`, whose working directory is `cwd` or a directory under it ([`within_dir`]), that is not terminull's own (see
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
    owner_among(table, self_pid, |p| p.cwd.as_deref().is_some_and(|d| within_dir(d, cwd)) && is_agent(p))
}

/// The lowest pid (for a stable answer) of the processes `is_owner` accepts that are not
/// terminull's own.
fn owner_among(table: &ProcessTable, self_pid: u32, is_owner: impl Fn(&ProcInfo) -> bool) -> Option<u32> {
    table.iter().filter(|p| is_owner(p) && !table.is_terminulls(p.pid, self_pid)).map(|p| p.pid).min()
}

/// Over the live `/proc`: a process `is_owner` accepts wherever its working directory
/// is, not terminull's own (for a CLI told its directory by a flag, like `droid --cwd`).
pub fn find_owner_anywhere(is_owner: impl Fn(&ProcInfo) -> bool) -> Option<u32> {
    owner_among(&ProcessTable::read(), std::process::id(), is_owner)
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_native_cli_in_a_subdirectory_owns_the_directory_and_one_in_a_sibling_or_parent_does_not() {
        let table = ProcessTable::from_procs([
            proc(1, 0, &["init"], "/", false),
            proc(11, 1, &["claude"], "/w/sub/deep", false),
        ]);
        assert_eq!(native_owner(&table, &["claude"], Path::new("/w"), 999, |_| true), Some(11), "under /w");
        assert_eq!(native_owner(&table, &["claude"], Path::new("/w/sub"), 999, |_| true), Some(11));
        assert_eq!(native_owner(&table, &["claude"], Path::new("/w/sub/deep/er"), 999, |_| true), None, "a parent");
        assert_eq!(native_owner(&table, &["claude"], Path::new("/w/su"), 999, |_| true), None, "whole components");
        assert!(within_dir(Path::new("/w"), Path::new("/w")) && !within_dir(Path::new("/wx"), Path::new("/w")));
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
}
