//! Files only the user may read: written atomically with mode 0600, and the long-term
//! identity kept in one. The bridge keeps its identity and paired devices this way, a
//! device its identity and paired bridges.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
    let io = |source| PrivateFileError::Io { path: path.to_owned(), source };
    match std::fs::read(path) {
        Ok(bytes) => {
            let corrupt = |detail: String| PrivateFileError::Corrupt { path: path.to_owned(), detail };
            let secrets: IdentitySecrets = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
            Identity::from_secrets(&secrets).map_err(|e| corrupt(e.to_string()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let identity = Identity::generate();
            let text = serde_json::to_vec_pretty(&identity.secrets()).map_err(|e| io(std::io::Error::other(e)))?;
            write_private(path, &text).map_err(io)?;
            Ok(identity)
        }
        Err(e) => Err(io(e)),
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
}
