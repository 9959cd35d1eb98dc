//! What a bridge does to its home before it uses it: the home must be the user's
//! (OpenSSH StrictModes style), one bridge at a time holds it (an exclusive `flock` on
//! `<home>/bridge.lock`, released by the kernel when the process ends, so a stale file
//! never blocks), and state left readable by others is made private. Drop-ins are
//! checked the same way by the registry ([`check_strict`]).

use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use terminull_net::private_file;

use crate::home::Home;

/// Why the home cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HomeGuardError {
    /// Another process holds the home's lock.
    #[error(
        "another bridge is using the home {home}: {holder}. Stop it first, or talk to it \
         (`terminull chat`/`attach` use a running daemon's socket)"
    )]
    Held {
        /// The home.
        home: PathBuf,
        /// Who holds it, as its lock file says (pid and command).
        holder: String,
    },
    /// The home (or a file in it) is not safe to trust.
    #[error("{0}")]
    Unsafe(String),
    /// Reading or writing the home failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The home's lock, held while this value lives.
#[derive(Debug)]
pub struct HomeLock {
    /// Holding the open file holds the lock.
    _file: File,
    path: PathBuf,
}

impl HomeLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The lock file of `home`.
pub fn lock_file(home: &Home) -> PathBuf {
    home.root().join("bridge.lock")
}

/// The current user's id.
pub fn current_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Creates the home (mode 0700) if missing, refuses it unless it is the user's and not
/// writable by others, takes its lock for `what` (e.g. `terminull up`), and makes the
/// state in it private. Logs one line naming what it made private, if anything.
pub fn prepare(home: &Home, what: &str) -> Result<HomeLock, HomeGuardError> {
    let root = home.root();
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| HomeGuardError::Io { path, source }
    };
    private_file::create_private_dir_all(root).map_err(io(root))?;
    check_strict(root, None).map_err(HomeGuardError::Unsafe)?;
    let lock = lock(home, what)?;
    // Drop-ins are code, checked (not changed) by the registry.
    let fixed = private_file::make_private_tree(root, &[home.ext_adapters()]).map_err(io(root))?;
    if !fixed.is_empty() {
        let shown: Vec<_> = fixed.iter().take(5).map(|p| p.display().to_string()).collect();
        let more = if fixed.len() > 5 { format!(" and {} more", fixed.len() - 5) } else { String::new() };
        tracing::info!(
            "made {} paths in {} private (group and others could read them): {}{more}",
            fixed.len(),
            root.display(),
            shown.join(", ")
        );
    }
    Ok(lock)
}

/// Takes `<home>/bridge.lock` for `what`, or names the process that holds it.
pub fn lock(home: &Home, what: &str) -> Result<HomeLock, HomeGuardError> {
    let path = lock_file(home);
    let io = |source| HomeGuardError::Io { path: path.clone(), source };
    let mut file = private_file::private_open_options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.take(4096).read_to_string(&mut text);
            let holder = holder_of(&text);
            return Err(HomeGuardError::Held { home: home.root().to_owned(), holder });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
    }
    let line = format!("pid {}: {what}\n", std::process::id());
    file.set_len(0).and_then(|()| file.rewind()).and_then(|()| file.write_all(line.as_bytes())).map_err(io)?;
    Ok(HomeLock { _file: file, path })
}

/// The holder as a lock file's text names it (one line, printable, bounded).
fn holder_of(text: &str) -> String {
    let line: String = text.lines().next().unwrap_or("").chars().filter(|c| !c.is_control()).take(300).collect();
    if line.is_empty() { "a process that has not written its name yet".to_owned() } else { line }
}

/// OpenSSH StrictModes: `path` must be owned by the user or root and not writable by
/// group or others; with `up_to`, so must each directory between `path` and `up_to`
/// (both included). The error names the offending path and the command that fixes it.
pub fn check_strict(path: &Path, up_to: Option<&Path>) -> Result<(), String> {
    let uid = current_uid();
    let mut at = Some(path);
    while let Some(p) = at {
        let meta = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        if meta.uid() != uid && meta.uid() != 0 {
            return Err(format!(
                "{} is owned by uid {}, not by you (uid {uid}) or root; it would run as you. \
                 Remove it, or take it over: `chown {uid} {}`",
                p.display(),
                meta.uid(),
                p.display()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is writable by {} (mode {:o}); anyone who can write it could run code as you. \
                 Fix it: `chmod go-w {}`",
                p.display(),
                if meta.mode() & 0o002 != 0 { "others" } else { "its group" },
                meta.mode() & 0o7777,
                p.display()
            ));
        }
        at = match up_to {
            Some(stop) if p != stop && p.starts_with(stop) => p.parent(),
            _ => None,
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_second_lock_on_a_home_names_the_holder_and_a_released_one_can_be_taken_again() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let first = lock(&home, "terminull up").unwrap();
        let err = lock(&home, "terminull chat").unwrap_err().to_string();
        assert!(err.contains(&format!("pid {}: terminull up", std::process::id())), "{err}");
        drop(first);
        // A child that another test of this process forks right now shares the lock's open
        // file (flock locks belong to it) until it execs, when O_CLOEXEC closes its copy:
        // under load that can take a moment (one CI run saw `Held` here).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let again = loop {
            match lock(&home, "terminull chat") {
                Ok(again) => break again,
                Err(HomeGuardError::Held { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("the released lock was not taken again: {e}"),
            }
        };
        assert_eq!(
            std::fs::read_to_string(again.path()).unwrap(),
            format!("pid {}: terminull chat\n", std::process::id())
        );
    }

    #[test]
    fn strict_modes_refuse_a_group_writable_parent_up_to_the_home_only() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let ext = home.join("ext");
        std::fs::create_dir_all(&ext).unwrap();
        let file = ext.join("tool");
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        for p in [&home, &ext] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        check_strict(&file, Some(&home)).unwrap();
        std::fs::set_permissions(&ext, std::fs::Permissions::from_mode(0o775)).unwrap();
        let err = check_strict(&file, Some(&home)).unwrap_err();
        assert!(err.contains(&ext.display().to_string()) && err.contains("chmod go-w"), "{err}");
        std::fs::set_permissions(&ext, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Above the home is not looked at (a home may live under /tmp, 1777).
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        check_strict(&file, Some(&home)).unwrap();
    }
}
