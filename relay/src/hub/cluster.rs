//! The hub's side of frames across nodes (`crate::cluster`): where each bridge is held,
//! the frames other nodes' devices send to a bridge held here, the frames this node's
//! devices get from a bridge held elsewhere, pairing requests and pushes across nodes.

use std::sync::Arc;
use std::time::Instant;

use terminull_protocol::relay::{PairRequestFrame, PairResponseFrame, Push, RelayErrorCode, RelayFrame};
use terminull_protocol::{BridgeId, DeviceId};

use super::{Client, Hub, State, send_to_bridge};
use crate::cluster::{Cluster, Down, Presence, down_proxy, up_proxy};
use crate::conn::{ConnHandle, ConnId, Kill, SendError, close_code, error_frame, frame_json};

/// The other nodes, as the hub holds them.
pub(super) type Joined = Arc<Cluster>;
/// Where another node says a bridge is.
pub(super) type Announced = Presence;

/// A pairing request made on another node for a bridge held here.
#[derive(Debug)]
pub(super) struct RemotePairing {
    bridge_id: BridgeId,
    node: String,
    request_id: u64,
    at: Instant,
}

/// What a device whose link ended because its bridge moved is told (close 1012).
const MOVED: &str = "the bridge reconnected through another relay node; reconnect and resume";

impl State {
    /// Ends every link to `bridge_id` on this node (the bridge's connection they were
    /// with is gone): this node's device connections are closed (they reconnect and
    /// resume), other nodes' are forgotten (their node does the same on the presence).
    pub(super) fn cut_links(&mut self, bridge_id: &BridgeId) {
        self.forget_remote_conns(bridge_id);
        let Some(bridge) = self.bridges.get(bridge_id) else { return };
        let conns: Vec<ConnId> = bridge.clients.iter().copied().collect();
        for conn in conns {
            tracing::info!(%bridge_id, conn, "closing a device connection whose bridge moved to another node");
            self.drop_client(conn, Some(Kill::close(close_code::SERVICE_RESTART, MOVED)));
        }
    }

    /// Forgets the connections of other nodes to `bridge_id` (and their pairing requests).
    pub(super) fn forget_remote_conns(&mut self, bridge_id: &BridgeId) {
        let Some(bridge) = self.bridges.get_mut(bridge_id) else { return };
        let remote: Vec<ConnId> = bridge
            .clients
            .iter()
            .filter(|c| self.clients.get(*c).is_some_and(|client| client.remote.is_some()))
            .copied()
            .collect();
        for conn in remote {
            bridge.clients.remove(&conn);
            if let Some(Client { remote: Some(key), .. }) = self.clients.remove(&conn) {
                self.remote_conns.remove(&key);
            }
        }
        self.remote_pairings.retain(|_, p| &p.bridge_id != bridge_id);
    }
}

impl State {
    /// Delivers `text` to the live connections of `device_id` to `bridge_id` on this
    /// node; whether one took it.
    pub(super) fn deliver_to_device(&mut self, bridge_id: &BridgeId, device_id: &DeviceId, text: &str) -> bool {
        let live: Vec<ConnId> = self
            .clients
            .iter()
            .filter(|(_, c)| &c.bridge_id == bridge_id && &c.device_id == device_id && c.remote.is_none())
            .map(|(conn, _)| *conn)
            .collect();
        let mut delivered = false;
        for conn in live {
            delivered |= self.deliver(conn, text.to_owned());
        }
        delivered
    }
}

impl Hub {
    /// Delivers the pushes held for `bridge_id`'s devices that are connected here (held
    /// by another node while they connected), oldest first, and forgets them.
    pub(super) fn deliver_held_to_connected(&self, state: &mut State, bridge_id: &BridgeId) {
        let Some(bridge) = state.bridges.get_mut(bridge_id) else { return };
        let mut held = std::mem::take(&mut bridge.held);
        for (device_id, queue) in &mut held {
            while let Some((seq, entry)) = queue.front() {
                let text = frame_json(&RelayFrame::Push(entry.push.clone()));
                let seq = *seq;
                if !state.deliver_to_device(bridge_id, device_id, &text) {
                    break;
                }
                queue.pop_front();
                self.store.submit(crate::store::StoreOp::DeleteQueued(bridge_id.clone(), device_id.clone(), seq));
            }
        }
        held.retain(|_, q| !q.is_empty());
        if let Some(bridge) = state.bridges.get_mut(bridge_id) {
            bridge.held = held;
        }
    }

    /// Joins the other nodes (once, at start).
    pub(crate) fn set_cluster(&self, cluster: Arc<Cluster>) {
        let _ = self.cluster.set(cluster);
    }

    /// The other nodes, with `--bus`.
    pub(crate) fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.get()
    }

    /// Where `bridge_id` is, when it is connected to this node.
    pub(crate) fn local_presence(&self, bridge_id: &BridgeId) -> Option<Presence> {
        let cluster = self.cluster()?;
        let state = self.lock();
        let bridge = state.bridges.get(bridge_id)?;
        (bridge.holder.is_none() && bridge.online().is_some()).then(|| Presence {
            node: cluster.node.clone(),
            online: true,
            since: bridge.since,
            agents: bridge.agents.clone(),
        })
    }

    /// Before a device of `bridge_id` is admitted: when this node sees the bridge
    /// offline, asks the others whether one holds it.
    pub(crate) async fn locate(self: &Arc<Self>, bridge_id: &BridgeId) {
        let Some(cluster) = self.cluster().cloned() else { return };
        let offline = self.lock().bridges.get(bridge_id).is_some_and(|b| b.online().is_none());
        if offline && let Some(presence) = cluster.locate(bridge_id).await {
            self.apply_presence(bridge_id, presence);
        }
    }

    /// The relay is stopping: tells the other nodes that the bridges connected here are
    /// leaving, so that they close their devices' links now rather than when the
    /// bridges register elsewhere.
    pub(crate) async fn announce_leaving(&self) {
        let Some(cluster) = self.cluster().cloned() else { return };
        let held: Vec<(BridgeId, u64)> = {
            let state = self.lock();
            state
                .bridges
                .iter()
                .filter(|(_, b)| b.holder.is_none() && b.online().is_some())
                .map(|(id, b)| (id.clone(), b.since))
                .collect()
        };
        cluster.announce_offline(&held).await;
    }

    /// `nodes` went silent (killed, or cut off from NATS): the bridges they held are
    /// offline here, as if each had announced it left.
    pub(crate) fn nodes_gone(self: &Arc<Self>, nodes: &[String]) {
        let held: Vec<(BridgeId, String, u64)> = {
            let state = self.lock();
            state
                .bridges
                .iter()
                .filter_map(|(id, b)| Some((id.clone(), b.holder.clone()?, b.since)))
                .filter(|(_, holder, _)| nodes.contains(holder))
                .collect()
        };
        for (bridge_id, node, since) in held {
            tracing::warn!(%bridge_id, %node, "the relay node holding this bridge went silent; the bridge is offline here");
            self.apply_presence(&bridge_id, Presence { node, online: false, since, agents: Vec::new() });
        }
    }

    /// Another node announced that `bridge_id` registered with it, or left it.
    pub(crate) fn apply_presence(self: &Arc<Self>, bridge_id: &BridgeId, presence: Presence) {
        let Some(cluster) = self.cluster().cloned() else { return };
        if presence.online {
            cluster.heard_from(&presence.node);
        }
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(bridge) = state.bridges.get_mut(bridge_id) else {
            // Announced before the registration reached this node: kept for then.
            if !presence.online {
                state.early_presence.remove(bridge_id);
            } else if state.early_presence.len() < self.config.max_bridges {
                state.early_presence.insert(bridge_id.clone(), presence);
            }
            return;
        };
        let local = bridge.holder.is_none() && bridge.online().is_some();
        if !presence.online {
            if bridge.holder.as_deref() != Some(presence.node.as_str()) {
                return;
            }
            tracing::info!(%bridge_id, node = %presence.node, "bridge left another relay node");
            if let Some(old) = bridge.online.take() {
                old.kill(Kill::close(close_code::GOING_AWAY, "the bridge disconnected"));
            }
            bridge.holder = None;
            state.fail_pairings(bridge_id);
            state.cut_links(bridge_id);
            return;
        }
        if presence.since < bridge.since {
            return; // an older registration than the one known here
        }
        if bridge.holder.as_deref() == Some(presence.node.as_str()) && bridge.online().is_some() {
            bridge.since = presence.since;
            bridge.agents = presence.agents;
            self.broadcast_status(state, bridge_id);
            return;
        }
        tracing::info!(%bridge_id, node = %presence.node, "bridge held by another relay node");
        let moved = local || bridge.holder.is_some();
        let old = bridge.online.replace(up_proxy(self, &cluster, bridge_id));
        bridge.holder = Some(presence.node);
        bridge.since = presence.since;
        bridge.agents = presence.agents;
        if let Some(old) = old {
            old.kill(Kill::close(
                close_code::GOING_AWAY,
                "replaced by a newer connection of this bridge on another relay node",
            ));
        }
        if local {
            cluster.release(bridge_id, presence.since, false);
        }
        if moved {
            state.fail_pairings(bridge_id);
            state.cut_links(bridge_id);
        }
        self.broadcast_status(state, bridge_id);
    }

    /// A frame from a device connection of `node` for `bridge_id`, held here.
    pub(crate) fn up_from_cluster(self: &Arc<Self>, bridge_id: &BridgeId, node: &str, text: &str) {
        let frame: RelayFrame = match serde_json::from_str(text) {
            Ok(frame) => frame,
            Err(e) => {
                tracing::warn!(%bridge_id, %node, error = %e, "ignoring an unreadable frame from another node");
                return;
            }
        };
        let Some(cluster) = self.cluster().cloned() else { return };
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(online) =
            state.bridges.get(bridge_id).filter(|b| b.holder.is_none()).and_then(|b| b.online()).cloned()
        else {
            tracing::debug!(%bridge_id, %node, "a frame from another node for a bridge not held here");
            return;
        };
        let frame = match frame {
            RelayFrame::LinkHello(mut hello) => {
                let Some(conn) = self.remote_conn(state, &cluster, bridge_id, node, hello.conn, &hello.device_id)
                else {
                    return;
                };
                hello.conn = Some(conn);
                (conn, RelayFrame::LinkHello(hello))
            }
            RelayFrame::Control(mut control) => {
                let Some(conn) = self.remote_conn(state, &cluster, bridge_id, node, control.conn, &control.device_id)
                else {
                    return;
                };
                control.conn = Some(conn);
                (conn, RelayFrame::Control(control))
            }
            RelayFrame::ConnClosed(closed) => {
                if let Some(conn) = state.remote_conns.get(&(node.to_owned(), closed.conn)).copied() {
                    state.drop_client(conn, None);
                }
                return;
            }
            RelayFrame::PairRequest(PairRequestFrame { request_id, request }) => {
                let ttl = self.config.pair_timeout;
                state.remote_pairings.retain(|_, p| p.at.elapsed() < ttl);
                if state.remote_pairings.len() >= self.config.max_pending_pairings {
                    tracing::warn!(%bridge_id, %node, "too many pairing requests from other nodes; one dropped");
                    return;
                }
                let id = self.next_pairing.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let pairing = RemotePairing {
                    bridge_id: bridge_id.clone(),
                    node: node.to_owned(),
                    request_id,
                    at: Instant::now(),
                };
                state.remote_pairings.insert(id, pairing);
                send_to_bridge(&online, &RelayFrame::PairRequest(PairRequestFrame { request_id: id, request }));
                return;
            }
            other => {
                tracing::warn!(%bridge_id, %node, frame = other.frame_type(), "ignoring a frame from another node");
                return;
            }
        };
        let (conn, frame) = frame;
        let refusal = match online.send_frame(&frame) {
            Ok(()) => return,
            Err(SendError::Full) => {
                (RelayErrorCode::RateLimited, "the bridge is not keeping up; the frame was dropped, retry later")
            }
            Err(SendError::Closed) => (RelayErrorCode::BridgeOffline, "the bridge is not connected to the relay"),
        };
        let session_id = match frame {
            RelayFrame::Control(c) => c.session_id,
            _ => None,
        };
        state.deliver(conn, frame_json(&error_frame(refusal.0, refusal.1, session_id)));
    }

    /// This node's number for connection `remote` of `node`, made on its first frame
    /// (the device `device_id` must be active; its node authenticated it).
    fn remote_conn(
        self: &Arc<Self>,
        state: &mut State,
        cluster: &Cluster,
        bridge_id: &BridgeId,
        node: &str,
        remote: Option<ConnId>,
        device_id: &DeviceId,
    ) -> Option<ConnId> {
        let remote = remote?;
        let key = (node.to_owned(), remote);
        if let Some(conn) = state.remote_conns.get(&key).copied() {
            return state.clients.get(&conn).filter(|c| &c.device_id == device_id).map(|_| conn);
        }
        let bridge = state.bridges.get_mut(bridge_id)?;
        if !bridge.active.contains_key(device_id) || state.remote_conns.len() >= self.config.max_connections {
            tracing::info!(%bridge_id, %node, %device_id, "refusing a link from another node");
            return None;
        }
        let handle: ConnHandle = down_proxy(self, cluster, bridge_id, node, remote);
        let conn = handle.id;
        bridge.clients.insert(conn);
        state.remote_conns.insert(key.clone(), conn);
        // No token is known to have reached it: the first block of each session goes
        // after a `relay_status` holding that session's token.
        let client = Client {
            bridge_id: bridge_id.clone(),
            device_id: device_id.clone(),
            handle,
            tokens_issued: Default::default(),
            remote: Some(key),
        };
        state.clients.insert(conn, client);
        Some(conn)
    }

    /// What the bridge's node sent for this node's device connections.
    pub(crate) fn down_from_cluster(self: &Arc<Self>, bridge_id: &BridgeId, down: Down) {
        match down {
            Down::Frames(conn, frames) => {
                let mut state = self.lock();
                if !state.clients.get(&conn).is_some_and(|c| &c.bridge_id == bridge_id && c.remote.is_none()) {
                    return;
                }
                let queued = state.clients.get(&conn).is_some_and(|c| c.handle.send_texts_or_cut_off(frames));
                if !queued {
                    state.drop_client(conn, None);
                }
            }
            Down::Kill(conn, kill) => {
                let mut state = self.lock();
                if state.clients.get(&conn).is_some_and(|c| &c.bridge_id == bridge_id && c.remote.is_none()) {
                    state.drop_client(conn, Some(kill));
                }
            }
            Down::PairResponse(text) => match serde_json::from_str::<RelayFrame>(&text) {
                Ok(RelayFrame::PairResponse(frame)) => {
                    if let Err(e) = self.pair_response(bridge_id, frame) {
                        tracing::warn!(%bridge_id, error = %e.message, "a pairing answer from another node is refused");
                    }
                }
                _ => tracing::warn!(%bridge_id, "ignoring an unreadable pairing answer from another node"),
            },
        }
    }

    /// Sends the bridge's `pair_response` to the node where the request was made, if it
    /// was made on another; otherwise gives it back.
    pub(super) fn pair_response_elsewhere(
        self: &Arc<Self>,
        bridge_id: &BridgeId,
        frame: PairResponseFrame,
    ) -> Option<PairResponseFrame> {
        let Some(cluster) = self.cluster().cloned() else { return Some(frame) };
        let pairing = {
            let mut state = self.lock();
            match state.remote_pairings.get(&frame.request_id) {
                Some(p) if &p.bridge_id == bridge_id => state.remote_pairings.remove(&frame.request_id),
                _ => None,
            }
        };
        let Some(pairing) = pairing else { return Some(frame) };
        let answer = RelayFrame::PairResponse(PairResponseFrame { request_id: pairing.request_id, ..frame });
        let bridge_id = bridge_id.clone();
        self.tasks
            .spawn(async move { cluster.send_pair_response(&bridge_id, &pairing.node, &frame_json(&answer)).await });
        None
    }

    /// Another node's bridge pushes to a device: delivered to its live connections here.
    /// Returns whether one took it.
    pub(crate) fn push_from_cluster(&self, bridge_id: &BridgeId, text: &str) -> bool {
        let Ok(RelayFrame::Push(push)) = serde_json::from_str::<RelayFrame>(text) else { return false };
        self.lock().deliver_to_device(bridge_id, &push.device_id, text)
    }

    /// A push no connection here took: offered to the other nodes first, held if none
    /// takes it.
    pub(super) fn offer_or_hold(self: &Arc<Self>, bridge_id: &BridgeId, push: Push, text: String) {
        let Some(cluster) = self.cluster().cloned() else {
            self.hold_push(bridge_id, push, text);
            return;
        };
        let hub = Arc::clone(self);
        let bridge_id = bridge_id.clone();
        self.tasks.spawn(async move {
            if !cluster.offer_push(&bridge_id, &text).await {
                hub.hold_push(&bridge_id, push, text);
            }
        });
    }
}
