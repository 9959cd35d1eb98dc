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

/// Writes `bytes` to `path` readable by the user only, atomically (temp file, rename).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
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
