//! Why the relay could not start (or stop cleanly).

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why [`Relay::start`](crate::Relay::start) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// A configuration value is unusable.
    #[error("invalid relay configuration: {0}")]
    Config(#[from] ConfigError),
    /// The task that opens the store panicked or was cancelled.
    #[error("invalid relay configuration: the store loader failed: {0}")]
    StoreLoader(#[source] tokio::task::JoinError),
    /// The data directory could not be created.
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The database could not be opened, read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS certificate or key could not be loaded.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// The Web Push sender could not be set up (for example a bad VAPID subject).
    #[error("Web Push setup: {0}")]
    Push(#[from] crate::webpush::PushError),
}

/// A setting the relay cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A size, rate or interval is zero.
    #[error("`{setting}` must be greater than zero")]
    Zero {
        /// The setting's name in [`RelayConfig`](crate::RelayConfig).
        setting: &'static str,
    },
}

/// Why the relay's database refused an operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// redb failed.
    #[error("the relay database at {path} failed while {during}: {source}")]
    Database {
        /// The database file.
        path: PathBuf,
        /// What the relay was doing.
        during: &'static str,
        /// redb's error.
        #[source]
        source: Box<redb::Error>,
    },
    /// A stored value does not decode.
    #[error("the relay database at {path} holds an unreadable {what}: {detail}")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// Which value.
        what: String,
        /// The decoder's message.
        detail: String,
    },
    /// The database writer has stopped (the relay is shutting down).
    #[error("the relay database writer has stopped")]
    WriterStopped,
}
