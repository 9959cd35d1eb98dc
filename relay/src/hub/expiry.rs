//! Registrations expire unless renewed: anyone can register a bridge with a key they made,
//! so a registration whose bridge stopped coming back is deleted, with its device registry,
//! push subscriptions and held pushes.
//!
//! A bridge renews its registration every time it connects (and while it stays online).
//! A registration is *established* once its bridge connects a second time or one of its
//! devices authenticates; an established registration lasts `registration_ttl` (30 days)
//! after its bridge was last connected, one that is not lasts
//! `unestablished_registration_ttl` (1 h).

use std::sync::Arc;
use std::time::Duration;

use terminull_protocol::BridgeId;
use terminull_protocol::relay::RelayErrorCode;

use super::{Hub, unix_now};
use crate::conn::{Kill, close_code};
use crate::store::StoreOp;

/// How stale the stored `last_seen` of a connected bridge may get, at most.
const ONLINE_REFRESH_SECS: u64 = 60 * 60;

impl Hub {
    /// Deletes the registrations that expired at `now` (Unix seconds); returns how many.
    /// Online bridges never expire (their `last_seen` is refreshed, stored, every hour);
    /// device connections of an expired bridge are closed.
    pub(crate) fn expire_registrations(&self, now: u64) -> usize {
        let long = self.config.registration_ttl.as_secs();
        let short = self.config.unestablished_registration_ttl.as_secs();
        // Within a quarter of the shorter lifetime too: relay processes sharing a store
        // see a bridge connected to another process only through these refreshes (the
        // bus announces them), and must not expire it meanwhile.
        let refresh = ONLINE_REFRESH_SECS.min(long / 4).min(short / 4).max(1);
        let mut state = self.lock();
        let mut expired: Vec<BridgeId> = Vec::new();
        for (id, bridge) in &mut state.bridges {
            if bridge.online().is_some() {
                // Online bridges never expire; their stored `last_seen` is kept within an
                // hour of now so that a crash does not age them.
                // The node holding it refreshes it, not every node.
                if bridge.holder.is_none() && now.saturating_sub(bridge.last_seen) >= refresh {
                    bridge.last_seen = now;
                    self.store.submit(StoreOp::PutBridge(id.clone(), bridge.stored()));
                }
                continue;
            }
            let ttl = if bridge.established { long } else { short };
            // Whole seconds: strictly after, so that at least `ttl` has passed.
            if bridge.last_seen.saturating_add(ttl) < now {
                expired.push(id.clone());
            }
        }
        for id in &expired {
            let Some(bridge) = state.bridges.remove(id) else { continue };
            for conn in bridge.clients {
                if let Some(client) = state.clients.remove(&conn) {
                    client.handle.kill(Kill::with_error(
                        RelayErrorCode::UnknownDevice,
                        format!("bridge `{id}`'s registration at this relay expired; the bridge registers again when it connects"),
                        close_code::POLICY,
                    ));
                }
            }
            self.store.submit(StoreOp::DeleteBridge(id.clone()));
            tracing::info!(
                bridge_id = %id,
                established = bridge.established,
                offline_secs = now.saturating_sub(bridge.last_seen),
                "bridge registration expired"
            );
        }
        expired.len()
    }
}

/// How often registrations are checked: a quarter of the shorter lifetime, within 1 s..60 s.
fn sweep_interval(hub: &Hub) -> Duration {
    let shortest = hub.config.unestablished_registration_ttl.min(hub.config.registration_ttl);
    (shortest / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// Deletes expired registrations now and then, until the relay stops.
pub(crate) async fn sweep_registrations(hub: Arc<Hub>) {
    let mut tick = tokio::time::interval(sweep_interval(&hub));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                hub.expire_registrations(unix_now());
            }
            _ = hub.shutdown.cancelled() => return,
        }
    }
}
