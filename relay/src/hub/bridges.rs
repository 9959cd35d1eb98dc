//! The hub's bridges: registration, their resumable sessions and device registries,
//! the status their clients see, and a bridge going away.

use super::*;

impl Hub {
    /// Records a registration whose signature the caller has checked, makes `handle`
    /// the bridge's connection (closing an older one), answers `registered` and tells
    /// the bridge's clients.
    pub(crate) fn register_bridge(
        self: &Arc<Self>,
        reg: &Register,
        handle: ConnHandle,
        peer: IpAddr,
    ) -> Result<(), Refusal> {
        let bad = Refusal::bad_frame;
        let active = check_devices(&reg.devices, self.config.max_devices_per_bridge)?;
        if reg.agents.len() > self.config.max_agents_per_bridge {
            return Err(bad(format!(
                "{} agents listed; this relay keeps at most {}",
                reg.agents.len(),
                self.config.max_agents_per_bridge
            )));
        }
        if reg.resumable_session_ids.len() > self.config.max_resumable_sessions {
            tracing::warn!(
                bridge_id = %reg.bridge_id,
                listed = reg.resumable_session_ids.len(),
                kept = self.config.max_resumable_sessions,
                "register lists more resumable sessions than the relay keeps; keeping the last ones"
            );
        }
        let resumable = bounded_sessions(&reg.resumable_session_ids, self.config.max_resumable_sessions);

        let mut state = self.lock();
        if state.stopping {
            return Err(Refusal::shutting_down());
        }
        let known = state.bridges.contains_key(&reg.bridge_id);
        if !known && state.bridges.len() >= self.config.max_bridges {
            return Err(Refusal::new(
                RelayErrorCode::TooManyConnections,
                format!("this relay serves at most {} bridges", self.config.max_bridges),
            ));
        }
        if !known && self.in_reconnect_reserve() {
            return Err(Refusal::new(
                RelayErrorCode::TooManyConnections,
                format!(
                    "this relay keeps its last {} connections for reconnecting peers; register later",
                    self.reconnect_reserve()
                ),
            ));
        }
        if !known && let Err(unavailable) = self.store.available() {
            return Err(Refusal::new(
                RelayErrorCode::RateLimited,
                format!("registering a new bridge is paused: {unavailable}"),
            ));
        }
        if !known && !self.new_bridges.allow(peer) {
            return Err(Refusal::new(
                RelayErrorCode::RateLimited,
                format!(
                    "more than {} new bridge registrations from {peer} within {} s; retry later",
                    self.config.new_bridges_per_ip,
                    self.config.new_bridges_window.as_secs()
                ),
            ));
        }
        let bridge = state
            .bridges
            .entry(reg.bridge_id.clone())
            .or_insert_with(|| Bridge::new(reg.keys.clone(), Vec::new(), Vec::new()));
        bridge.keys = reg.keys.clone();
        bridge.agents = reg.agents.clone();
        bridge.resumable = resumable;
        bridge.app = app_code::checked(reg);
        bridge.last_seen = unix_now();
        // Connecting again after registering establishes the registration.
        bridge.established |= known;
        let replaced = bridge.online.replace(handle.clone());
        bridge.since = unix_micros();
        let moved_here = bridge.holder.take().is_some();
        self.store.submit(StoreOp::PutBridge(reg.bridge_id.clone(), bridge.stored()));
        if let Some(cluster) = self.cluster() {
            cluster.hold(&reg.bridge_id, bridge.since, bridge.agents.clone());
        }
        if moved_here {
            // Their links were with the bridge's connection on another node.
            state.cut_links(&reg.bridge_id);
        }
        if let Some(old) = replaced {
            old.kill(Kill::close(close_code::GOING_AWAY, "replaced by a newer connection of this bridge"));
            // The new connection never saw the old one's pairing requests.
            state.fail_pairings(&reg.bridge_id);
        }
        send_to_bridge(
            &handle,
            &RelayFrame::Registered(Registered {
                bridge_id: reg.bridge_id.clone(),
                protocol_version: PROTOCOL_VERSION,
            }),
        );
        self.apply_devices(&mut state, &reg.bridge_id, reg.devices.clone(), active);
        self.broadcast_status(&mut state, &reg.bridge_id);
        tracing::info!(bridge_id = %reg.bridge_id, conn = handle.id, "bridge registered");
        Ok(())
    }

    /// The bridge's `devices` frame: replaces its registry.
    /// The bridge's `sessions` frame: adds the sessions the relay did not know as
    /// resumable (keeping the newest `max_resumable_sessions`), and gives every device
    /// connection its tokens for them.
    pub(crate) fn add_resumable(&self, bridge_id: &BridgeId, ids: &[SessionId]) -> Result<(), Refusal> {
        if ids.len() > self.config.max_resumable_sessions {
            return Err(Refusal::bad_frame(format!(
                "`sessions` lists {} sessions; this relay keeps at most {}",
                ids.len(),
                self.config.max_resumable_sessions
            )));
        }
        let mut state = self.lock();
        let Some(bridge) = state.bridges.get_mut(bridge_id) else { return Ok(()) };
        let known: HashSet<&SessionId> = bridge.resumable.iter().collect();
        let new: Vec<SessionId> = ids.iter().filter(|s| !known.contains(s)).cloned().collect();
        if new.is_empty() {
            return Ok(());
        }
        let merged: Vec<SessionId> = bridge.resumable.iter().chain(new.iter()).cloned().collect();
        bridge.resumable = bounded_sessions(&merged, self.config.max_resumable_sessions);
        self.store.submit(StoreOp::PutBridge(bridge_id.clone(), bridge.stored()));
        self.broadcast_status(&mut state, bridge_id);
        Ok(())
    }

    pub(crate) fn replace_devices(&self, bridge_id: &BridgeId, devices: Vec<DeviceRecord>) -> Result<(), Refusal> {
        let active = check_devices(&devices, self.config.max_devices_per_bridge)?;
        let mut state = self.lock();
        self.apply_devices(&mut state, bridge_id, devices, active);
        Ok(())
    }

    /// Stores a device list and cuts off every connection, subscription and held push of
    /// a device no longer active.
    fn apply_devices(
        &self,
        state: &mut State,
        bridge_id: &BridgeId,
        devices: Vec<DeviceRecord>,
        active: HashMap<DeviceId, PublicIdentity>,
    ) {
        let Some(bridge) = state.bridges.get_mut(bridge_id) else { return };
        bridge.devices = devices;
        bridge.active = active;
        self.store.submit(StoreOp::PutDevices(bridge_id.clone(), bridge.devices.clone()));
        let gone_subs: Vec<DeviceId> =
            bridge.subscriptions.keys().filter(|d| !bridge.active.contains_key(*d)).cloned().collect();
        for device in gone_subs {
            bridge.subscriptions.remove(&device);
            self.store.submit(StoreOp::DeleteSubscription(bridge_id.clone(), device));
        }
        let gone_held: Vec<DeviceId> =
            bridge.held.keys().filter(|d| !bridge.active.contains_key(*d)).cloned().collect();
        for device in gone_held {
            for (seq, _) in bridge.held.remove(&device).unwrap_or_default() {
                self.store.submit(StoreOp::DeleteQueued(bridge_id.clone(), device.clone(), seq));
            }
        }
        state.cut_off_unpaired_clients(bridge_id, "a revoked device");
    }

    /// Sends every client of `bridge_id` a fresh `relay_status`.
    pub(super) fn broadcast_status(&self, state: &mut State, bridge_id: &BridgeId) {
        let Some(bridge) = state.bridges.get(bridge_id) else { return };
        let conns: Vec<ConnId> = bridge.clients.iter().copied().collect();
        let now = unix_now();
        let mut cut_off = Vec::new();
        // Every connection of a device gets the same tokens: sign them once per device.
        let mut per_device: HashMap<DeviceId, String> = HashMap::new();
        for conn in conns {
            let Some(client) = state.clients.get_mut(&conn).filter(|c| c.remote.is_none()) else { continue };
            let text = per_device
                .entry(client.device_id.clone())
                .or_insert_with(|| {
                    frame_json(&RelayFrame::RelayStatus(self.status(bridge, bridge_id, &client.device_id, now)))
                })
                .clone();
            client.tokens_issued = bridge.resumable.iter().cloned().collect();
            if !client.handle.send_text_or_cut_off(text) {
                cut_off.push(conn);
            }
        }
        for conn in cut_off {
            state.drop_client(conn, None);
        }
    }

    /// The `relay_status` for `device_id`.
    pub(super) fn status(&self, bridge: &Bridge, bridge_id: &BridgeId, device_id: &DeviceId, now: u64) -> RelayStatus {
        let online = bridge.online().is_some();
        RelayStatus {
            protocol_version: PROTOCOL_VERSION,
            bridge_online: online,
            agents: if online { bridge.agents.clone() } else { Vec::new() },
            resume_tokens: bridge
                .resumable
                .iter()
                .map(|s| (s.clone(), self.tokens.issue(bridge_id.as_str(), device_id.as_str(), s.as_str(), now)))
                .collect(),
        }
    }

    /// The bridge connection `conn` ended.
    pub(crate) fn bridge_gone(&self, bridge_id: &BridgeId, conn: ConnId) {
        let mut state = self.lock();
        let Some(bridge) = state.bridges.get_mut(bridge_id) else { return };
        if bridge.online.as_ref().map(|h| h.id) != Some(conn) {
            return; // an older connection, already replaced
        }
        bridge.online = None;
        bridge.last_seen = unix_now();
        self.store.submit(StoreOp::PutBridge(bridge_id.clone(), bridge.stored()));
        if let Some(cluster) = self.cluster() {
            cluster.release(bridge_id, bridge.since, true);
            state.forget_remote_conns(bridge_id);
        }
        tracing::info!(%bridge_id, conn, "bridge disconnected");
        state.fail_pairings(bridge_id);
        self.broadcast_status(&mut state, bridge_id);
    }
}
