//! Throwaway Postgres and NATS servers for the relay's multi-node tests: each on
//! loopback, on a free port, with its data in a temporary directory, stopped (and the
//! directory removed) when dropped. `scripts/install-test-deps.sh` installs Debian's
//! `postgresql` and `nats-server`.
//!
//! Postgres refuses to run as root: when the tests run as root, `initdb` and
//! `postgres` run as the `postgres` system user (or `nobody`) through `setpriv`, which
//! execs in place, so the child we hold is the postmaster itself (signals reach it).

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a server may take to accept connections.
const READY: Duration = Duration::from_secs(30);

/// A free loopback port (bound then released; the server binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn signal(child: &Child, sig: Signal) {
    // The child may have exited already; nothing to signal then.
    let _ = kill(Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX)), sig);
}

/// Signals `child` and its children (Postgres backends each start their own session,
/// so a process group would not reach them): the children found in /proc.
fn signal_group(child: &Child, sig: Signal) {
    signal(child, sig);
    let parent = child.id();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid …: the command may hold spaces and parentheses.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if ppid == Some(parent) {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }
}

/// Waits for `child` to exit within `grace`, then kills it.
fn stop(child: &mut Child, sig: Signal, grace: Duration) {
    signal_group(child, Signal::SIGCONT);
    signal(child, sig);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Where a Postgres program is: Debian keeps them under /usr/lib/postgresql/<v>/bin.
fn pg_program(name: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin").join(name))
        .filter(|p| p.exists())
        .collect();
    versions.sort();
    versions.pop().unwrap_or_else(|| PathBuf::from(name))
}

/// The uid and gid to run Postgres as when we are root: `postgres`, else `nobody`.
fn unprivileged_user() -> Option<(u32, u32)> {
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(1);
    if me != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let find = |name: &str| {
        passwd.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            if fields.len() > 3 && fields[0] == name {
                Some((fields[2].parse().ok()?, fields[3].parse().ok()?))
            } else {
                None
            }
        })
    };
    Some(find("postgres").or_else(|| find("nobody")).expect("a `postgres` or `nobody` user to run Postgres as"))
}

/// `program args…`, as the unprivileged user when we are root.
fn command_as(user: Option<(u32, u32)>, program: &Path) -> Command {
    match user {
        None => Command::new(program),
        Some((uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}")).arg(format!("--regid={gid}")).arg("--clear-groups").arg(program);
            c
        }
    }
}

/// Whether the postmaster `child` accepts connections on `port` within [`READY`].
fn wait_ready(child: &mut Child, port: u16) -> bool {
    let deadline = Instant::now() + READY;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        let probe = Command::new(pg_program("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "relay", "-q"])
            .status();
        if probe.is_ok_and(|s| s.success()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A Postgres server with the superuser `relay` (trust authentication on loopback).
pub struct Postgres {
    child: Child,
    /// The port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Postgres {
    /// initdb + postgres on a free port; panics (naming the fix) if Postgres is missing.
    pub fn start() -> Self {
        let user = unprivileged_user();
        // The unprivileged user must reach the directory: under /tmp, not a private TMPDIR.
        let parent = if user.is_some() { PathBuf::from("/tmp") } else { std::env::temp_dir() };
        let dir = tempfile::Builder::new().prefix("relay-pg-").tempdir_in(parent).unwrap();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let data = dir.path().join("data");
        let initdb = command_as(user, &pg_program("initdb"))
            .args(["-D", data.to_str().unwrap(), "-U", "relay", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap_or_else(|e| panic!("running initdb ({e}): install Postgres with scripts/install-test-deps.sh"));
        assert!(initdb.status.success(), "initdb failed: {}", String::from_utf8_lossy(&initdb.stderr));
        for _attempt in 0..5 {
            let port = free_port();
            let log_path = dir.path().join("postgres.log");
            let log = std::fs::File::create(&log_path).unwrap();
            if let Some((uid, gid)) = user {
                std::os::unix::fs::chown(&log_path, Some(uid), Some(gid)).unwrap();
            }
            let mut child = command_as(user, &pg_program("postgres"))
                .args(["-D", data.to_str().unwrap(), "-p", &port.to_string(), "-h", "127.0.0.1"])
                .args(["-k", dir.path().to_str().unwrap()])
                .args(["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
                .args(["-c", "shared_buffers=16MB", "-c", "max_connections=60"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("postgres starts");
            if wait_ready(&mut child, port) {
                return Self { child, port, dir };
            }
            // Most likely the port was taken meanwhile: try another.
            stop(&mut child, Signal::SIGQUIT, Duration::from_secs(5));
        }
        panic!(
            "postgres did not start: {}",
            std::fs::read_to_string(dir.path().join("postgres.log")).unwrap_or_default()
        );
    }

    /// The URL of database `db` (`postgres` always exists; see [`Postgres::create_db`]).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://relay@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates database `name` and returns its URL.
    pub async fn create_db(&self, name: &str) -> String {
        let (client, conn) = tokio_postgres::connect(&self.url("postgres"), tokio_postgres::NoTls).await.unwrap();
        let task = tokio::spawn(conn);
        client.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
        drop(client);
        let _ = task.await;
        self.url(name)
    }

    /// Freezes the server, the postmaster and every backend (SIGSTOP): connections
    /// stay open, nothing answers.
    pub fn pause(&self) {
        signal_group(&self.child, Signal::SIGSTOP);
    }

    /// Thaws it (SIGCONT).
    pub fn resume(&self) {
        signal_group(&self.child, Signal::SIGCONT);
    }

    /// The data directory (its `postgres.log` is next to it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGQUIT: immediate shutdown, the postmaster stops its backends and exits.
        stop(&mut self.child, Signal::SIGQUIT, Duration::from_secs(10));
    }
}

/// A NATS server on a free loopback port.
pub struct Nats {
    child: Child,
    /// The port on 127.0.0.1.
    pub port: u16,
}

impl Nats {
    /// `nats-server` on a free port; panics (naming the fix) if it is missing.
    pub fn start() -> Self {
        Self::start_on(free_port())
    }

    /// `nats-server` on `port` (a restart reuses the port its clients know).
    pub fn start_on(port: u16) -> Self {
        let deadline = Instant::now() + READY;
        let child = Command::new("nats-server")
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("running nats-server ({e}): install it with scripts/install-test-deps.sh"));
        let mut server = Self { child, port };
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            if matches!(server.child.try_wait(), Ok(Some(_))) {
                panic!("nats-server exited at start (port {port} taken?)");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        stop(&mut server.child, Signal::SIGTERM, Duration::from_secs(5));
        panic!("nats-server did not listen on {port}");
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        stop(&mut self.child, Signal::SIGTERM, Duration::from_secs(5));
    }
}
