//! The `files` control message: browse, read and (optionally) write the files of a
//! session's directory (docs/files-and-git.md).
//!
//! A request names its session and an `op`; every path is relative to the session's
//! directory, `/`-separated, and never leaves it (the bridge refuses `..`, absolute
//! paths and symlinks that lead outside). Every reply is bounded: at most
//! [`MAX_REPLY_BYTES`] of JSON, listings cut at [`MAX_LIST_ENTRIES`] with `truncated`
//! set, text and images refused above [`MAX_TEXT_BYTES`] and [`MAX_IMAGE_BYTES`] with
//! their size in the message.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most entries one `list` returns (also the cap on its `limit`).
pub const MAX_LIST_ENTRIES: u32 = 2000;
/// Entries a `list` returns when it gives no `limit`.
pub const DEFAULT_LIST_ENTRIES: u32 = 500;
/// Largest text file `read_text` returns, and largest `write_text` body.
pub const MAX_TEXT_BYTES: u64 = 256 * 1024;
/// Largest image `read_image` returns (before base64).
pub const MAX_IMAGE_BYTES: u64 = 256 * 1024;
/// Largest JSON reply any `files` or `git` request produces: the bridge stops a listing
/// (or a diff) before it grows past this, so a sealed reply stays under the relay's
/// 1 MiB message limit.
pub const MAX_REPLY_BYTES: usize = 512 * 1024;
/// Longest path (in bytes) a request may name.
pub const MAX_PATH_BYTES: usize = 4096;

/// What a `files` request asks, tagged by `op`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FilesRequest {
    /// List a directory's entries, sorted by name (directories first).
    List {
        /// The directory, relative to the session's directory; `""` or `"."` is the
        /// session's directory itself.
        #[serde(default)]
        path: String,
        /// Most entries wanted (default [`DEFAULT_LIST_ENTRIES`], at most
        /// [`MAX_LIST_ENTRIES`]); the listing says `truncated` when there were more.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
    },
    /// Read a text file (UTF-8, at most [`MAX_TEXT_BYTES`]); a binary or larger file is
    /// refused with its size.
    ReadText {
        /// The file, relative to the session's directory.
        path: String,
    },
    /// Read an image (PNG, JPEG, GIF, WebP, SVG, at most [`MAX_IMAGE_BYTES`]), base64.
    ReadImage {
        /// The file, relative to the session's directory.
        path: String,
    },
    /// Replace (or create) a text file, refused when it changed since it was read.
    WriteText {
        /// The file, relative to the session's directory; its directory must exist.
        path: String,
        /// The new contents (at most [`MAX_TEXT_BYTES`]).
        text: String,
        /// The `sha256` the file had when read (from `read_text`): the write is refused
        /// with `conflict` when the file on disk no longer has it. Absent: the file must
        /// not exist yet (a new file).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expected_sha256: Option<String>,
    },
}

impl FilesRequest {
    /// The wire value of `op`.
    pub fn op(&self) -> &'static str {
        match self {
            FilesRequest::List { .. } => "list",
            FilesRequest::ReadText { .. } => "read_text",
            FilesRequest::ReadImage { .. } => "read_image",
            FilesRequest::WriteText { .. } => "write_text",
        }
    }
}

/// What a `files` request produced, tagged by `op` (the request's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FilesResult {
    /// A directory's entries.
    List {
        /// The directory, as the request named it (normalized: no `.` parts, no
        /// trailing `/`; `""` for the session's directory).
        path: String,
        /// Its entries, directories first, then by name.
        entries: Vec<DirEntry>,
        /// True when the directory had more entries than were read or returned (the
        /// bridge stops reading a directory after the limit).
        truncated: bool,
    },
    /// A text file's contents.
    ReadText {
        /// The file.
        path: String,
        /// Its contents.
        text: String,
        /// Its size in bytes.
        size: u64,
        /// Last modification, Unix milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mtime_ms: Option<u64>,
        /// SHA-256 of its bytes, lowercase hex: `write_text`'s `expected_sha256`.
        sha256: String,
    },
    /// An image.
    ReadImage {
        /// The file.
        path: String,
        /// Its MIME type, from its first bytes (`image/png`, …).
        mime_type: String,
        /// Its bytes, standard base64 with padding.
        data: String,
        /// Its size in bytes.
        size: u64,
    },
    /// A text file was written.
    WriteText {
        /// The file.
        path: String,
        /// Its new size in bytes.
        size: u64,
        /// Its new SHA-256, lowercase hex (the next write's `expected_sha256`).
        sha256: String,
    },
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DirEntry {
    /// The name, for display. A name that is not valid UTF-8 is shown with U+FFFD in
    /// place of its bad bytes and `utf8` false: such an entry cannot be opened from a
    /// device (its exact bytes are not carried).
    pub name: String,
    /// What it is (a symlink is not followed to say).
    pub kind: EntryKind,
    /// Size in bytes (0 for a directory).
    pub size: u64,
    /// Last modification, Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtime_ms: Option<u64>,
    /// False when the name is not valid UTF-8.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub utf8: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The kind of a directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (opening it follows it, and is refused when it leads outside).
    Symlink,
    /// A FIFO, socket or device: listed, never opened.
    Special,
}
