//! Routing: what a bridge sends to its clients (a batch's blocks under one lock, single
//! frames, `close_conn`) and what a client sends to its bridge. Every path checks that
//! the connection belongs to the bridge it names.

use terminull_protocol::relay::{RelayErrorCode, RelayFrame};
use terminull_protocol::text::prefix_within;
use terminull_protocol::{BridgeId, SessionId};

use super::{Bridge, Hub, unix_now};
use crate::batch::Forward;
use crate::conn::{ConnId, Kill, SendError, close_code, frame_json};
use crate::refusal::Refusal;
use crate::store::StoreOp;

impl Hub {
    /// The blocks of a `batch` from `bridge_id` whose signature the caller has checked,
    /// for its client `conn`, delivered in order under one lock. The first block of a
    /// session a connection receives makes the session resumable and gives the
    /// connection its token first (a `relay_status` ahead of the block). A connection
    /// whose queue overflows is cut off and gets none of the rest.
    pub(crate) fn route_batch(&self, bridge_id: &BridgeId, conn: ConnId, mut blocks: Vec<Forward<'_>>) {
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(client) = state.clients.get_mut(&conn).filter(|c| &c.bridge_id == bridge_id) else {
            tracing::debug!(%bridge_id, conn, "dropping a batch for a connection that is not this bridge's");
            return;
        };
        // The frames go to the writer as one queue item (one channel operation, one
        // wake-up), split only where a `relay_status` must go before a session's first
        // block.
        let mut frames: Vec<String> = Vec::with_capacity(blocks.len());
        // Blocks of a batch are mostly of one session: check a session once per run.
        let mut known: Option<usize> = None;
        for i in 0..blocks.len() {
            let session = blocks[i].session_id.as_ref();
            if known.is_none_or(|k| blocks[k].session_id != session) {
                let session_id = SessionId(session.to_owned());
                if !client.tokens_issued.contains(&session_id) {
                    let Some(bridge) = state.bridges.get_mut(bridge_id) else { return };
                    if !bridge.resumable.contains(&session_id) {
                        bridge.resumable.push(session_id.clone());
                        if bridge.resumable.len() > self.config.max_resumable_sessions {
                            bridge.resumable.remove(0);
                        }
                        self.store.submit(StoreOp::PutBridge(bridge_id.clone(), bridge.stored()));
                    }
                    let status = self.status(bridge, bridge_id, &client.device_id, unix_now());
                    client.tokens_issued.insert(session_id);
                    let before = std::mem::take(&mut frames);
                    if (!before.is_empty() && !client.handle.send_texts_or_cut_off(before))
                        || !client.handle.send_text_or_cut_off(frame_json(&RelayFrame::RelayStatus(status)))
                    {
                        state.drop_client(conn, None);
                        return;
                    }
                }
                known = Some(i);
            }
            frames.push(std::mem::take(&mut blocks[i].frame));
        }
        if !frames.is_empty() && !client.handle.send_texts_or_cut_off(frames) {
            state.drop_client(conn, None);
        }
    }

    /// A frame from `bridge_id` for its client `conn` (`conn` already stripped).
    pub(crate) fn route_to_client(&self, bridge_id: &BridgeId, conn: ConnId, frame: &RelayFrame) {
        let mut state = self.lock();
        if state.clients.get(&conn).is_none_or(|c| &c.bridge_id != bridge_id) {
            tracing::debug!(%bridge_id, conn, frame = frame.frame_type(), "dropping a frame for a connection that is not this bridge's");
            return;
        }
        state.deliver(conn, frame_json(frame));
    }

    /// The bridge's `close_conn`.
    pub(crate) fn close_conn(&self, bridge_id: &BridgeId, conn: ConnId, reason: &str) {
        let mut state = self.lock();
        if state.clients.get(&conn).is_none_or(|c| &c.bridge_id != bridge_id) {
            tracing::debug!(%bridge_id, conn, "close_conn for a connection that is not this bridge's");
            return;
        }
        let reason = prefix_within(reason, 1024).to_owned();
        state.drop_client(conn, Some(Kill::with_error(RelayErrorCode::UnknownDevice, reason, close_code::POLICY)));
    }

    /// Forwards a client's frame (with `conn` set) to its bridge.
    pub(crate) fn forward_to_bridge(&self, bridge_id: &BridgeId, frame: &RelayFrame) -> Result<(), Refusal> {
        let state = self.lock();
        let online = state.bridges.get(bridge_id).and_then(Bridge::online);
        let Some(online) = online else {
            return Err(Refusal::bridge_offline());
        };
        match online.send_frame(frame) {
            Ok(()) => Ok(()),
            Err(SendError::Full) => Err(Refusal::new(
                RelayErrorCode::RateLimited,
                "the bridge is not keeping up; the frame was dropped, retry later",
            )),
            Err(SendError::Closed) => Err(Refusal::bridge_offline()),
        }
    }
}
