//! The `files` control message: a session's directory listed, read and written from
//! a paired device, confined to that directory ([`confine`]) and bounded in size and
//! count (docs/files-and-git.md).

use std::io::Read;
use std::path::Path;
use std::time::UNIX_EPOCH;

use base64::Engine;
use sha2::{Digest, Sha256};
use terminull_protocol::control::{ReplyError, ReplyErrorCode};
use terminull_protocol::files::{
    DEFAULT_LIST_ENTRIES, DirEntry, EntryKind, FilesRequest, FilesResult, MAX_IMAGE_BYTES, MAX_LIST_ENTRIES,
    MAX_REPLY_BYTES, MAX_TEXT_BYTES,
};

pub mod confine;

use confine::{Root, display, refuse_unless_file};

/// Why a `files` request failed.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The path may not be used.
    #[error("`{path}` is refused: {why}")]
    Refused {
        /// The path as asked (cut).
        path: String,
        /// Why, for a person.
        why: String,
    },
    /// Nothing there.
    #[error("`{path}` does not exist{hint}")]
    NotFound {
        /// The path as asked (cut).
        path: String,
        /// More for a person, or empty.
        hint: &'static str,
    },
    /// Larger than the limit.
    #[error("`{path}` is {} ({size} bytes); {what} larger than {} are not shown", human(*size), human(*limit))]
    TooLarge {
        /// The path.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
        /// `files` or `images`.
        what: &'static str,
    },
    /// Not text, or not a known image.
    #[error("`{path}` ({size} bytes) {why}")]
    NotText {
        /// The path.
        path: String,
        /// Its size.
        size: u64,
        /// Why, for a person.
        why: &'static str,
    },
    /// The file changed since it was read, or exists already.
    #[error("`{path}` {why}; read it again before saving")]
    Conflict {
        /// The path.
        path: String,
        /// What changed.
        why: &'static str,
    },
    /// A malformed request field.
    #[error("{0}")]
    Invalid(String),
    /// An I/O failure.
    #[error("{what} `{path}`: {error}")]
    Io {
        /// The path.
        path: String,
        /// What was being done.
        what: &'static str,
        /// The failure.
        error: std::io::Error,
    },
}

impl FilesError {
    /// The reply code that carries it.
    pub fn code(&self) -> ReplyErrorCode {
        match self {
            FilesError::Refused { .. } => ReplyErrorCode::PathRefused,
            FilesError::NotFound { .. } => ReplyErrorCode::NotFound,
            FilesError::TooLarge { .. } => ReplyErrorCode::TooLarge,
            FilesError::NotText { .. } => ReplyErrorCode::NotText,
            FilesError::Conflict { .. } => ReplyErrorCode::Conflict,
            FilesError::Invalid(_) => ReplyErrorCode::InvalidMessage,
            FilesError::Io { error, .. } if error.kind() == std::io::ErrorKind::NotFound => ReplyErrorCode::NotFound,
            // Unreadable for the bridge's user, or a symlink loop: the path, not the bridge.
            FilesError::Io { error, .. }
                if error.kind() == std::io::ErrorKind::PermissionDenied
                    || error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) =>
            {
                ReplyErrorCode::PathRefused
            }
            FilesError::Io { .. } => ReplyErrorCode::Internal,
        }
    }
}

impl From<FilesError> for ReplyError {
    fn from(e: FilesError) -> Self {
        ReplyError { code: e.code(), message: e.to_string() }
    }
}

/// A size for a person: `1.0 GiB`, `256 KiB`, `12 bytes`.
pub fn human(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit {
            return if bytes.is_multiple_of(unit) {
                format!("{} {name}", bytes / unit)
            } else {
                format!("{:.1} {name}", bytes as f64 / unit as f64)
            };
        }
    }
    format!("{bytes} bytes")
}

/// `s` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Answers one `files` request in the directory `dir` (blocking I/O: runs on a
/// blocking thread).
pub async fn handle(dir: &Path, request: FilesRequest) -> Result<FilesResult, FilesError> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || handle_blocking(&dir, request))
        .await
        .unwrap_or_else(|e| Err(FilesError::Invalid(format!("the files request failed: {e}"))))
}

fn handle_blocking(dir: &Path, request: FilesRequest) -> Result<FilesResult, FilesError> {
    let root = Root::new(dir)?;
    match request {
        FilesRequest::List { path, limit } => list(&root, &path, limit),
        FilesRequest::ReadText { path } => read_text(&root, &path),
        FilesRequest::ReadImage { path } => read_image(&root, &path),
        FilesRequest::WriteText { path, text, expected_sha256 } => write_text(&root, &path, &text, expected_sha256),
    }
}

fn mtime_ms(meta: &std::fs::Metadata) -> Option<u64> {
    let since = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// A directory's first `limit` entries (in the order the system yields them), sorted;
/// reading stops after `limit` + 1 entries or [`MAX_REPLY_BYTES`] of names.
fn list(root: &Root, path: &str, limit: Option<u32>) -> Result<FilesResult, FilesError> {
    let resolved = root.resolve(path)?;
    let meta = std::fs::metadata(&resolved.real).map_err(|e| FilesError::Io {
        path: display(path),
        what: "reading",
        error: e,
    })?;
    if !meta.is_dir() {
        return Err(FilesError::Refused { path: display(path), why: "it is not a directory".into() });
    }
    let limit = limit.unwrap_or(DEFAULT_LIST_ENTRIES).clamp(1, MAX_LIST_ENTRIES) as usize;
    let reader = std::fs::read_dir(&resolved.real).map_err(|e| FilesError::Io {
        path: display(path),
        what: "listing",
        error: e,
    })?;
    let mut entries = Vec::new();
    let mut truncated = false;
    // Room for the reply's other fields and JSON escaping of the names.
    let mut budget = MAX_REPLY_BYTES / 2;
    for entry in reader {
        let Ok(entry) = entry else { continue };
        if entries.len() == limit {
            truncated = true;
            break;
        }
        let raw = entry.file_name();
        let name = raw.to_string_lossy().into_owned();
        let cost = name.len() + 96;
        if cost > budget {
            truncated = true;
            break;
        }
        budget -= cost;
        let utf8 = raw.to_str().is_some();
        let meta = entry.metadata().ok();
        let kind = match entry.file_type() {
            Ok(t) if t.is_dir() => EntryKind::Dir,
            Ok(t) if t.is_file() => EntryKind::File,
            Ok(t) if t.is_symlink() => EntryKind::Symlink,
            _ => EntryKind::Special,
        };
        let size = match kind {
            EntryKind::File => meta.as_ref().map_or(0, std::fs::Metadata::len),
            _ => 0,
        };
        entries.push(DirEntry { name, kind, size, mtime_ms: meta.as_ref().and_then(mtime_ms), utf8 });
    }
    entries.sort_by(|a, b| (a.kind != EntryKind::Dir, &a.name).cmp(&(b.kind != EntryKind::Dir, &b.name)));
    Ok(FilesResult::List { path: resolved.rel, entries, truncated })
}

/// Reads at most `limit` bytes of a confined regular file, refusing a larger one by
/// its size before reading.
fn read_bounded(
    root: &Root,
    path: &str,
    limit: u64,
    what: &'static str,
) -> Result<(String, Vec<u8>, std::fs::Metadata), FilesError> {
    let resolved = root.resolve(path)?;
    let (file, meta) = root.open_file(path, &resolved)?;
    if meta.len() > limit {
        return Err(FilesError::TooLarge { path: display(path), size: meta.len(), limit, what });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(|e| FilesError::Io {
        path: display(path),
        what: "reading",
        error: e,
    })?;
    if bytes.len() as u64 > limit {
        // It grew while being read.
        return Err(FilesError::TooLarge { path: display(path), size: bytes.len() as u64, limit, what });
    }
    Ok((resolved.rel, bytes, meta))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn read_text(root: &Root, path: &str) -> Result<FilesResult, FilesError> {
    let (rel, bytes, meta) = read_bounded(root, path, MAX_TEXT_BYTES, "files")?;
    let size = bytes.len() as u64;
    if bytes.contains(&0) {
        return Err(FilesError::NotText { path: display(path), size, why: "is binary (it has NUL bytes)" });
    }
    let sha256 = sha256_hex(&bytes);
    let text = String::from_utf8(bytes).map_err(|_| FilesError::NotText {
        path: display(path),
        size,
        why: "is not UTF-8 text",
    })?;
    Ok(FilesResult::ReadText { path: rel, text, size, mtime_ms: mtime_ms(&meta), sha256 })
}

/// The image type of `bytes`, from their first bytes (SVG: from the name and a
/// `<svg` tag).
fn image_type(path: &str, bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else if path.to_ascii_lowercase().ends_with(".svg")
        && std::str::from_utf8(&bytes[..bytes.len().min(4096)]).is_ok_and(|s| s.contains("<svg"))
    {
        Some("image/svg+xml")
    } else {
        None
    }
}

fn read_image(root: &Root, path: &str) -> Result<FilesResult, FilesError> {
    let (rel, bytes, _) = read_bounded(root, path, MAX_IMAGE_BYTES, "images")?;
    let size = bytes.len() as u64;
    let mime_type = image_type(path, &bytes).ok_or(FilesError::NotText {
        path: display(path),
        size,
        why: "is not a PNG, JPEG, GIF, WebP or SVG image",
    })?;
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(FilesResult::ReadImage { path: rel, mime_type: mime_type.into(), data, size })
}

/// Replaces (or creates) a text file through a temporary file in its directory,
/// refused when the file's hash is not `expected` (or it exists and none was given).
fn write_text(root: &Root, path: &str, text: &str, expected: Option<String>) -> Result<FilesResult, FilesError> {
    if text.len() as u64 > MAX_TEXT_BYTES {
        return Err(FilesError::TooLarge {
            path: display(path),
            size: text.len() as u64,
            limit: MAX_TEXT_BYTES,
            what: "files",
        });
    }
    let rel = confine::relative(path)?;
    let Some(name) = rel.file_name().map(ToOwned::to_owned) else {
        return Err(FilesError::Refused { path: display(path), why: "it names no file".into() });
    };
    let parent = rel.parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = root.resolve(&parent)?;
    let target = dir.real.join(&name);
    let current = match std::fs::symlink_metadata(&target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(FilesError::Refused {
                path: display(path),
                why: "it is a symlink; save its target instead".into(),
            });
        }
        Ok(meta) => {
            refuse_unless_file(path, &meta)?;
            let resolved = root.resolve(path)?;
            let (mut file, _) = root.open_file(path, &resolved)?;
            let mut bytes = Vec::new();
            (&mut file).take(MAX_TEXT_BYTES + 1).read_to_end(&mut bytes).map_err(|e| FilesError::Io {
                path: display(path),
                what: "reading",
                error: e,
            })?;
            Some((sha256_hex(&bytes), meta.permissions()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(FilesError::Io { path: display(path), what: "reading", error: e }),
    };
    match (&current, &expected) {
        (None, Some(_)) => {
            return Err(FilesError::Conflict { path: display(path), why: "was deleted since it was read" });
        }
        (Some(_), None) => return Err(FilesError::Conflict { path: display(path), why: "exists already" }),
        (Some((now, _)), Some(want)) if now != want => {
            return Err(FilesError::Conflict { path: display(path), why: "changed on disk since it was read" });
        }
        _ => {}
    }
    let io = |what| move |e| FilesError::Io { path: display(path), what, error: e };
    let mut temp = tempfile::NamedTempFile::new_in(&dir.real).map_err(io("creating a file beside"))?;
    std::io::Write::write_all(&mut temp, text.as_bytes()).map_err(io("writing"))?;
    // A new file gets the usual 0644; a replaced one keeps its mode.
    let permissions = match current {
        Some((_, permissions)) => permissions,
        None => std::os::unix::fs::PermissionsExt::from_mode(0o644),
    };
    std::fs::set_permissions(temp.path(), permissions).map_err(io("setting the permissions of"))?;
    temp.persist(&target).map_err(|e| FilesError::Io { path: display(path), what: "saving", error: e.error })?;
    let rel = if dir.rel.is_empty() {
        name.to_string_lossy().into_owned()
    } else {
        format!("{}/{}", dir.rel, name.to_string_lossy())
    };
    Ok(FilesResult::WriteText { path: rel, size: text.len() as u64, sha256: sha256_hex(text.as_bytes()) })
}
