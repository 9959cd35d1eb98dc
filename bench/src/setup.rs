//! A real bridge in this process (the service with the echo adapter, its identity and
//! device registry), one device paired with it through the pairing functions, and the
//! clients the sections drive: in-process (the dispatcher itself), through the LAN
//! server, and through a relay.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use terminull_bridge::daemon_client::Client;
use terminull_bridge::devices::{self, DeviceRegistry};
use terminull_bridge::home::{Config, Home};
use terminull_bridge::lan::{self, LanConfig, RunningLan};
use terminull_bridge::link::LinkContext;
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::relay_client;
use terminull_bridge::service::Service;
use terminull_bridge::session::SessionPolicy;
use terminull_client::connection::{Connection, LinkStats};
use terminull_client::home::{DeviceHome, PairedBridgeRecord};
use terminull_protocol::blocks::Block;
use terminull_protocol::control::{self, BridgeMessage, ControlMessage, ReplyOutcome, ReplyResult};
use terminull_protocol::crypto::pairing::{self, PairingLink};
use terminull_protocol::ids::SessionId;

use crate::util::unix_nanos;

/// Where the binaries the benchmark runs are.
#[derive(Debug, Clone)]
pub struct Tools {
    /// This binary (for the helper subcommands).
    pub self_exe: PathBuf,
    /// The Rust echo adapter.
    pub echo_rs: PathBuf,
    /// The bridge's command line (`terminull up` for the memory section).
    pub terminull: PathBuf,
}

impl Tools {
    /// The binaries next to this one, or in `dir`.
    pub fn locate(dir: Option<PathBuf>) -> Result<Self> {
        let self_exe = std::env::current_exe().context("the path of this binary")?;
        let dir = match dir {
            Some(d) => d,
            None => self_exe.parent().context("this binary's directory")?.to_path_buf(),
        };
        let tools = Self { echo_rs: dir.join("echo-rs"), terminull: dir.join("terminull"), self_exe };
        for bin in [&tools.echo_rs, &tools.terminull] {
            if !bin.exists() {
                bail!(
                    "{} is missing; build it first: cargo build --release -p terminull-echo -p terminull-bridge",
                    bin.display()
                );
            }
        }
        Ok(tools)
    }

    /// A directory holding only copies of `echo-rs` and `terminull`, so the registry
    /// scan (and a daemon started from it) sees the echo built-in and nothing else that
    /// happens to be built next to them.
    pub fn echo_only_dir(&self) -> Result<tempfile::TempDir> {
        let dir = tempfile::tempdir()?;
        std::fs::copy(&self.echo_rs, dir.path().join("echo-rs")).context("copying echo-rs")?;
        std::fs::copy(&self.terminull, dir.path().join("terminull")).context("copying terminull")?;
        Ok(dir)
    }
}

/// A new pairing offer of the bridge at `home`, valid for `ttl_secs`.
fn pairing_offer(home: &Home, ttl_secs: u64, relay: Option<String>, lan: Option<String>) -> Result<PairingLink> {
    let (secret, expires_at) = devices::create_offer(home, ttl_secs)?;
    let public = devices::bridge_identity(home)?.public();
    Ok(PairingLink { bridge_id: public.bridge_id(), bridge: public.to_wire(), relay, lan, secret, expires_at })
}

/// A bridge service in this process and one device paired with it.
#[derive(Debug)]
pub struct Bridge {
    /// The bridge's home.
    pub home: Home,
    /// The dispatcher.
    pub service: Service,
    /// What its links share.
    pub ctx: LinkContext,
    /// The paired device.
    pub device: DeviceHome,
    /// The bridge as the device recorded it.
    pub record: PairedBridgeRecord,
    _device_dir: tempfile::TempDir,
    _exe_dir: tempfile::TempDir,
    relay_task: Option<tokio::task::JoinHandle<()>>,
}

impl Bridge {
    /// Starts the service over `home` (which may already hold history) and pairs a device.
    pub async fn start(tools: &Tools, home: &Path) -> Result<Self> {
        let home = Home::at(home);
        let exe_dir = tools.echo_only_dir()?;
        let mut scan = ScanOptions::new(home.clone(), Config::default());
        scan.exe_dir = Some(exe_dir.path().to_path_buf());
        scan.handshake_timeout = Duration::from_secs(20);
        let policy = SessionPolicy { handshake_timeout: Duration::from_secs(20), ..SessionPolicy::default() };
        let service = Service::start(home.clone(), Config::default(), scan, policy).await?;
        if service.registry().await.get("echo").is_none() {
            bail!("the echo adapter was not registered from {}", exe_dir.path().display());
        }
        let identity = devices::bridge_identity(&home)?;
        let registry = DeviceRegistry::open(&home);
        let link = pairing_offer(&home, 60, None, None)?;
        let device_dir = tempfile::tempdir()?;
        let device = DeviceHome::at(device_dir.path());
        let device_identity = device.identity()?;
        let (request, pending) = pairing::request(&link, &device_identity, "bench")?;
        let response = devices::handle_pair_request(&home, &identity, &registry, &request)?;
        let paired = pending.finish(&response)?;
        let record =
            PairedBridgeRecord { bridge_id: paired.bridge_id, keys: paired.keys, relay: None, lan: None, paired_at: 0 };
        device.add_bridge(record.clone())?;
        let ctx = relay_client::context(identity, registry, service.clone());
        Ok(Self { home, service, ctx, device, record, _device_dir: device_dir, _exe_dir: exe_dir, relay_task: None })
    }

    /// A pairing link for a page served at `page_origin`, naming `relay` and `lan`
    /// (valid for 10 minutes).
    pub fn page_pairing_link(&self, relay: Option<String>, lan: Option<String>, page_origin: &str) -> Result<String> {
        Ok(pairing_offer(&self.home, 600, relay, lan)?.to_url(page_origin))
    }

    /// A client of the dispatcher in this process (no transport, no crypto).
    pub fn in_process(&self) -> Client {
        Client::in_process(&self.service)
    }

    /// Starts a LAN server on 127.0.0.1, port 0; `coalesce` as [`LinkContext::coalesce_chunks`].
    pub async fn lan(&self, coalesce: bool) -> Result<(RunningLan, LinkContext)> {
        let ctx = LinkContext { coalesce_chunks: coalesce, coalesced: Default::default(), ..self.ctx.clone() };
        let config = LanConfig::new("127.0.0.1:0".parse()?);
        let running = lan::start(ctx.clone(), self.home.clone(), config).await.context("starting the LAN server")?;
        Ok((running, ctx))
    }

    /// A device link straight to `lan`.
    pub async fn open_lan(&self, lan: &RunningLan) -> Result<(Client, std::sync::Arc<LinkStats>)> {
        let connection = Connection::open_lan(&self.device, &self.record, &lan.ws_url()).await?;
        let stats = connection.info.stats.clone();
        Ok((Client::remote(connection), stats))
    }

    /// Connects the bridge to the relay at `relay_url` (in the background, reconnecting).
    pub fn connect_relay(&mut self, relay_url: &str) {
        self.connect_relay_with(relay_url, true);
    }

    /// [`Self::connect_relay`] with `coalesce` as [`LinkContext::coalesce_chunks`],
    /// replacing any earlier relay connection; the links' context, to read what they
    /// coalesced.
    pub fn connect_relay_with(&mut self, relay_url: &str, coalesce: bool) -> LinkContext {
        self.disconnect_relay();
        let ctx = LinkContext { coalesce_chunks: coalesce, coalesced: Default::default(), ..self.ctx.clone() };
        self.relay_task = Some(tokio::spawn(relay_client::run(
            ctx.clone(),
            self.home.clone(),
            relay_url.to_owned(),
            Default::default(),
        )));
        ctx
    }

    /// Ends the relay connection, if there is one.
    pub fn disconnect_relay(&mut self) {
        if let Some(task) = self.relay_task.take() {
            task.abort();
        }
    }

    /// A device link through the relay, retried while the bridge is not yet registered.
    pub async fn open_relay(&self, relay_url: &str) -> Result<(Client, std::sync::Arc<LinkStats>)> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match Connection::open(&self.device, &self.record, Some(relay_url)).await {
                Ok(c) => {
                    let stats = c.info.stats.clone();
                    return Ok((Client::remote(c), stats));
                }
                Err(e) if Instant::now() > deadline => return Err(e).context("opening a link through the relay"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.disconnect_relay();
    }
}

/// One message from the bridge as the benchmark received it.
#[derive(Debug)]
pub struct Received {
    /// When (this process's monotonic clock).
    pub at: Instant,
    /// When (Unix ns, to compare with stamps taken in other processes).
    pub unix: u128,
    /// The block.
    pub block: Block,
}

const WAIT: Duration = Duration::from_secs(120);

async fn next(client: &mut Client) -> Result<BridgeMessage> {
    tokio::time::timeout(WAIT, client.next())
        .await
        .context("the bridge sent nothing for 120 s")?
        .context("the bridge closed the connection")
}

fn refused(outcome: &ReplyOutcome) -> Option<String> {
    match outcome {
        ReplyOutcome::Error { error } => Some(format!("{:?}: {}", error.code, error.message)),
        ReplyOutcome::Refused { reason, message, .. } => Some(format!("refused ({}): {message}", reason.as_str())),
        ReplyOutcome::Ok { .. } => None,
    }
}

/// Starts an echo session in `cwd` and reads up to its `replay_done`.
pub async fn start_session(client: &mut Client, cwd: &Path) -> Result<SessionId> {
    let request = ControlMessage::SessionRequest(control::SessionRequest::new("echo", cwd.display().to_string()));
    let mut kept = Vec::new();
    let session = match client.call(request, &mut kept).await.context("session_request")? {
        ReplyResult::SessionStarted { session_id } => session_id,
        other => bail!("session_request answered {other:?}"),
    };
    if !kept.iter().any(|m| matches!(m, BridgeMessage::ReplayDone { .. })) {
        loop {
            if let BridgeMessage::ReplayDone { .. } = next(client).await? {
                break;
            }
        }
    }
    Ok(session)
}

/// Sends `text` to `session` and collects every block up to the turn's `session_end`.
/// The floor of a page's tap → first streamed text: `taps` echo turns of `session` from
/// the Rust client, each's time from sending to its first text, in milliseconds.
pub async fn tap_to_first_text_ms(client: &mut Client, session: &SessionId, taps: usize) -> Result<Vec<f64>> {
    let mut ms = Vec::with_capacity(taps);
    for i in 0..taps {
        let sent = Instant::now();
        let got = turn(client, session, &format!("tap number {i}")).await?;
        let first = got.iter().find(|r| r.block.block_type() == "text").context("the echo turn had no text")?;
        ms.push(first.at.duration_since(sent).as_secs_f64() * 1e3);
    }
    Ok(ms)
}

pub async fn turn(client: &mut Client, session: &SessionId, text: &str) -> Result<Vec<Received>> {
    let id = client
        .send(ControlMessage::UserMessage(control::UserMessage {
            session_id: session.clone(),
            text: text.into(),
            attachments: vec![],
        }))
        .await?;
    let mut out = Vec::new();
    loop {
        let message = next(client).await?;
        let (at, unix) = (Instant::now(), unix_nanos());
        match message {
            BridgeMessage::Reply(r) if r.id.as_deref() == Some(&id) => {
                if let Some(e) = refused(&r.outcome) {
                    bail!("user_message refused: {e}");
                }
            }
            BridgeMessage::Block { block, session_id, .. } if &session_id == session => {
                let end = block.block_type() == "session_end";
                out.push(Received { at, unix, block });
                if end {
                    return Ok(out);
                }
            }
            _ => {}
        }
    }
}

/// Resumes `session` from `since_seq` / `since_ts` and returns the time from sending
/// `session_resume` to receiving its `replay_done`, and the blocks that came before it.
pub async fn resume(
    client: &mut Client,
    session: &SessionId,
    since_seq: Option<u64>,
    since_ts: Option<f64>,
) -> Result<(Duration, usize)> {
    let start = Instant::now();
    let id = client
        .send(ControlMessage::SessionResume(control::SessionResume {
            session_id: session.clone(),
            since_seq,
            since_ts,
            app_pubkey: String::new(),
        }))
        .await?;
    let mut before = 0;
    loop {
        match next(client).await? {
            BridgeMessage::Reply(r) if r.id.as_deref() == Some(&id) => {
                if let Some(e) = refused(&r.outcome) {
                    bail!("session_resume refused: {e}");
                }
            }
            BridgeMessage::Block { session_id, .. } if &session_id == session => before += 1,
            BridgeMessage::ReplayDone { session_id, .. } if &session_id == session => {
                return Ok((start.elapsed(), before));
            }
            _ => {}
        }
    }
}

/// Reads and drops whatever arrives until `quiet` passes with nothing.
pub async fn drain(client: &mut Client, quiet: Duration) {
    while let Ok(Some(_)) = tokio::time::timeout(quiet, client.next()).await {}
}
