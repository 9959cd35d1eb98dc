//! Files only the user may read: written atomically with mode 0600, and the long-term
//! identity kept in one. The bridge keeps its identity and paired devices this way, a
//! device its identity and paired bridges.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use terminull_protocol::crypto::keys::{Identity, IdentitySecrets};

/// Why a private file is unusable.
#[derive(Debug, thiserror::Error)]
pub enum PrivateFileError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not what it should be.
    #[error("{path}: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

impl PrivateFileError {
    /// Reading or writing `path` failed.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        PrivateFileError::Io { path: path.to_owned(), source }
    }

    /// `path` is not what it should be.
    pub fn corrupt(path: &Path, detail: impl std::fmt::Display) -> Self {
        PrivateFileError::Corrupt { path: path.to_owned(), detail: detail.to_string() }
    }
}

/// How [`write_private_json`] lays out the JSON: each file keeps the layout it always had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonLayout {
    /// Indented, for files a person may open.
    Pretty,
    /// One line.
    Compact,
}

/// The JSON value in `path`, or `None` when there is no such file.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, PrivateFileError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| PrivateFileError::corrupt(path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(PrivateFileError::io(path, e)),
    }
}

/// Writes `value` as JSON to `path` with [`write_private`].
pub fn write_private_json<T: Serialize + ?Sized>(
    path: &Path,
    value: &T,
    layout: JsonLayout,
) -> Result<(), PrivateFileError> {
    let text = match layout {
        JsonLayout::Pretty => serde_json::to_vec_pretty(value),
        JsonLayout::Compact => serde_json::to_vec(value),
    }
    .map_err(|e| PrivateFileError::corrupt(path, e))?;
    write_private(path, &text).map_err(|e| PrivateFileError::io(path, e))
}

/// The mode of every file of state or secrets: the user reads and writes it, no one else.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// The mode of every directory of state: only the user lists or enters it.
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// Creates `dir` and its missing parents with mode 0700 (existing ones are left as they are;
/// [`make_private_tree`] tightens those).
pub fn create_private_dir_all(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new().recursive(true).mode(PRIVATE_DIR_MODE).create(dir)
}

/// Creates the one directory `dir` with mode 0700; fails when it exists.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new().mode(PRIVATE_DIR_MODE).create(dir)
}

/// Open options whose `create` makes the file with mode 0600 (an existing file keeps its
/// mode; [`make_private_tree`] tightens it).
pub fn private_open_options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.mode(PRIVATE_FILE_MODE);
    options
}

/// Takes every permission of group and others away from `root` and everything under it
/// (files keep the user's bits, so an executable stays one), except the entries in `skip`
/// and what is under them. Symbolic links are neither changed nor followed. Returns what
/// was changed, in the order walked; a missing `root` changes nothing.
pub fn make_private_tree(root: &Path, skip: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut changed = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        if skip.iter().any(|s| s == &path) {
            continue;
        }
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7700))?;
            changed.push(path.clone());
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                pending.push(entry?.path());
            }
        }
    }
    Ok(changed)
}

/// Writes `bytes` to `path` readable by the user only, atomically (temp file, rename).
/// Missing parent directories are created with mode 0700.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        create_private_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = private_open_options().write(true).create(true).truncate(true).open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(PRIVATE_FILE_MODE))?;
    std::fs::rename(&tmp, path)
}

/// Loads the identity at `path`, creating it (mode 0600) when absent.
pub fn load_or_create_identity(path: &Path) -> Result<Identity, PrivateFileError> {
    match read_json::<IdentitySecrets>(path)? {
        Some(secrets) => Identity::from_secrets(&secrets).map_err(|e| PrivateFileError::corrupt(path, e)),
        None => {
            let identity = Identity::generate();
            write_private_json(path, &identity.secrets(), JsonLayout::Pretty)?;
            Ok(identity)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn the_identity_is_created_once_with_mode_0600_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys").join("identity.json");
        let a = load_or_create_identity(&path).unwrap();
        let b = load_or_create_identity(&path).unwrap();
        assert_eq!(a.public(), b.public());
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_private_tree_loses_group_and_other_bits_except_what_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("home");
        create_private_dir_all(&root.join("sessions/s1")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&root.join("sessions/s1")), 0o700);
        let log = root.join("sessions/s1/blocks.jsonl");
        std::fs::write(&log, b"x").unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(root.join("sessions"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let tool = root.join("ext/tool");
        std::fs::create_dir_all(root.join("ext")).unwrap();
        std::fs::write(&tool, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut changed = make_private_tree(&root, &[root.join("ext")]).unwrap();
        changed.sort();
        assert_eq!(changed, vec![root.join("sessions"), log.clone()]);
        assert_eq!((mode(&root.join("sessions")), mode(&log), mode(&tool)), (0o700, 0o600, 0o755));
        assert!(make_private_tree(&root, &[root.join("ext")]).unwrap().is_empty(), "nothing left to fix");
    }

    #[test]
    fn a_corrupt_identity_file_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("identity.json");
        std::fs::write(&path, b"{").unwrap();
        let err = load_or_create_identity(&path).unwrap_err();
        assert!(matches!(err, PrivateFileError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("identity.json"), "{err}");
    }

    #[test]
    fn json_written_privately_reads_back_and_a_missing_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("list.json");
        assert_eq!(read_json::<Vec<u32>>(&path).unwrap(), None);
        write_private_json(&path, &[1, 2], JsonLayout::Compact).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[1,2]");
        assert_eq!(read_json::<Vec<u32>>(&path).unwrap(), Some(vec![1, 2]));
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
