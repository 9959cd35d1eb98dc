//! Pushes: a bridge's `push` goes straight to a connected device, or is held for an
//! offline one and sent through the device's Web Push subscription; held pushes expire.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use terminull_protocol::crypto::keys::PublicIdentity;
use terminull_protocol::relay::{Push, PushKind, RelayErrorCode, RelayFrame};
use terminull_protocol::{BridgeId, DeviceId};

use super::{Hub, unix_now};
use crate::conn::{ConnId, frame_json};
use crate::refusal::Refusal;
use crate::store::{QueuedPush, StoreOp, StoredSubscription};
use crate::webpush::{EndpointPolicy, PushError, PushOutcome, Subscription, Urgency};

/// Why a push subscription change was refused (HTTP API).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SubscriptionError {
    /// No such bridge.
    UnknownBridge,
    /// The device is not paired with the bridge, or was revoked.
    UnknownDevice,
    /// A newer registration is stored.
    Stale,
}

/// The `push` urgency for Web Push.
fn urgency(kind: PushKind) -> Urgency {
    match kind {
        PushKind::PermissionNeeded | PushKind::Question => Urgency::High,
        PushKind::TurnFinished | PushKind::Error => Urgency::Normal,
    }
}

impl Hub {
    /// Which push endpoints the relay may contact.
    pub(crate) fn push_policy(&self) -> &EndpointPolicy {
        self.push.sender.policy()
    }

    /// The bridge's `push` for one of its devices.
    pub(crate) fn bridge_push(self: &Arc<Self>, bridge_id: &BridgeId, push: Push) -> Result<(), Refusal> {
        let text = frame_json(&RelayFrame::Push(push.clone()));
        if text.len() > self.config.max_push_frame_bytes {
            return Err(Refusal::new(
                RelayErrorCode::TooLarge,
                format!(
                    "push frame is {} bytes; at most {} are accepted",
                    text.len(),
                    self.config.max_push_frame_bytes
                ),
            ));
        }
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(bridge) = state.bridges.get_mut(bridge_id) else { return Ok(()) };
        if !bridge.active.contains_key(&push.device_id) {
            return Err(Refusal::new(
                RelayErrorCode::UnknownDevice,
                format!("device `{}` is not paired with this bridge", push.device_id),
            ));
        }
        let live: Vec<ConnId> = bridge
            .clients
            .iter()
            .filter(|c| state.clients.get(*c).is_some_and(|client| client.device_id == push.device_id))
            .copied()
            .collect();
        let mut delivered = false;
        for conn in live {
            delivered |= state.deliver(conn, text.clone());
        }
        drop(guard);
        if !delivered {
            self.offer_or_hold(bridge_id, push, text);
        }
        Ok(())
    }

    /// Holds a push for a device with no live connection, and sends it through the
    /// device's Web Push subscription.
    pub(super) fn hold_push(self: &Arc<Self>, bridge_id: &BridgeId, push: Push, text: String) {
        let mut guard = self.lock();
        let state = &mut *guard;
        if state.deliver_to_device(bridge_id, &push.device_id, &text) {
            // It connected here while the other nodes were asked.
            return;
        }
        let Some(bridge) = state.bridges.get_mut(bridge_id) else { return };
        if !bridge.active.contains_key(&push.device_id) {
            return;
        }
        let seq = self.next_push_seq.fetch_add(1, Ordering::Relaxed);
        let entry = QueuedPush { push: push.clone(), queued_at: unix_now() };
        let held = bridge.held.entry(push.device_id.clone()).or_default();
        held.push_back((seq, entry.clone()));
        self.store.submit(StoreOp::PutQueued(bridge_id.clone(), push.device_id.clone(), seq, entry));
        while held.len() > self.config.push_queue_per_device {
            if let Some((old, _)) = held.pop_front() {
                self.store.submit(StoreOp::DeleteQueued(bridge_id.clone(), push.device_id.clone(), old));
            }
        }
        tracing::debug!(%bridge_id, device_id = %push.device_id, seq, "push held for an offline device");
        if let Some(sub) = bridge.subscriptions.get(&push.device_id).cloned() {
            self.spawn_web_push(bridge_id.clone(), push.device_id.clone(), sub.subscription, text, urgency(push.kind));
        }
    }

    fn spawn_web_push(
        self: &Arc<Self>,
        bridge_id: BridgeId,
        device_id: DeviceId,
        subscription: Subscription,
        payload: String,
        urgency: Urgency,
    ) {
        let Ok(permit) = Arc::clone(&self.push.in_flight).try_acquire_owned() else {
            tracing::warn!(%bridge_id, %device_id, "too many Web Push deliveries in flight; the push is only held");
            return;
        };
        let hub = Arc::clone(self);
        self.tasks.spawn(async move {
            let _permit = permit;
            hub.deliver_web_push(&bridge_id, &device_id, &subscription, payload.as_bytes(), urgency).await;
        });
    }

    /// Sends one push through the push service, retrying retryable failures with backoff.
    async fn deliver_web_push(
        &self,
        bridge_id: &BridgeId,
        device_id: &DeviceId,
        subscription: &Subscription,
        payload: &[u8],
        urgency: Urgency,
    ) {
        let ttl = u32::try_from(self.config.push_ttl.as_secs()).unwrap_or(u32::MAX);
        let mut backoff = self.config.push_retry_base;
        let attempts = self.config.push_max_attempts.max(1);
        for attempt in 1..=attempts {
            let sent = tokio::select! {
                sent = self.push.sender.send(subscription, payload, ttl, urgency) => sent,
                _ = self.shutdown.cancelled() => return,
            };
            let wait = match sent {
                Ok(PushOutcome::Delivered { status }) => {
                    tracing::debug!(%bridge_id, %device_id, status, attempt, "web push delivered");
                    return;
                }
                Ok(PushOutcome::Gone { status }) => {
                    tracing::info!(%bridge_id, %device_id, status, "push subscription is gone; deleting it");
                    self.forget_subscription(bridge_id, device_id, &subscription.endpoint);
                    return;
                }
                Ok(PushOutcome::Retryable { status, retry_after }) => {
                    tracing::info!(%bridge_id, %device_id, status, attempt, "push service asks to retry");
                    retry_after.unwrap_or(backoff)
                }
                Err(error) if retryable(&error) => {
                    tracing::info!(%bridge_id, %device_id, %error, attempt, "web push failed; will retry");
                    backoff
                }
                Err(error) => {
                    tracing::warn!(%bridge_id, %device_id, %error, "web push refused; not retrying");
                    return;
                }
            };
            if attempt == attempts {
                tracing::warn!(%bridge_id, %device_id, attempts, "web push not delivered; giving up (the push stays held)");
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait.min(self.config.push_retry_max)) => {}
                _ = self.shutdown.cancelled() => return,
            }
            backoff = backoff.saturating_mul(2).min(self.config.push_retry_max);
        }
    }

    /// Deletes a subscription the push service reported gone, unless it was replaced since.
    fn forget_subscription(&self, bridge_id: &BridgeId, device_id: &DeviceId, endpoint: &str) {
        let mut state = self.lock();
        let Some(bridge) = state.bridges.get_mut(bridge_id) else { return };
        if bridge.subscriptions.get(device_id).is_some_and(|s| s.subscription.endpoint == endpoint) {
            bridge.subscriptions.remove(device_id);
            self.store.submit(StoreOp::DeleteSubscription(bridge_id.clone(), device_id.clone()));
        }
    }

    /// Drops held pushes older than the TTL.
    pub(crate) fn expire_held_pushes(&self) {
        let cutoff = unix_now().saturating_sub(self.config.push_ttl.as_secs());
        let mut state = self.lock();
        for (bridge_id, bridge) in &mut state.bridges {
            for (device_id, held) in &mut bridge.held {
                while held.front().is_some_and(|(_, e)| e.queued_at <= cutoff) {
                    if let Some((seq, _)) = held.pop_front() {
                        self.store.submit(StoreOp::DeleteQueued(bridge_id.clone(), device_id.clone(), seq));
                    }
                }
            }
            bridge.held.retain(|_, held| !held.is_empty());
        }
    }

    // ----- clients -----

    /// The key of an active device, for the push subscription API.
    pub(crate) fn subscription_device_key(
        &self,
        bridge_id: &BridgeId,
        device_id: &DeviceId,
    ) -> Result<PublicIdentity, SubscriptionError> {
        let state = self.lock();
        let bridge = state.bridges.get(bridge_id).ok_or(SubscriptionError::UnknownBridge)?;
        bridge.active.get(device_id).copied().ok_or(SubscriptionError::UnknownDevice)
    }

    /// Stores (`Some`) or deletes (`None`) a device's push subscription, refusing a
    /// request older than the stored registration. Resolves once it is on disk.
    pub(crate) async fn set_subscription(
        &self,
        bridge_id: &BridgeId,
        device_id: &DeviceId,
        subscription: Option<Subscription>,
        ts: u64,
    ) -> Result<(), SubscriptionError> {
        {
            let mut state = self.lock();
            let bridge = state.bridges.get_mut(bridge_id).ok_or(SubscriptionError::UnknownBridge)?;
            if !bridge.active.contains_key(device_id) {
                return Err(SubscriptionError::UnknownDevice);
            }
            if bridge.subscriptions.get(device_id).is_some_and(|s| s.ts > ts) {
                return Err(SubscriptionError::Stale);
            }
            match subscription {
                Some(subscription) => {
                    let stored = StoredSubscription { subscription, ts };
                    bridge.subscriptions.insert(device_id.clone(), stored.clone());
                    self.store.submit(StoreOp::PutSubscription(bridge_id.clone(), device_id.clone(), stored));
                }
                None => {
                    bridge.subscriptions.remove(device_id);
                    self.store.submit(StoreOp::DeleteSubscription(bridge_id.clone(), device_id.clone()));
                }
            }
        }
        if let Err(e) = self.store.flush().await {
            tracing::error!(error = %e, "persisting a push subscription failed");
        }
        Ok(())
    }

    // ----- shutdown -----
}

/// Whether a Web Push failure may succeed on a later attempt.
fn retryable(error: &PushError) -> bool {
    matches!(
        error,
        PushError::Connect { .. }
            | PushError::Tls { .. }
            | PushError::Io { .. }
            | PushError::Timeout { .. }
            | PushError::MalformedResponse { .. }
    )
}

/// How often held pushes are checked for expiry.
pub(crate) fn sweep_interval(ttl: Duration) -> Duration {
    (ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
}
