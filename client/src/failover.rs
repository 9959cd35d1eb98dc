//! LAN first, relay as fallback: one device link that moves between the two paths
//! without losing or repeating a block.
//!
//! [`open`] connects to the bridge's LAN server when it can (an address given, known
//! from pairing, or found by mDNS) and through the relay otherwise. When the path in
//! use fails it moves to the other; while on the relay it keeps probing the LAN and
//! moves back as soon as the LAN answers. Each move re-attaches every session this
//! link follows with `session_resume { since_seq }`, from the last block the caller
//! received, and drops any block at or below that `seq` (the old path can still
//! deliver a few while the new one replays). The caller sees one [`Connection`] whose
//! [`LinkInfo::path`] says where it is.
//!
//! A move resumes from the last block delivered, so the bridge continues a message
//! streamed as appends with one append from where the caller left off. A caller whose
//! [`crate::transcript::Transcript`] reports a gap (a piece of a message missing)
//! sends its own `session_resume` from [`crate::transcript::Transcript::resume_seq`]:
//! the link then follows the session from that earlier `seq`, so the replay is not
//! taken for a repeat.
//!
//! A link that ends because a block or reply was dropped on the way (the relay lost or
//! withheld one: [`crate::connection`] refuses what follows) is lost like any other:
//! the move re-attaches with new keys and resumes from the last block delivered, so
//! nothing is silently missing. A server that speaks another protocol version is not
//! retried: the error ([`ConnectError::Version`]) names both versions.
//!
//! A control message the old path took but did not answer is resent on the new path
//! when it is safe to repeat (`session_resume`, `list_*`); any other gets an error
//! reply saying it may or may not have been carried out, rather than being sent twice.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use terminull_protocol::control::{
    self, BridgeMessage, Control, ControlMessage, Reply, ReplyError, ReplyErrorCode, ReplyOutcome, ReplyResult,
};
use terminull_protocol::ids::SessionId;
use terminull_protocol::relay::RelayStatus;
use tokio::sync::{mpsc, watch};

use crate::connection::{ConnectError, Connection, LinkInfo, LinkPath, LinkStats};
use crate::home::{DeviceHome, PairedBridgeRecord};
use crate::mdns::{self, MdnsError, MdnsScope};

/// Controls the caller sent that wait for an answer, kept for resending (bounded).
const OUTSTANDING: usize = 1024;
/// Sessions followed at once (a bound on what a move re-attaches).
const FOLLOWED: usize = 4096;
/// Prefix of the ids of the resumes a move sends itself.
const INTERNAL_ID: &str = "failover-";

/// Where the bridge may be reached.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    /// The LAN server's URL (`ws://host:port`), when known.
    pub lan: Option<String>,
    /// Browse for the bridge by mDNS on these interfaces when no known LAN URL answers.
    pub discover: Option<MdnsScope>,
    /// The relay's URL.
    pub relay: Option<String>,
}

impl Routes {
    /// The routes a paired bridge's record gives: its LAN address and relay, with
    /// discovery on every interface.
    pub fn from_record(record: &PairedBridgeRecord) -> Self {
        Self { lan: record.lan.clone(), discover: Some(MdnsScope::AllInterfaces), relay: record.relay.clone() }
    }
}

/// One way to the bridge that did not open, and why; a failed connect lists each.
#[derive(Debug, thiserror::Error)]
enum Attempt {
    /// The known LAN address did not answer.
    #[error("LAN ({url}): {source}")]
    Lan { url: String, source: ConnectError },
    /// The LAN address mDNS found did not answer.
    #[error("LAN found by mDNS ({url}): {source}")]
    Discovered { url: String, source: ConnectError },
    /// mDNS could not browse.
    #[error(transparent)]
    Mdns(MdnsError),
    /// mDNS heard no LAN server of this bridge.
    #[error("mDNS found no LAN server of this bridge")]
    NotAdvertised,
    /// Nothing to try on the LAN.
    #[error("no LAN address known and discovery off")]
    NoLanRoute,
    /// The relay did not answer.
    #[error("{path}: {source}")]
    Relay { path: LinkPath, source: ConnectError },
    /// Nothing to try through a relay.
    #[error("no relay known")]
    NoRelay,
}

impl Attempt {
    /// True when the server answered but speaks another protocol version.
    fn is_version_mismatch(&self) -> bool {
        matches!(
            self,
            Attempt::Lan { source: ConnectError::Version(_), .. }
                | Attempt::Discovered { source: ConnectError::Version(_), .. }
                | Attempt::Relay { source: ConnectError::Version(_), .. }
        )
    }
}

/// Every attempt of one connect, in order.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
struct Attempts(Vec<Attempt>);

/// Why a lost link could not move to another path.
#[derive(Debug, thiserror::Error)]
enum MoveError {
    /// Every path kept failing for the policy's `give_up_after`.
    #[error("no path to the bridge for {after:?}: {last}")]
    GaveUp { after: Duration, last: ConnectError },
    /// A server speaks another protocol version (retrying would not help).
    #[error("{0}")]
    Version(String),
    /// The caller dropped its end while the link was moving.
    #[error("the caller went away")]
    CallerGone,
}

/// Timing of the moves.
#[derive(Debug, Clone)]
pub struct FailoverPolicy {
    /// How long one mDNS browse may take.
    pub discover_timeout: Duration,
    /// While on the relay, how often the LAN is tried again.
    pub lan_probe_every: Duration,
    /// After losing a path, how long to keep trying both before giving up.
    pub give_up_after: Duration,
}

impl Default for FailoverPolicy {
    fn default() -> Self {
        Self {
            discover_timeout: Duration::from_secs(2),
            lan_probe_every: Duration::from_secs(5),
            give_up_after: Duration::from_secs(120),
        }
    }
}

/// The wait before the `attempt`-th retry after losing every path (0-based):
/// 200 ms doubling up to 5 s.
pub fn retry_delay(attempt: u32) -> Duration {
    Duration::from_millis(200u64.saturating_mul(1 << attempt.min(5))).min(Duration::from_secs(5))
}

/// True when a control message can be sent again without doing anything twice.
pub fn is_repeatable(message: &ControlMessage) -> bool {
    matches!(
        message,
        ControlMessage::SessionResume(_)
            | ControlMessage::ListSessions(_)
            | ControlMessage::ListAgents(_)
            | ControlMessage::ListModels(_)
            | ControlMessage::ScanExternalSessions(_)
            | ControlMessage::GetUsage(_)
    )
}

/// Opens a link to `record`'s bridge over the best path of `routes` and keeps it up
/// across path changes (see the module docs).
pub async fn open(
    home: &DeviceHome,
    record: &PairedBridgeRecord,
    routes: Routes,
    policy: FailoverPolicy,
) -> Result<Connection, ConnectError> {
    let stats = Arc::new(LinkStats::default());
    let mut paths = Paths { home: home.clone(), record: record.clone(), routes, policy, stats: stats.clone() };
    let (inner, path) = paths.connect().await?;
    let (status_tx, status_rx) = watch::channel(inner.info.status.borrow().clone());
    let (path_tx, path_rx) = watch::channel(path.clone());
    let (closed_tx, closed_rx) = watch::channel(None);
    let (tx, caller_rx) = mpsc::channel::<Value>(64);
    let (caller_tx, rx) = mpsc::channel::<BridgeMessage>(4096);
    let info = LinkInfo {
        bridge_id: inner.info.bridge_id.clone(),
        device_id: inner.info.device_id.clone(),
        status: status_rx,
        stats,
        closed: closed_rx,
        path: path_rx,
    };
    let mover = Mover {
        paths,
        caller_rx,
        caller_tx,
        status_tx,
        path_tx,
        followed: HashMap::new(),
        outstanding: VecDeque::new(),
        internal: HashSet::new(),
        swallow_replay_done: HashSet::new(),
        next_internal: 0,
    };
    tokio::spawn(async move {
        let reason = mover.run(inner, path).await;
        tracing::info!("link to the bridge closed: {reason}");
        let _ = closed_tx.send(Some(reason));
    });
    Ok(Connection { tx, rx, info })
}

/// Finding and opening a path.
#[derive(Clone)]
struct Paths {
    home: DeviceHome,
    record: PairedBridgeRecord,
    routes: Routes,
    policy: FailoverPolicy,
    stats: Arc<LinkStats>,
}

impl Paths {
    /// The LAN first, then the relay; the error lists every attempt.
    async fn connect(&mut self) -> Result<(Connection, LinkPath), ConnectError> {
        let Attempts(mut tried) = match self.connect_lan().await {
            Ok(found) => return Ok(found),
            Err(attempts) => attempts,
        };
        if let Some(relay) = self.routes.relay.clone() {
            let path = LinkPath::Relay(relay);
            match Connection::open_path(&self.home, &self.record, path.clone(), self.stats.clone()).await {
                Ok(c) => return Ok((c, path)),
                Err(source) => tried.push(Attempt::Relay { path, source }),
            }
        } else {
            tried.push(Attempt::NoRelay);
        }
        // A server that speaks another protocol version will not change its mind:
        // the caller is told, not sent round again.
        let version = tried.iter().any(Attempt::is_version_mismatch);
        let attempts = Attempts(tried).to_string();
        Err(if version { ConnectError::Version(attempts) } else { ConnectError::NoPath(attempts) })
    }

    /// The known LAN address, then (when it fails or there is none) one found by mDNS.
    async fn connect_lan(&mut self) -> Result<(Connection, LinkPath), Attempts> {
        let mut tried = Vec::new();
        if let Some(url) = self.routes.lan.clone() {
            match self.open_lan(&url).await {
                Ok(c) => return Ok((c, LinkPath::Lan(url))),
                Err(source) => tried.push(Attempt::Lan { url, source }),
            }
        }
        if let Some(scope) = self.routes.discover {
            match mdns::browse(scope, self.policy.discover_timeout, Some(&self.record.bridge_id)).await {
                Ok(found) => match found.first().and_then(|b| b.url()) {
                    Some(url) if Some(&url) != self.routes.lan.as_ref() => match self.open_lan(&url).await {
                        Ok(c) => {
                            self.remember_lan(&url);
                            return Ok((c, LinkPath::Lan(url)));
                        }
                        Err(source) => tried.push(Attempt::Discovered { url, source }),
                    },
                    Some(_) => {}
                    None => tried.push(Attempt::NotAdvertised),
                },
                Err(e) => tried.push(Attempt::Mdns(e)),
            }
        }
        if tried.is_empty() {
            tried.push(Attempt::NoLanRoute);
        }
        Err(Attempts(tried))
    }

    async fn open_lan(&self, url: &str) -> Result<Connection, ConnectError> {
        Connection::open_path(&self.home, &self.record, LinkPath::Lan(url.to_owned()), self.stats.clone()).await
    }

    /// Keeps a LAN address found by mDNS, here and in the device's home.
    fn remember_lan(&mut self, url: &str) {
        self.routes.lan = Some(url.to_owned());
        let mut record = self.record.clone();
        record.lan = Some(url.to_owned());
        if let Err(e) = self.home.add_bridge(record.clone()) {
            tracing::warn!("cannot record the bridge's LAN address: {e}");
        } else {
            self.record = record;
        }
    }

    fn lan_possible(&self) -> bool {
        self.routes.lan.is_some() || self.routes.discover.is_some()
    }
}

/// The task behind a failover [`Connection`].
struct Mover {
    paths: Paths,
    caller_rx: mpsc::Receiver<Value>,
    caller_tx: mpsc::Sender<BridgeMessage>,
    status_tx: watch::Sender<RelayStatus>,
    path_tx: watch::Sender<LinkPath>,
    /// Followed sessions and the last live `seq` the caller received of each.
    followed: HashMap<SessionId, u64>,
    /// The caller's controls sent on the current path and not yet answered.
    outstanding: VecDeque<(String, Value)>,
    /// Ids of the resumes this task sent itself (their replies are not the caller's).
    internal: HashSet<String>,
    /// Sessions whose next `replay_done` answers an internal resume.
    swallow_replay_done: HashSet<SessionId>,
    next_internal: u64,
}

enum Step {
    /// Keep going on the same path.
    Stay,
    /// The path failed.
    Lost(String),
    /// The caller is gone or closed the link.
    End(String),
}

impl Mover {
    async fn run(mut self, mut inner: Connection, mut path: LinkPath) -> String {
        let mut probe = tokio::time::interval(self.paths.policy.lan_probe_every);
        probe.tick().await;
        type Probe = tokio::sync::oneshot::Receiver<Result<(Connection, LinkPath, Option<String>), Attempts>>;
        let mut probing: Option<Probe> = None;
        loop {
            let step = tokio::select! {
                value = self.caller_rx.recv() => match value {
                    Some(value) => self.send(&inner, value).await,
                    None => Step::End("closed by this device".into()),
                },
                message = inner.rx.recv() => match message {
                    Some(message) => self.deliver(message).await,
                    None => Step::Lost(inner.info.closed.borrow().clone().unwrap_or_else(|| "the link closed".into())),
                },
                Ok(()) = inner.info.status.changed() => {
                    self.status_tx.send_replace(inner.info.status.borrow().clone());
                    Step::Stay
                }
                _ = probe.tick(), if matches!(path, LinkPath::Relay(_)) && self.paths.lan_possible() && probing.is_none() => {
                    // Probing can take a while (a connect timeout, an mDNS browse):
                    // in its own task, so the relay path keeps flowing meanwhile.
                    let mut paths = self.paths.clone();
                    let (done, result) = tokio::sync::oneshot::channel();
                    tokio::spawn(async move {
                        let _ = done.send(paths.connect_lan().await.map(|(c, p)| (c, p, paths.routes.lan)));
                    });
                    probing = Some(result);
                    Step::Stay
                }
                Ok(result) = async {
                    match probing.as_mut() {
                        Some(result) => result.await,
                        None => std::future::pending().await,
                    }
                }, if probing.is_some() => {
                    probing = None;
                    match result {
                        Ok((lan, lan_path, known)) if self.outstanding.is_empty() => {
                            tracing::info!("the LAN answers again: moving the link from {path} to {lan_path}");
                            self.paths.routes.lan = known;
                            // Dropping the relay link closes it; the LAN link re-attaches.
                            inner = lan;
                            path = lan_path;
                            self.moved(&inner, &path).await;
                        }
                        // A control waits for its answer on the relay: move at the next probe.
                        Ok(_) => {}
                        Err(e) => tracing::debug!("LAN still unreachable: {e}"),
                    }
                    Step::Stay
                }
            };
            match step {
                Step::Stay => {}
                Step::End(reason) => return reason,
                Step::Lost(reason) => {
                    tracing::warn!("lost the link over {path}: {reason}; moving");
                    match self.reconnect(&path).await {
                        Ok((next, next_path)) => {
                            inner = next;
                            path = next_path;
                            self.moved(&inner, &path).await;
                        }
                        Err(e) => return e.to_string(),
                    }
                }
            }
        }
    }

    /// Tries every path until one opens or the policy gives up. Right after losing the
    /// LAN the relay is tried first; otherwise the LAN first.
    async fn reconnect(&mut self, lost: &LinkPath) -> Result<(Connection, LinkPath), MoveError> {
        let deadline = tokio::time::Instant::now() + self.paths.policy.give_up_after;
        let mut attempt = 0;
        loop {
            let opened = match (lost, &self.paths.routes.relay) {
                (LinkPath::Lan(_), Some(relay)) if attempt == 0 => {
                    let path = LinkPath::Relay(relay.clone());
                    Connection::open_path(&self.paths.home, &self.paths.record, path.clone(), self.paths.stats.clone())
                        .await
                        .map(|c| (c, path))
                }
                _ => self.paths.connect().await,
            };
            match opened {
                Ok(found) => return Ok(found),
                Err(ConnectError::Version(mismatch)) => return Err(MoveError::Version(mismatch)),
                Err(last) if tokio::time::Instant::now() >= deadline => {
                    return Err(MoveError::GaveUp { after: self.paths.policy.give_up_after, last });
                }
                Err(e) => tracing::debug!("no path yet: {e}"),
            }
            if self.caller_tx.is_closed() {
                return Err(MoveError::CallerGone);
            }
            tokio::time::sleep(retry_delay(attempt)).await;
            attempt += 1;
        }
    }

    /// After a move: answers or resends what the old path left unanswered and
    /// re-attaches every followed session from its last `seq`.
    async fn moved(&mut self, inner: &Connection, path: &LinkPath) {
        self.path_tx.send_replace(path.clone());
        self.status_tx.send_replace(inner.info.status.borrow().clone());
        self.internal.clear();
        self.swallow_replay_done.clear();
        let unanswered: Vec<(String, Value)> = self.outstanding.drain(..).collect();
        for (id, value) in unanswered {
            let repeatable = control::parse(value.clone()).is_ok_and(|c| is_repeatable(&c.message));
            if repeatable {
                self.outstanding.push_back((id, value.clone()));
                let _ = inner.tx.send(value).await;
            } else {
                let reply = Reply {
                    id: Some(id),
                    outcome: ReplyOutcome::Error {
                        error: ReplyError {
                            code: ReplyErrorCode::Internal,
                            message: format!(
                                "the link moved to {path} before the bridge answered; the message may or may not have been carried out"
                            ),
                        },
                    },
                };
                let _ = self.caller_tx.send(BridgeMessage::Reply(reply)).await;
            }
        }
        let sessions: Vec<(SessionId, u64)> = self.followed.iter().map(|(s, seq)| (s.clone(), *seq)).collect();
        for (session_id, since) in sessions {
            self.next_internal += 1;
            let id = format!("{INTERNAL_ID}{}", self.next_internal);
            let resume = Control {
                id: Some(id.clone()),
                message: ControlMessage::SessionResume(control::SessionResume {
                    session_id: session_id.clone(),
                    since_seq: Some(since),
                    since_ts: None,
                    app_pubkey: String::new(),
                }),
            };
            let Ok(value) = serde_json::to_value(&resume) else { continue };
            self.internal.insert(id);
            self.swallow_replay_done.insert(session_id);
            let _ = inner.tx.send(value).await;
        }
    }

    /// Forwards one of the caller's controls, noting what it changes.
    async fn send(&mut self, inner: &Connection, value: Value) -> Step {
        if let Ok(control) = control::parse(value.clone()) {
            if let ControlMessage::SessionResume(r) = &control.message {
                // The caller chose where to start again: its own range is not a repeat.
                self.follow(r.session_id.clone(), r.since_seq.unwrap_or(0));
            }
            if let Some(id) = control.id {
                if self.outstanding.len() == OUTSTANDING {
                    self.outstanding.pop_front();
                }
                self.outstanding.push_back((id, value.clone()));
            }
        }
        match inner.tx.send(value).await {
            Ok(()) => Step::Stay,
            Err(_) => Step::Lost("the link stopped taking messages".into()),
        }
    }

    fn follow(&mut self, session_id: SessionId, since: u64) {
        if self.followed.len() >= FOLLOWED && !self.followed.contains_key(&session_id) {
            tracing::warn!("following {FOLLOWED} sessions already; {session_id} will not be re-attached after a move");
            return;
        }
        self.followed.insert(session_id, since);
    }

    /// Delivers one message from the bridge, dropping repeats and internal answers.
    async fn deliver(&mut self, message: BridgeMessage) -> Step {
        match &message {
            BridgeMessage::Reply(reply) => {
                if let Some(id) = &reply.id {
                    if self.internal.remove(id) {
                        if let ReplyOutcome::Error { error } = &reply.outcome {
                            tracing::warn!("re-attaching a session after the move failed: {}", error.message);
                        }
                        return Step::Stay;
                    }
                    self.outstanding.retain(|(pending, _)| pending != id);
                }
                if let ReplyOutcome::Ok { result: ReplyResult::SessionStarted { session_id } } = &reply.outcome
                    && !self.followed.contains_key(session_id)
                {
                    self.follow(session_id.clone(), 0);
                }
            }
            BridgeMessage::Block { session_id, block, replay: false } => {
                if let Some(seq) = block.seq {
                    match self.followed.get_mut(session_id) {
                        Some(last) if seq <= *last => {
                            tracing::debug!("dropping block {seq} of {session_id}: already delivered");
                            return Step::Stay;
                        }
                        Some(last) => *last = seq,
                        None => self.follow(session_id.clone(), seq),
                    }
                }
            }
            BridgeMessage::ReplayDone { session_id, .. } if self.swallow_replay_done.remove(session_id) => {
                return Step::Stay;
            }
            _ => {}
        }
        match self.caller_tx.send(message).await {
            Ok(()) => Step::Stay,
            Err(_) => Step::End("the caller went away".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_from_200_ms_to_5_s() {
        let delays: Vec<u64> = (0..8).map(|a| retry_delay(a).as_millis() as u64).collect();
        assert_eq!(delays, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
    }

    #[test]
    fn only_reads_and_resumes_are_resent_after_a_move() {
        let table: &[(&str, bool)] = &[
            (r#"{"type":"session_resume","session_id":"s","since_seq":3,"app_pubkey":""}"#, true),
            (r#"{"type":"list_sessions"}"#, true),
            (r#"{"type":"list_agents"}"#, true),
            (r#"{"type":"user_message","session_id":"s","text":"hi"}"#, false),
            (r#"{"type":"interrupt","session_id":"s"}"#, false),
            (r#"{"type":"stop_session","session_id":"s"}"#, false),
            (r#"{"type":"session_request","agent":"echo","cwd":"/","app_pubkey":""}"#, false),
        ];
        for (json, repeatable) in table {
            let control = control::parse(serde_json::from_str(json).unwrap()).unwrap();
            assert_eq!(is_repeatable(&control.message), *repeatable, "{json}");
        }
    }
}
