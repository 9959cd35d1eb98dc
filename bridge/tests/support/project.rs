//! A project directory with a session in it, driven by a paired device over the LAN
//! server or through a relay with the Rust client: for the `files` and `git` tests.
//! Beside the project lies an `outside` directory holding [`SECRET`], which no reply
//! may ever contain.

use std::path::{Path, PathBuf};
use std::time::Duration;

use terminull_bridge::daemon_client::{Client, ClientError};
use terminull_bridge::lan::RunningLan;
use terminull_client::transcript::Transcript;
use terminull_protocol::control::ReplyErrorCode;
use terminull_protocol::files::{FilesRequest, FilesResult};
use terminull_protocol::git::{GitRequest, GitResult};
use terminull_protocol::ids::SessionId;

use super::remote::{self, Paired};

/// The contents of `outside/secret.txt` and the name of a file beside it.
pub const SECRET: &str = "TOP-SECRET-CONTENT-4242";
/// A file name only the outside directory has.
pub const HIDDEN_NAME: &str = "hidden-name-outside.txt";

/// How the device reaches the bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The bridge's LAN server.
    Lan,
    /// A relay on loopback.
    Relay,
}

/// A bridge, a device's client and a session whose directory is `project`.
pub struct ProjectRig {
    /// The bridge (kept alive).
    pub bridge: Paired,
    /// The LAN server, when used.
    pub lan: Option<RunningLan>,
    /// The relay and its data directory, when used.
    pub relay: Option<(terminull_relay::RunningRelay, tempfile::TempDir)>,
    /// The device's client.
    pub client: Client,
    /// The session.
    pub session: SessionId,
    /// Holds `project/` and `outside/`.
    pub dir: tempfile::TempDir,
    /// The session's directory.
    pub project: PathBuf,
    /// The directory beside it that must never leak.
    pub outside: PathBuf,
}

/// A rig reached `via`, with the project prepared by `prepare(project, outside)`
/// before the session starts.
pub async fn project_rig(via: Via, prepare: impl FnOnce(&Path, &Path)) -> ProjectRig {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    std::fs::write(outside.join(HIDDEN_NAME), SECRET).unwrap();
    prepare(&project, &outside);
    let bridge = remote::paired_bridge().await;
    let (lan, relay, connection) = match via {
        Via::Lan => {
            let lan = remote::start_lan(&bridge).await;
            let connection =
                terminull_client::connection::Connection::open_lan(&bridge.device, &bridge.record, &lan.ws_url())
                    .await
                    .expect("a LAN link");
            (Some(lan), None, connection)
        }
        Via::Relay => {
            let data = tempfile::tempdir().unwrap();
            let relay = terminull_relay::Relay::start(terminull_relay::RelayConfig::new(
                "127.0.0.1:0".parse().unwrap(),
                data.path(),
            ))
            .await
            .unwrap();
            remote::connect_to_relay(&bridge, relay.ws_url());
            let mut opened = None;
            for _ in 0..100 {
                match terminull_client::connection::Connection::open(
                    &bridge.device,
                    &bridge.record,
                    Some(&relay.ws_url()),
                )
                .await
                {
                    Ok(c) => {
                        opened = Some(c);
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
            (None, Some((relay, data)), opened.expect("a link through the relay"))
        }
    };
    let mut client = Client::remote(connection);
    let session = remote::start_echo_session(&mut client, &project, &mut Transcript::new()).await;
    ProjectRig { bridge, lan, relay, client, session, dir, project, outside }
}

impl ProjectRig {
    /// A `files` request, answered within 30 s.
    pub async fn files(&mut self, request: FilesRequest) -> Result<FilesResult, (ReplyErrorCode, String)> {
        let mut kept = Vec::new();
        let call = self.client.files(&self.session, request, &mut kept);
        outcome(tokio::time::timeout(Duration::from_secs(30), call).await.expect("a files reply within 30 s"))
    }

    /// A `git` request, answered within 150 s (a commit runs hooks).
    pub async fn git(&mut self, request: GitRequest) -> Result<GitResult, (ReplyErrorCode, String)> {
        let mut kept = Vec::new();
        let call = self.client.git(&self.session, request, &mut kept);
        outcome(tokio::time::timeout(Duration::from_secs(150), call).await.expect("a git reply within 150 s"))
    }
}

fn outcome<T>(result: Result<T, ClientError>) -> Result<T, (ReplyErrorCode, String)> {
    result.map_err(|e| match e {
        ClientError::Refused { code, message } => (code, message),
        other => panic!("not a reply: {other}"),
    })
}
