//! The queues behind links that cross nodes: on the bridge's node, a device connection
//! of another node is a handle whose queue drains onto `…<bridge_id>.down.<node>`; on a
//! device's node, a bridge held by another node is a handle whose queue drains onto
//! `…<bridge_id>.up`. Both are bounded like a socket's queue (frames and bytes) and
//! drained by one task each, in order.

use std::sync::Arc;

use terminull_protocol::BridgeId;
use terminull_protocol::relay::RelayErrorCode;

use super::{Cluster, down_messages, encode_kill, from_node, subject};
use crate::conn::{ConnHandle, ConnId, Detached, Kill, Outbound, QueueLimits, close_code, detached};
use crate::hub::Hub;

/// Most queue items one wake-up of a drainer takes.
const DRAIN_ITEMS: usize = 64;

/// Device connection `remote_conn` of `node`, for the bridge's node: frames queued on
/// the handle reach that connection in order; killing the handle ends it (with the
/// kill's error frame and close).
pub(crate) fn down_proxy(
    hub: &Arc<Hub>,
    cluster: &Cluster,
    bridge_id: &BridgeId,
    node: &str,
    remote_conn: ConnId,
) -> ConnHandle {
    let limits = QueueLimits { frames: hub.config.client_queue_frames, bytes: hub.config.client_queue_bytes };
    let Detached { handle, mut queue, mut kill } = detached(hub.next_conn_id(), limits);
    let subject = subject(bridge_id, &format!("down.{node}"));
    let client = cluster.client().clone();
    let stop = hub.shutdown.clone();
    hub.tasks.spawn(async move {
        let failed = loop {
            let first = tokio::select! {
                biased;
                changed = kill.changed() => match changed {
                    Ok(()) => break None,
                    // The hub forgot the connection (dropped its handle): nothing to end.
                    Err(_) => return,
                },
                _ = stop.cancelled() => return,
                item = queue.recv() => match item {
                    Some(item) => item,
                    // The hub forgot the connection (its node said it closed).
                    None => return,
                },
            };
            let mut items = vec![first];
            while items.len() < DRAIN_ITEMS {
                let Some(item) = queue.try_recv() else { break };
                items.push(item);
            }
            let mut error = None;
            for body in down_messages(remote_conn, items) {
                if let Err(e) = client.publish(subject.clone(), body).await {
                    error = Some(e.to_string());
                    break;
                }
            }
            if let Some(error) = error {
                break Some(error);
            }
        };
        let kill = match failed {
            Some(error) => {
                tracing::warn!(subject = %subject, error = %error, "forwarding to a device on another node failed; ending its link");
                Kill::with_error(
                    RelayErrorCode::SlowConsumer,
                    format!("forwarding between relay nodes failed ({error}); reconnect and resume"),
                    close_code::TRY_AGAIN_LATER,
                )
            }
            None => kill.borrow().clone().unwrap_or_else(|| Kill::close(close_code::NORMAL, "")),
        };
        if kill.flush_queue {
            let mut items = Vec::new();
            while let Some(item) = queue.try_recv() {
                items.push(item);
            }
            for body in down_messages(remote_conn, items) {
                if client.publish(subject.clone(), body).await.is_err() {
                    break;
                }
            }
        }
        queue.discard();
        if let Err(e) = client.publish(subject.clone(), encode_kill(remote_conn, &kill)).await {
            tracing::warn!(subject = %subject, error = %e, "ending a link on another node failed");
        }
    });
    handle
}

/// Bridge `bridge_id` held by another node, for a device's node: frames queued on the
/// handle reach the bridge's node in order (it knows them by this node's id and this
/// node's connection numbers).
pub(crate) fn up_proxy(hub: &Arc<Hub>, cluster: &Cluster, bridge_id: &BridgeId) -> ConnHandle {
    let limits = QueueLimits { frames: hub.config.bridge_queue_frames, bytes: hub.config.bridge_queue_bytes };
    let Detached { handle, mut queue, mut kill } = detached(hub.next_conn_id(), limits);
    let subject = subject(bridge_id, "up");
    let client = cluster.client().clone();
    let node = cluster.node.clone();
    let stop = hub.shutdown.clone();
    hub.tasks.spawn(async move {
        loop {
            let item = tokio::select! {
                biased;
                _ = kill.changed() => break,
                _ = stop.cancelled() => break,
                item = queue.recv() => match item {
                    Some(item) => item,
                    None => break,
                },
            };
            let texts = match item {
                Outbound::One(text) => vec![text],
                Outbound::Many(texts) => texts,
            };
            for text in texts {
                if let Err(e) = client.publish(subject.clone(), from_node(&node, &text)).await {
                    tracing::warn!(subject = %subject, error = %e, "forwarding to a bridge on another node failed");
                }
            }
        }
        queue.discard();
    });
    handle
}
