//! Another relay process changed a bridge's stored state (announced on the bus): the
//! hub takes the stored rows as they are now, without writing them back.

use std::sync::Arc;

use terminull_protocol::BridgeId;
use terminull_protocol::crypto::keys::PublicIdentity;
use terminull_protocol::relay::RelayErrorCode;

use super::checks::check_devices;
use super::{Bridge, Hub};
use crate::conn::{Kill, close_code};
use crate::store::postgres::BridgeRows;

impl Hub {
    /// Replaces what this process knows of `bridge_id` with `rows`: its registration,
    /// device registry (cutting off connections of devices no longer active here too),
    /// push subscriptions and held pushes. A deleted registration closes its devices'
    /// connections. A bridge connected to this process keeps its connection.
    pub(crate) fn apply_remote(self: &Arc<Self>, bridge_id: &BridgeId, rows: BridgeRows) {
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(stored) = rows.bridge else {
            if let Some(bridge) = state.bridges.remove(bridge_id) {
                tracing::info!(%bridge_id, "bridge registration deleted by another relay process");
                for conn in bridge.clients {
                    if let Some(client) = state.clients.remove(&conn) {
                        client.handle.kill(Kill::with_error(
                            RelayErrorCode::UnknownDevice,
                            format!("bridge `{bridge_id}`'s registration at this relay was deleted"),
                            close_code::POLICY,
                        ));
                    }
                }
            }
            return;
        };
        if PublicIdentity::from_wire(&stored.keys).map(|k| k.bridge_id()).as_ref() != Ok(bridge_id) {
            tracing::error!(%bridge_id, "ignoring a stored bridge whose keys do not match its id");
            return;
        }
        let devices = rows.devices.unwrap_or_default();
        let active = match check_devices(&devices, usize::MAX) {
            Ok(active) => active,
            Err(e) => {
                tracing::error!(%bridge_id, error = %e, "ignoring a stored device registry");
                return;
            }
        };
        let bridge = state
            .bridges
            .entry(bridge_id.clone())
            .or_insert_with(|| Bridge::new(stored.keys.clone(), Vec::new(), Vec::new()));
        bridge.keys = stored.keys;
        bridge.agents = stored.agents;
        bridge.resumable = stored.resumable;
        bridge.last_seen = bridge.last_seen.max(stored.last_seen);
        bridge.established |= stored.established;
        bridge.devices = devices;
        bridge.active = active;
        bridge.subscriptions = rows.subscriptions.into_iter().filter(|(d, _)| bridge.active.contains_key(d)).collect();
        bridge.held.clear();
        for (device, seq, entry) in rows.queue {
            if bridge.active.contains_key(&device) {
                bridge.held.entry(device).or_default().push_back((seq, entry));
            }
        }
        state.cut_off_unpaired_clients(bridge_id, "a device revoked on another relay process");
        // A push another node held while its device was connecting here.
        self.deliver_held_to_connected(state, bridge_id);
        // Where the bridge is, if that was announced before this node knew the bridge.
        let early = state.early_presence.remove(bridge_id);
        drop(guard);
        if let Some(presence) = early {
            self.apply_presence(bridge_id, presence);
        }
    }
}
