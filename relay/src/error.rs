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
    /// The bus (NATS) could not be joined.
    #[error("relay bus: {0}")]
    Bus(String),
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
    #[error("the relay database writer has stopped: {detail}")]
    WriterStopped {
        /// Why.
        detail: String,
    },
    /// A directory for `relay.redb` could not be created.
    #[error("cannot create {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `relay.redb` is not there (export/import read an existing file only).
    #[error("no relay database at {path}")]
    Missing {
        /// The file looked for.
        path: PathBuf,
    },
    /// Postgres failed or refused.
    #[error("the relay database {location} failed while {during}: {source}")]
    Postgres {
        /// Host, port and database name (never the password).
        location: String,
        /// What the relay was doing.
        during: &'static str,
        /// The client's error.
        #[source]
        source: Box<tokio_postgres::Error>,
    },
    /// The database did not answer in time.
    #[error("the relay database {location} did not answer within {timeout:?} while {during}")]
    Timeout {
        /// Where the state is.
        location: String,
        /// What the relay was doing.
        during: &'static str,
        /// The bound.
        timeout: std::time::Duration,
    },
    /// A transaction did not commit.
    #[error("the relay database {location} did not commit: {detail}")]
    Commit {
        /// Where the state is.
        location: String,
        /// The database's message.
        detail: String,
    },
    /// The database was migrated by a newer relay.
    #[error(
        "the relay database {location} has schema version {found}, newer than this relay knows ({known}): upgrade the relay"
    )]
    SchemaTooNew {
        /// Where the state is.
        location: String,
        /// The version in the database.
        found: i32,
        /// The newest version this relay knows.
        known: i32,
    },
    /// A stored value does not decode.
    #[error("the relay database {location} holds an unreadable {what}: {detail}")]
    Unreadable {
        /// Where the state is.
        location: String,
        /// Which value.
        what: String,
        /// The decoder's message.
        detail: String,
    },
}
