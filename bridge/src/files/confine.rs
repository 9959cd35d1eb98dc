//! Confinement of a device's paths to one directory (a session's, or a repository's
//! top level).
//!
//! A path is checked twice. Lexically ([`relative`]): relative, `/`-separated, no `..`
//! part, no NUL, at most [`MAX_PATH_BYTES`]. Then on disk ([`Root::resolve`]): the
//! root joined with it is canonicalized (every symlink followed) and must still lie
//! under the canonical root. A file is opened ([`Root::open_file`]) only after its
//! type was checked without opening it (a FIFO or device is never opened), with
//! `O_NONBLOCK | O_NOFOLLOW`; the opened descriptor is checked again (`fstat`: a
//! regular file; `/proc/self/fd`: still under the root) before a byte is read.
//!
//! Residual race (TOCTOU): a process on the bridge's machine that can rename
//! directories inside the root may swap a directory for a symlink between the
//! canonicalization and the `open`. The post-open check of the descriptor's real path
//! catches that for reads (nothing is read from a file outside); for a write, the new
//! contents are written to a temporary file in the checked directory and renamed over
//! the target, so a swap in that window can place the file where the symlink leads.
//! Such a process already runs as the user, so it gains nothing it did not have.

use std::fs::{File, Metadata};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use terminull_protocol::files::MAX_PATH_BYTES;

use super::FilesError;

/// A canonical directory that paths are confined to.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
}

/// A path checked to lie under the root.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The path as the device should name it: relative, normalized (`""` for the root).
    pub rel: String,
    /// Its canonical path on disk.
    pub real: PathBuf,
}

/// The lexical check: `path` as normal components only (`""` and `.` are the root).
pub fn relative(path: &str) -> Result<PathBuf, FilesError> {
    let refuse = |why: &str| FilesError::Refused { path: display(path), why: why.to_owned() };
    if path.len() > MAX_PATH_BYTES {
        return Err(refuse(&format!("it is longer than {MAX_PATH_BYTES} bytes")));
    }
    if path.contains('\0') {
        return Err(refuse("it contains a NUL byte"));
    }
    if path.starts_with('/') {
        return Err(refuse("it is absolute; paths are relative to the session's directory"));
    }
    let mut rel = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => rel.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(refuse("it has a `..` part; paths may not leave the directory")),
            Component::RootDir | Component::Prefix(_) => return Err(refuse("it is absolute")),
        }
    }
    Ok(rel)
}

/// `path` shortened for a message (a hostile path can be 4 KiB).
pub fn display(path: &str) -> String {
    crate::files::cut(path, 200)
}

impl Root {
    /// The root at `dir`, canonicalized; it must be a directory.
    pub fn new(dir: &Path) -> Result<Self, FilesError> {
        let real = dir.canonicalize().map_err(|e| FilesError::Io {
            path: dir.display().to_string(),
            what: "opening the session's directory",
            error: e,
        })?;
        if !real.is_dir() {
            return Err(FilesError::NotFound { path: dir.display().to_string(), hint: " (not a directory)" });
        }
        Ok(Self { dir: real })
    }

    /// The canonical directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `path` checked lexically and on disk: it exists and its canonical path lies
    /// under the root.
    pub fn resolve(&self, path: &str) -> Result<Resolved, FilesError> {
        let rel = relative(path)?;
        let joined = self.dir.join(&rel);
        let real = joined.canonicalize().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FilesError::NotFound {
                path: display(path),
                hint: if path.contains('\u{FFFD}') {
                    " (a name listed with U+FFFD is not valid UTF-8 and cannot be opened from a device)"
                } else {
                    ""
                },
            },
            _ => FilesError::Io { path: display(path), what: "resolving", error: e },
        })?;
        self.check_inside(path, &real)?;
        Ok(Resolved { rel: rel_string(&rel), real })
    }

    /// Refuses `real` (a canonical path) unless it lies under the root.
    fn check_inside(&self, path: &str, real: &Path) -> Result<(), FilesError> {
        if real.starts_with(&self.dir) {
            Ok(())
        } else {
            Err(FilesError::Refused {
                path: display(path),
                why: "it leads outside the session's directory (through a symlink)".into(),
            })
        }
    }

    /// Opens a regular file for reading, refusing anything else before opening it,
    /// and checks the descriptor after (see the module's doc). Returns the file and
    /// its metadata (from the descriptor).
    pub fn open_file(&self, path: &str, resolved: &Resolved) -> Result<(File, Metadata), FilesError> {
        let before = std::fs::metadata(&resolved.real).map_err(|e| FilesError::Io {
            path: display(path),
            what: "reading the type of",
            error: e,
        })?;
        refuse_unless_file(path, &before)?;
        let nonblock = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nonblock.bits() as i32)
            .open(&resolved.real)
            .map_err(|e| FilesError::Io { path: display(path), what: "opening", error: e })?;
        let meta = file.metadata().map_err(|e| FilesError::Io { path: display(path), what: "reading", error: e })?;
        refuse_unless_file(path, &meta)?;
        if let Ok(now) = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file))) {
            self.check_inside(path, &now)?;
        }
        Ok((file, meta))
    }
}

/// Refuses a directory, FIFO, socket or device, naming what it is.
pub fn refuse_unless_file(path: &str, meta: &Metadata) -> Result<(), FilesError> {
    let kind = meta.file_type();
    let what = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe); it is never opened"
    } else if kind.is_socket() {
        "a socket; it is never opened"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device; it is never opened"
    } else {
        "not a regular file"
    };
    Err(FilesError::Refused { path: display(path), why: format!("it is {what}") })
}

/// `rel` as a `/`-separated string (lossy only for names that are not UTF-8, which
/// cannot come from a request).
fn rel_string(rel: &Path) -> String {
    rel.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_check_refuses_parent_absolute_and_nul_and_normalizes_dots() {
        for bad in ["..", "a/../b", "/etc/passwd", "a\0b", "./../x"] {
            assert!(matches!(relative(bad), Err(FilesError::Refused { .. })), "{bad:?}");
        }
        assert_eq!(relative("./a//b/.").unwrap(), PathBuf::from("a/b"));
        assert_eq!(relative("").unwrap(), PathBuf::new());
        assert!(matches!(relative(&"x".repeat(MAX_PATH_BYTES + 1)), Err(FilesError::Refused { .. })));
    }
}
