//! The hub: every bridge the relay knows, which are online, every authenticated client
//! connection, pairing requests in flight, push subscriptions and the push hold-queue
//! (the push side is in `push.rs`).
//!
//! All of it sits behind one mutex that is only ever held for short, non-async work:
//! frames are handed to connections with `try_send`, so a slow peer can never stall the
//! hub (a client whose queue is full is cut off as a slow consumer instead). Every
//! change to durable state is also handed to the [`Store`] writer.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use terminull_protocol::crypto::app_code::AppSignature;
use terminull_protocol::crypto::keys::{PublicIdentity, PublicKeys};
use terminull_protocol::crypto::pairing::{PairRequest, PairResponse};
use terminull_protocol::relay::{
    AgentSummary, ConnClosed, DeviceRecord, PROTOCOL_VERSION, PairRequestFrame, PairResponseFrame, Register,
    Registered, RelayErrorCode, RelayFrame, RelayStatus,
};
use terminull_protocol::text::prefix_within;
use terminull_protocol::{BridgeId, DeviceId, SessionId};
use tokio::sync::{Semaphore, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::RelayConfig;
use crate::conn::{ConnHandle, ConnId, Kill, SendError, close_code, frame_json};
use crate::limits::IpRateLimiter;
use crate::refusal::Refusal;
use crate::store::{QueuedPush, Snapshot, Store, StoreOp, StoredBridge, StoredSubscription};
use crate::token::ResumeTokens;
use checks::{bounded_sessions, check_devices};

use crate::webpush::PushSender;

mod app_code;
mod bridges;
mod checks;
mod cluster;
pub(crate) mod expiry;
pub(crate) mod push;
mod remote;
mod route;

/// Unix seconds now.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Unix microseconds now.
fn unix_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)).unwrap_or(0)
}

/// A bridge the relay knows.
#[derive(Debug)]
struct Bridge {
    keys: PublicKeys,
    agents: Vec<AgentSummary>,
    /// Oldest first, no duplicates.
    resumable: Vec<SessionId>,
    devices: Vec<DeviceRecord>,
    /// Devices that may connect: present and not revoked.
    active: HashMap<DeviceId, PublicIdentity>,
    online: Option<ConnHandle>,
    clients: HashSet<ConnId>,
    subscriptions: HashMap<DeviceId, StoredSubscription>,
    held: HashMap<DeviceId, VecDeque<(u64, QueuedPush)>>,
    /// When the bridge was last connected (Unix seconds; refreshed while it is online).
    last_seen: u64,
    /// Connected again after registering, or a device authenticated: the long lifetime.
    established: bool,
    /// Its signature over the app it embeds (`register.app`, checked), served to apps.
    app: Option<AppSignature>,
    /// The node holding the bridge when another one does (`online` is then the queue
    /// toward that node); `None` when it is connected here or offline.
    holder: Option<String>,
    /// When its current connection registered (Unix µs, on whichever node).
    since: u64,
}

impl Bridge {
    /// A bridge as the relay first knows it: offline, no devices yet, no subscriptions.
    fn new(keys: PublicKeys, agents: Vec<AgentSummary>, resumable: Vec<SessionId>) -> Self {
        Self {
            keys,
            agents,
            resumable,
            devices: Vec::new(),
            active: HashMap::new(),
            online: None,
            clients: HashSet::new(),
            subscriptions: HashMap::new(),
            held: HashMap::new(),
            last_seen: unix_now(),
            established: false,
            app: None,
            holder: None,
            since: 0,
        }
    }

    fn stored(&self) -> StoredBridge {
        StoredBridge {
            keys: self.keys.clone(),
            agents: self.agents.clone(),
            resumable: self.resumable.clone(),
            last_seen: self.last_seen,
            established: self.established,
        }
    }

    fn online(&self) -> Option<&ConnHandle> {
        self.online.as_ref().filter(|h| !h.is_killed())
    }
}

/// An authenticated client connection.
#[derive(Debug)]
struct Client {
    bridge_id: BridgeId,
    device_id: DeviceId,
    handle: ConnHandle,
    /// Sessions this connection holds a resume token for.
    tokens_issued: HashSet<SessionId>,
    /// A connection of another node (its id and its number there) reaching this node's
    /// bridge over the bus; `None` for a connection of this node.
    remote: Option<(String, ConnId)>,
}

/// How a pairing request ended.
#[derive(Debug)]
pub(crate) enum PairOutcome {
    /// The bridge accepted.
    Accepted(PairResponse),
    /// The bridge refused, saying why.
    Refused(String),
    /// The bridge went offline (or the relay is stopping) before answering.
    BridgeGone,
}

/// Why a pairing request could not be sent to the bridge.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PairStartError {
    /// No such bridge was ever registered.
    UnknownBridge,
    /// The bridge is not connected.
    Offline,
    /// Too many requests are waiting for this bridge.
    TooManyForBridge,
    /// The relay is at its bound of pending requests, or the bridge's queue is full.
    Busy,
}

#[derive(Debug)]
struct PendingPairing {
    bridge_id: BridgeId,
    reply: oneshot::Sender<PairOutcome>,
}

#[derive(Debug, Default)]
struct State {
    bridges: HashMap<BridgeId, Bridge>,
    clients: HashMap<ConnId, Client>,
    pairings: HashMap<u64, PendingPairing>,
    /// Connections of other nodes to bridges held here: (node, its number) → ours.
    remote_conns: HashMap<(String, ConnId), ConnId>,
    /// Pairing requests made on other nodes for bridges held here.
    remote_pairings: HashMap<u64, cluster::RemotePairing>,
    /// Presences announced for bridges this node did not know yet (applied when it
    /// loads them; at most `max_bridges`).
    early_presence: HashMap<BridgeId, cluster::Announced>,
    stopping: bool,
}

impl State {
    /// Cuts off every connection to `bridge_id` whose device is no longer in its
    /// registry (`whose` says which, in the log).
    fn cut_off_unpaired_clients(&mut self, bridge_id: &BridgeId, whose: &str) {
        let Some(bridge) = self.bridges.get(bridge_id) else { return };
        let unpaired: Vec<ConnId> = bridge
            .clients
            .iter()
            .filter(|c| self.clients.get(*c).is_some_and(|client| !bridge.active.contains_key(&client.device_id)))
            .copied()
            .collect();
        for conn in unpaired {
            tracing::info!(%bridge_id, conn, "cutting off a connection of {whose}");
            self.drop_client(
                conn,
                Some(Kill::with_error(
                    RelayErrorCode::UnknownDevice,
                    "this device is no longer paired with the bridge",
                    close_code::POLICY,
                )),
            );
        }
    }

    /// Removes a client connection (killing it with `kill` when given) and tells its
    /// bridge. Idempotent.
    fn drop_client(&mut self, conn: ConnId, kill: Option<Kill>) {
        let Some(client) = self.clients.remove(&conn) else { return };
        if let Some(remote) = &client.remote {
            self.remote_conns.remove(remote);
        }
        if let Some(kill) = kill {
            client.handle.kill(kill);
        }
        if let Some(bridge) = self.bridges.get_mut(&client.bridge_id) {
            bridge.clients.remove(&conn);
            if let Some(online) = bridge.online() {
                send_to_bridge(online, &RelayFrame::ConnClosed(ConnClosed { conn }));
            }
        }
    }

    /// Ends every pairing request waiting for `bridge_id` with [`PairOutcome::BridgeGone`].
    fn fail_pairings(&mut self, bridge_id: &BridgeId) {
        let failed: Vec<u64> =
            self.pairings.iter().filter(|(_, p)| &p.bridge_id == bridge_id).map(|(id, _)| *id).collect();
        for id in failed {
            if let Some(p) = self.pairings.remove(&id) {
                // The HTTP handler may have timed out already.
                let _ = p.reply.send(PairOutcome::BridgeGone);
            }
        }
    }

    /// Sends `text` to a client; a full queue cuts it off.
    fn deliver(&mut self, conn: ConnId, text: String) -> bool {
        let Some(client) = self.clients.get(&conn) else { return false };
        if client.handle.send_text_or_cut_off(text) {
            return true;
        }
        self.drop_client(conn, None);
        false
    }
}

/// Sends a relay-originated frame (`conn_closed`, `pair_request`, `registered`) to a
/// bridge. A bridge whose queue is full has fallen hopelessly behind: it is cut off and
/// reconciles when it registers again.
fn send_to_bridge(handle: &ConnHandle, frame: &RelayFrame) -> bool {
    match handle.send_frame(frame) {
        Ok(()) => true,
        Err(SendError::Full) => {
            tracing::warn!(conn = handle.id, "bridge queue full; cutting the bridge off");
            handle.kill(Kill::with_error(
                RelayErrorCode::SlowConsumer,
                "the bridge read too slowly and its queue overflowed; register again",
                close_code::TRY_AGAIN_LATER,
            ));
            false
        }
        Err(SendError::Closed) => false,
    }
}

/// The Web Push side: the sender (with the relay's VAPID key) and a bound on deliveries
/// in flight.
#[derive(Debug)]
struct PushDispatch {
    sender: PushSender,
    in_flight: Arc<Semaphore>,
}

/// The shared state of a running relay.
#[derive(Debug)]
pub(crate) struct Hub {
    pub config: Arc<RelayConfig>,
    state: Mutex<State>,
    store: Store,
    tokens: ResumeTokens,
    push: PushDispatch,
    next_conn: AtomicU64,
    next_pairing: AtomicU64,
    next_push_seq: AtomicU64,
    connections: AtomicUsize,
    /// New bridge registrations per IP address.
    new_bridges: IpRateLimiter,
    /// Cancelled when the relay stops.
    pub shutdown: CancellationToken,
    /// Every task the relay spawns, so that stopping can wait for them.
    pub tasks: TaskTracker,
    /// The other relay nodes, with `--bus`.
    cluster: OnceLock<cluster::Joined>,
}

/// Counts one WebSocket connection toward `max_connections` while alive.
#[derive(Debug)]
pub(crate) struct ConnectionSlot {
    hub: Arc<Hub>,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.hub.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Hub {
    /// The hub, loaded from `snapshot`.
    pub(crate) fn new(config: Arc<RelayConfig>, store: Store, snapshot: Snapshot, sender: PushSender) -> Self {
        let mut state = State::default();
        let now = unix_now();
        let ttl = config.push_ttl.as_secs();
        for (id, stored) in snapshot.bridges {
            if PublicIdentity::from_wire(&stored.keys).map(|k| k.bridge_id()) != Ok(id.clone()) {
                tracing::error!(bridge_id = %id, "skipping a stored bridge whose keys do not match its id");
                continue;
            }
            let mut bridge = Bridge::new(stored.keys, stored.agents, stored.resumable);
            // Stored before registrations expired: start their clock now, as established.
            (bridge.last_seen, bridge.established) =
                if stored.last_seen == 0 { (now, true) } else { (stored.last_seen, stored.established) };
            state.bridges.insert(id, bridge);
        }
        for (id, devices) in snapshot.devices {
            let Some(bridge) = state.bridges.get_mut(&id) else { continue };
            match check_devices(&devices, usize::MAX) {
                Ok(active) => {
                    bridge.devices = devices;
                    bridge.active = active;
                }
                Err(e) => tracing::error!(bridge_id = %id, error = %e, "skipping a stored device registry"),
            }
        }
        for (bridge_id, device_id, sub) in snapshot.subscriptions {
            if let Some(bridge) = state.bridges.get_mut(&bridge_id) {
                bridge.subscriptions.insert(device_id, sub);
            }
        }
        let mut max_seq = 0;
        let mut queue = snapshot.queue;
        queue.sort_by_key(|(_, _, seq, _)| *seq);
        for (bridge_id, device_id, seq, entry) in queue {
            max_seq = max_seq.max(seq);
            let expired = entry.queued_at.saturating_add(ttl) <= now;
            match state.bridges.get_mut(&bridge_id) {
                Some(bridge) if !expired => {
                    bridge.held.entry(device_id).or_default().push_back((seq, entry));
                }
                _ => store.submit(StoreOp::DeleteQueued(bridge_id, device_id, seq)),
            }
        }
        let tokens = ResumeTokens::new(snapshot.jwt_key, config.resume_token_ttl);
        let push = PushDispatch { sender, in_flight: Arc::new(Semaphore::new(config.max_push_in_flight)) };
        let new_bridges =
            IpRateLimiter::per_window(config.new_bridges_per_ip, config.new_bridges_window, config.max_tracked_ips);
        Self {
            config,
            state: Mutex::new(state),
            store,
            tokens,
            push,
            next_conn: AtomicU64::new(1),
            next_pairing: AtomicU64::new(1),
            // Held pushes are keyed by (bridge, device, seq) in a store other relay
            // processes may share: start from the clock (µs) so that a process
            // started later never reuses another's sequence numbers.
            next_push_seq: AtomicU64::new((max_seq + 1).max(unix_micros())),
            connections: AtomicUsize::new(0),
            new_bridges,
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            cluster: OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves maps that are still individually valid;
        // serving on beats taking every bridge offline.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A fresh connection number.
    pub(crate) fn next_conn_id(&self) -> ConnId {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// Reserves a connection slot, or `None` at `max_connections`.
    pub(crate) fn try_connection_slot(self: &Arc<Self>) -> Option<ConnectionSlot> {
        let max = self.config.max_connections;
        self.connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .ok()
            .map(|_| ConnectionSlot { hub: Arc::clone(self) })
    }

    /// Whether the open connections reach into the slots kept for reconnecting peers
    /// (`max_connections - reconnect_reserve`): new registrations and pairings wait.
    pub(crate) fn in_reconnect_reserve(&self) -> bool {
        let open = self.connections.load(Ordering::Acquire);
        open >= self.config.max_connections.saturating_sub(self.reconnect_reserve())
    }

    /// `reconnect_reserve`, at most a tenth of `max_connections`.
    fn reconnect_reserve(&self) -> usize {
        self.config.reconnect_reserve.min(self.config.max_connections / 10)
    }

    /// The store.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The VAPID public key, base64url.
    pub(crate) fn vapid_public_key(&self) -> String {
        self.push.sender.vapid_public_key()
    }

    /// The bridge's `pair_response`.
    pub(crate) fn pair_response(
        self: &Arc<Self>,
        bridge_id: &BridgeId,
        frame: PairResponseFrame,
    ) -> Result<(), Refusal> {
        // A request made on another node is answered there.
        let Some(frame) = self.pair_response_elsewhere(bridge_id, frame) else { return Ok(()) };
        let outcome = match (frame.response, frame.error) {
            (Some(response), None) => PairOutcome::Accepted(response),
            (None, Some(error)) => PairOutcome::Refused(prefix_within(&error, 1024).to_owned()),
            _ => {
                return Err(Refusal::bad_frame("pair_response needs exactly one of `response` and `error`"));
            }
        };
        let mut state = self.lock();
        match state.pairings.get(&frame.request_id) {
            Some(p) if &p.bridge_id == bridge_id => {
                if let Some(p) = state.pairings.remove(&frame.request_id) {
                    // The HTTP handler may have timed out already.
                    let _ = p.reply.send(outcome);
                }
            }
            _ => tracing::debug!(%bridge_id, request_id = frame.request_id, "pair_response for no waiting request"),
        }
        Ok(())
    }

    /// The key of a device allowed to connect to `bridge_id`.
    pub(crate) fn device_key(&self, bridge_id: &BridgeId, device_id: &DeviceId) -> Result<PublicIdentity, Refusal> {
        let state = self.lock();
        let Some(bridge) = state.bridges.get(bridge_id) else {
            return Err(Refusal::unregistered_bridge(bridge_id));
        };
        bridge.active.get(device_id).copied().ok_or_else(|| Refusal::unpaired_device(device_id, bridge_id))
    }

    /// Admits an authenticated client connection: sends its `relay_status`, then the
    /// pushes held for its device.
    pub(crate) fn attach_client(
        &self,
        bridge_id: &BridgeId,
        device_id: &DeviceId,
        handle: ConnHandle,
    ) -> Result<(), Refusal> {
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.stopping {
            return Err(Refusal::shutting_down());
        }
        let Some(bridge) = state.bridges.get_mut(bridge_id) else {
            return Err(Refusal::unregistered_bridge(bridge_id));
        };
        if !bridge.active.contains_key(device_id) {
            return Err(Refusal::unpaired_device(device_id, bridge_id));
        }
        let live = bridge.clients.iter().filter(|c| state.clients.get(*c).is_some_and(|cl| &cl.device_id == device_id));
        if live.count() >= self.config.max_connections_per_device {
            return Err(Refusal::new(
                RelayErrorCode::TooManyConnections,
                format!(
                    "device `{device_id}` already holds {} connections to this bridge",
                    self.config.max_connections_per_device
                ),
            ));
        }
        let now = unix_now();
        if !bridge.established {
            bridge.established = true;
            self.store.submit(StoreOp::PutBridge(bridge_id.clone(), bridge.stored()));
        }
        let status = self.status(bridge, bridge_id, device_id, now);
        let conn = handle.id;
        bridge.clients.insert(conn);
        state.clients.insert(
            conn,
            Client {
                bridge_id: bridge_id.clone(),
                device_id: device_id.clone(),
                handle,
                tokens_issued: bridge.resumable.iter().cloned().collect(),
                remote: None,
            },
        );
        tracing::debug!(%bridge_id, %device_id, conn, "client authenticated");
        if !state.deliver(conn, frame_json(&RelayFrame::RelayStatus(status))) {
            return Ok(());
        }
        let Some(bridge) = state.bridges.get_mut(bridge_id) else { return Ok(()) };
        let Some(mut held) = bridge.held.remove(device_id) else { return Ok(()) };
        let cutoff = now.saturating_sub(self.config.push_ttl.as_secs());
        while let Some((seq, entry)) = held.pop_front() {
            if entry.queued_at > cutoff && !state.deliver(conn, frame_json(&RelayFrame::Push(entry.push.clone()))) {
                // The connection was cut off: keep this push and the rest for next time.
                held.push_front((seq, entry));
                if let Some(bridge) = state.bridges.get_mut(bridge_id) {
                    bridge.held.insert(device_id.clone(), held);
                }
                return Ok(());
            }
            self.store.submit(StoreOp::DeleteQueued(bridge_id.clone(), device_id.clone(), seq));
        }
        Ok(())
    }

    /// The client connection `conn` ended.
    pub(crate) fn client_gone(&self, conn: ConnId) {
        self.lock().drop_client(conn, None);
    }

    /// Checks a resume token.
    pub(crate) fn check_token(
        &self,
        token: &str,
        bridge_id: &BridgeId,
        device_id: &DeviceId,
        session_id: &SessionId,
    ) -> Result<(), crate::token::TokenError> {
        self.tokens.verify(token, bridge_id.as_str(), device_id.as_str(), session_id.as_str(), unix_now())
    }

    // ----- HTTP API -----

    /// The keys and device registry of `bridge_id`, when the bridge is known.
    pub(crate) fn devices(&self, bridge_id: &BridgeId) -> Option<(PublicKeys, Vec<DeviceRecord>)> {
        self.lock().bridges.get(bridge_id).map(|b| (b.keys.clone(), b.devices.clone()))
    }

    /// Sends a pairing request to the bridge; the receiver yields its outcome.
    pub(crate) fn start_pairing(
        &self,
        bridge_id: &BridgeId,
        request: PairRequest,
    ) -> Result<(u64, oneshot::Receiver<PairOutcome>), PairStartError> {
        let mut state = self.lock();
        let Some(bridge) = state.bridges.get(bridge_id) else { return Err(PairStartError::UnknownBridge) };
        let Some(online) = bridge.online().cloned() else { return Err(PairStartError::Offline) };
        if state.pairings.len() >= self.config.max_pending_pairings {
            return Err(PairStartError::Busy);
        }
        let for_bridge = state.pairings.values().filter(|p| &p.bridge_id == bridge_id).count();
        if for_bridge >= self.config.max_pending_pairings_per_bridge {
            return Err(PairStartError::TooManyForBridge);
        }
        let request_id = self.next_pairing.fetch_add(1, Ordering::Relaxed);
        match online.send_frame(&RelayFrame::PairRequest(PairRequestFrame { request_id, request })) {
            Ok(()) => {}
            Err(SendError::Full) => return Err(PairStartError::Busy),
            Err(SendError::Closed) => return Err(PairStartError::Offline),
        }
        let (reply, outcome) = oneshot::channel();
        state.pairings.insert(request_id, PendingPairing { bridge_id: bridge_id.clone(), reply });
        Ok((request_id, outcome))
    }

    /// Forgets a pairing request whose HTTP caller stopped waiting.
    pub(crate) fn cancel_pairing(&self, request_id: u64) {
        self.lock().pairings.remove(&request_id);
    }

    /// Closes every connection with "going away" and fails pending pairings.
    pub(crate) fn stop_connections(&self) {
        let mut state = self.lock();
        state.stopping = true;
        let bye = || Kill::close(close_code::GOING_AWAY, "the relay is shutting down");
        for client in state.clients.values() {
            // A device on another node keeps its own node: told to reconnect and resume,
            // as when this node's announcement that its bridges left reaches that node
            // first (the two race; both must say the same).
            let kill = match client.remote {
                Some(_) => Kill::close(
                    close_code::SERVICE_RESTART,
                    "the bridge's relay node is shutting down; reconnect and resume",
                ),
                None => bye(),
            };
            client.handle.kill(kill);
        }
        state.clients.clear();
        let now = unix_now();
        for (bridge_id, bridge) in &mut state.bridges {
            if let Some(online) = bridge.online.take() {
                online.kill(bye());
                // It was connected until now: its registration's clock starts here.
                bridge.last_seen = now;
                self.store.submit(StoreOp::PutBridge(bridge_id.clone(), bridge.stored()));
            }
            bridge.clients.clear();
        }
        for (_, p) in state.pairings.drain() {
            // The HTTP handler may have timed out already.
            let _ = p.reply.send(PairOutcome::BridgeGone);
        }
    }
}

#[cfg(test)]
mod tests;
