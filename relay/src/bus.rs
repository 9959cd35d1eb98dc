//! The bus between relay processes (`--bus nats://…`, with a shared Postgres store).
//!
//! Subjects, all under `terminull.v1.`, one family per bridge:
//!
//! - `terminull.v1.bridge.<bridge_id>.changed`: a process committed a change to that
//!   bridge's stored state (registration, device registry, push subscriptions, held
//!   pushes). Body: JSON `{"node": "<the announcing process's id>"}`. Every other
//!   process reloads that bridge's rows from the shared store and applies them, so a
//!   device registered through one process authenticates on any other, and a device
//!   revoked through one process is cut off on every other.
//!
//! Why per bridge: everything the relay keeps is per bridge (docs/relay-operations.md,
//! "Scaling past one machine"), so a bridge id in the subject lets a process subscribe
//! to exactly what it needs (`terminull.v1.bridge.*.changed` for invalidation; the
//! forwarding subjects of `crate::cluster` are subscribed only for the bridges a
//! process holds), NATS keeps the order of one publisher's messages on one subject, and
//! nothing needs a router that parses frames. Frames cross it in `crate::cluster`.
//!
//! The announcements are best effort: NATS core drops messages while a process is
//! disconnected (async-nats reconnects by itself with backoff); a process that missed
//! one has that bridge's old state until its next change.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use terminull_protocol::BridgeId;
use tokio_postgres::Client;

use crate::error::RelayError;
use crate::hub::Hub;
use crate::store::postgres;

/// Subjects' common prefix.
const PREFIX: &str = "terminull.v1.bridge";
/// Reloads of one announcement's bridge waiting at most (beyond: dropped, logged).
const MAX_RELOADS: usize = 4096;

/// The body of a `changed` announcement.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Changed {
    /// The announcing process (a random id per start): a process ignores its own.
    node: String,
}

/// The subject announcing changes to `bridge_id`.
fn changed_subject(bridge_id: &BridgeId) -> String {
    format!("{PREFIX}.{bridge_id}.changed")
}

/// The bridge id of a `changed` subject, if it is one.
fn bridge_of(subject: &str) -> Option<BridgeId> {
    let id = subject.strip_prefix(PREFIX)?.strip_prefix('.')?.strip_suffix(".changed")?;
    (!id.is_empty() && !id.contains('.')).then(|| BridgeId(id.to_owned()))
}

/// Connects to NATS at `url` and starts announcing this process's committed changes
/// and applying the others'. `store_url` is the shared Postgres database.
pub(crate) async fn start(hub: Arc<Hub>, url: &str, store_url: &str) -> Result<(), RelayError> {
    let bus_err = |what: &str, e: &dyn std::fmt::Display| RelayError::Bus(format!("{what} {url}: {e}"));
    let Some(changes) = hub.store().changes() else {
        return Err(RelayError::Bus("the bus needs a shared store (--store postgres://…)".into()));
    };
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .subscription_capacity(crate::cluster::SUBSCRIPTION_CAPACITY)
        .event_callback(|event| async move { tracing::info!(%event, "bus connection event") })
        .connect(url)
        .await
        .map_err(|e| bus_err("connecting to NATS at", &e))?;
    let mut subscription =
        client.subscribe(format!("{PREFIX}.*.changed")).await.map_err(|e| bus_err("subscribing on", &e))?;
    let node = terminull_protocol::crypto::b64url(&terminull_protocol::crypto::random_bytes::<9>());
    let timeout = hub.config.store_timeout;
    let reader = postgres::reader(store_url, timeout).await?;
    crate::cluster::start(&hub, client.clone(), node.clone())
        .await
        .map_err(|e| bus_err("joining the relay nodes on", &e))?;
    tracing::info!(%url, %node, "relay bus connected");

    // Announce: after each commit, one message per changed bridge.
    let announce_hub = Arc::clone(&hub);
    let body = serde_json::to_vec(&Changed { node: node.clone() }).unwrap_or_default();
    let publisher = client.clone();
    hub.tasks.spawn(async move {
        loop {
            let ids = tokio::select! {
                ids = changes.next() => ids,
                _ = announce_hub.shutdown.cancelled() => return,
            };
            for id in ids {
                if let Err(e) = publisher.publish(changed_subject(&id), body.clone().into()).await {
                    tracing::warn!(bridge_id = %id, error = %e, "announcing a bridge change on the bus failed");
                }
            }
        }
    });

    // Apply: reload each bridge another process changed, one at a time, in order.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<BridgeId>(MAX_RELOADS);
    let apply_hub = Arc::clone(&hub);
    let store_url = store_url.to_owned();
    hub.tasks.spawn(async move {
        let mut reader = Some(reader);
        loop {
            let id = tokio::select! {
                id = rx.recv() => id,
                _ = apply_hub.shutdown.cancelled() => return,
            };
            let Some(id) = id else { return };
            reload(&apply_hub, &mut reader, &store_url, &id, timeout).await;
        }
    });
    let listen_hub = Arc::clone(&hub);
    hub.tasks.spawn(async move {
        loop {
            let message = tokio::select! {
                m = subscription.next() => m,
                _ = listen_hub.shutdown.cancelled() => return,
            };
            let Some(message) = message else { return };
            let Some(id) = bridge_of(&message.subject) else { continue };
            match serde_json::from_slice::<Changed>(&message.payload) {
                Ok(changed) if changed.node == node => {}
                Ok(_) => {
                    if tx.try_send(id).is_err() {
                        tracing::warn!(subject = %message.subject, "too many bridge reloads waiting; one dropped");
                    }
                }
                Err(e) => tracing::warn!(subject = %message.subject, error = %e, "ignoring an unreadable bus message"),
            }
        }
    });
    Ok(())
}

/// Reloads `id` from the store into the hub, reconnecting the reader once if needed.
async fn reload(hub: &Arc<Hub>, reader: &mut Option<Client>, url: &str, id: &BridgeId, timeout: Duration) {
    for _attempt in 0..2 {
        if reader.is_none() {
            *reader = postgres::reader(url, timeout).await.inspect_err(|e| tracing::warn!(error = %e)).ok();
        }
        let Some(client) = reader.as_ref() else { return };
        match tokio::time::timeout(timeout, postgres::load_bridge(client, id)).await {
            Ok(Ok(rows)) => {
                hub.apply_remote(id, rows);
                return;
            }
            Ok(Err(e)) => tracing::warn!(bridge_id = %id, error = %e, "reloading a bridge changed elsewhere failed"),
            Err(_) => tracing::warn!(bridge_id = %id, "reloading a bridge changed elsewhere timed out"),
        }
        *reader = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_well_formed_changed_subject_names_a_bridge() {
        let id = BridgeId("brg_abc".into());
        assert_eq!(bridge_of(&changed_subject(&id)), Some(id));
        for bad in ["terminull.v1.bridge..changed", "terminull.v1.bridge.a.b.changed", "terminull.v1.other.a.changed"] {
            assert_eq!(bridge_of(bad), None, "{bad}");
        }
    }
}
