//! A child's whole process tree, beyond its process group.
//!
//! Signals to the child's process group reach everything that stays in the group. A
//! descendant that calls `setsid` (or `setpgid`) leaves it, and once the child exits its
//! orphans are re-parented to init: neither the group nor the parent chain finds them.
//! So every child started by [`AgentProcess`](super::AgentProcess) gets a tag of its own,
//! unique on the machine, in [`TREE_ENV`]; every process it starts inherits it (a nested
//! [`AgentProcess`](super::AgentProcess) appends its own tag, keeping its starter's).
//! [`signal_tree`] finds on Linux, through `/proc`, every process whose initial
//! environment carries the tag, plus every descendant of such a process (whatever its
//! environment), and signals them.
//!
//! What is not found: a descendant that both replaced its environment without the tag
//! (`env -i`, an `execve` with a fresh environment) and lost its parent chain to a tagged
//! process, a process of another user (its `environ` is unreadable), and anything outside
//! Linux. A pid freed and reused between the scan and the signal could be hit; the window
//! is the scan's own (milliseconds), the same as any `pkill`.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::signal::Signal;

/// The environment variable carrying the tags of the process trees a process belongs
/// to, `:`-separated, innermost last (each `<starter pid>-<counter>-<nanoseconds>`).
pub const TREE_ENV: &str = "TERMINULL_PROCESS_TREE";

/// Most tags kept in [`TREE_ENV`]: a deeper nesting drops the outermost ones.
const MAX_TAGS: usize = 16;
/// The most bytes read from one `/proc/<pid>/environ`.
const MAX_ENVIRON: u64 = 512 * 1024;
/// The most bytes read from one `/proc/<pid>/stat`.
const MAX_STAT: u64 = 4096;
/// Longest parent chain followed from one process (a racy table cannot loop forever).
const MAX_DEPTH: usize = 256;

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A tag no other process tree on this machine carries.
pub(crate) fn new_tag() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{}-{}-{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The value of [`TREE_ENV`] for a child tagged `tag` whose starter had `inherited`.
pub(crate) fn env_value(inherited: Option<OsString>, tag: &str) -> String {
    let inherited = inherited.map(|v| v.to_string_lossy().into_owned()).unwrap_or_default();
    let mut tags: Vec<&str> = inherited.split(':').filter(|t| !t.is_empty()).collect();
    tags.push(tag);
    let skip = tags.len().saturating_sub(MAX_TAGS);
    tags[skip..].join(":")
}

/// True when an `environ` (NUL-separated `KEY=value`) carries `tag` in [`TREE_ENV`].
fn carries(environ: &[u8], tag: &str) -> bool {
    let key = format!("{TREE_ENV}=");
    environ
        .split(|b| *b == 0)
        .filter_map(|var| var.strip_prefix(key.as_bytes()))
        .any(|value| value.split(|b| *b == b':').any(|t| t == tag.as_bytes()))
}

/// The pids of the live processes of tree `tag`: those whose environment carries it
/// and their descendants. Never this process, never pid 1. Empty outside Linux.
pub fn tree_pids(tag: &str) -> Vec<u32> {
    if !cfg!(target_os = "linux") {
        return Vec::new();
    }
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let own = std::process::id();
    let mut parents: HashMap<u32, u32> = HashMap::new();
    let mut tagged: Vec<u32> = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Some(stat) = read_bounded(&format!("/proc/{pid}/stat"), MAX_STAT) else { continue };
        let Some((state, ppid)) = parse_stat(&stat) else { continue };
        if state == 'Z' || state == 'X' {
            continue; // already dead, only awaiting its parent's wait
        }
        parents.insert(pid, ppid);
        if read_bounded(&format!("/proc/{pid}/environ"), MAX_ENVIRON).is_some_and(|env| carries(&env, tag)) {
            tagged.push(pid);
        }
    }
    let in_tree = |pid: u32| {
        let mut at = pid;
        for _ in 0..MAX_DEPTH {
            if tagged.contains(&at) {
                return true;
            }
            match parents.get(&at) {
                Some(&ppid) if ppid > 1 && ppid != at => at = ppid,
                _ => return false,
            }
        }
        false
    };
    let mut pids: Vec<u32> = parents.keys().copied().filter(|&pid| pid > 1 && pid != own && in_tree(pid)).collect();
    pids.sort_unstable();
    pids
}

/// Sends `signal` to every live process of tree `tag` ([`tree_pids`]); returns the pids
/// signalled (those that vanished meanwhile included).
pub fn signal_tree(tag: &str, signal: Signal) -> io::Result<Vec<u32>> {
    let pids = tree_pids(tag);
    for &pid in &pids {
        let raw = i32::try_from(pid).map_err(|_| io::Error::other(format!("pid {pid} out of range")))?;
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), signal) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(errno) => tracing::debug!(pid, %signal, %errno, "could not signal a process of the tree"),
        }
    }
    Ok(pids)
}

/// State letter and ppid from `/proc/<pid>/stat`: the fields after the `)` closing the
/// command name (which may itself hold spaces and parentheses).
fn parse_stat(stat: &[u8]) -> Option<(char, u32)> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

fn read_bounded(path: &str, max: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    File::open(path).ok()?.take(max).read_to_end(&mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_nest_bounded_and_are_matched_whole() {
        let value = env_value(Some("a:b".into()), "c");
        assert_eq!(value, "a:b:c");
        let deep = (0..40).map(|i| i.to_string()).collect::<Vec<_>>().join(":");
        assert_eq!(env_value(Some(deep.into()), "x").split(':').count(), MAX_TAGS);
        let environ = b"PATH=/bin\0TERMINULL_PROCESS_TREE=1-2-3:4-5-6\0";
        assert!(carries(environ, "1-2-3") && carries(environ, "4-5-6"));
        assert!(!carries(environ, "1-2") && !carries(environ, "5"));
        assert_ne!(new_tag(), new_tag());
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        assert_eq!(parse_stat(b"42 (a) b (c)) S 7 42 42"), Some(('S', 7)));
        assert_eq!(parse_stat(b"garbage"), None);
    }
}
