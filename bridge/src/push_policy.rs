//! Whether a notice becomes a push for one device: the device's event switches
//! (`push_settings`), presence (`presence`: a session shown on a visible screen of any
//! device is not pushed about) and a rate limit per device. Decided here, where the
//! bridge seals pushes, so a switch the user turned off holds even for a relay or a
//! page that would show everything. Bounded: one entry per paired device at most
//! (entries of unknown devices are never made: only a device's own link sets them).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use terminull_protocol::control::PRESENCE_TTL_SECS;
use terminull_protocol::ids::{DeviceId, SessionId};
use terminull_protocol::relay::PushKind;

/// Pushes one device may receive in a burst.
pub const PUSH_BURST: f64 = 10.0;
/// Pushes per minute one device may receive after a burst (one every 6 s).
pub const PUSHES_PER_MINUTE: f64 = 10.0;
/// Sessions one presence report may name (more are ignored).
pub const MAX_VISIBLE_SESSIONS: usize = 64;
/// Devices whose settings, presence and rate state are kept (more: the oldest presence
/// and rate entries are dropped; settings are kept for paired devices only anyway).
pub const MAX_DEVICES: usize = 1024;

/// Why a notice was not pushed to a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// The device turned this kind (or all notifications) off.
    SwitchedOff,
    /// A device shows the session on a visible screen.
    Present,
    /// The device had its share of pushes for now.
    RateLimited,
}

#[derive(Debug, Default)]
struct State {
    /// The kinds each device asked for; absent: every kind.
    kinds: HashMap<DeviceId, Vec<PushKind>>,
    /// Each device's visible sessions and when its report lapses.
    presence: HashMap<DeviceId, (HashSet<SessionId>, Instant)>,
    /// Each device's token bucket: tokens left, when last refilled.
    buckets: HashMap<DeviceId, (f64, Instant)>,
}

/// The push decisions of one bridge. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct PushPolicy(Arc<Mutex<State>>);

impl PushPolicy {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the kinds `device` wants (`push_settings`).
    pub fn set_kinds(&self, device: &DeviceId, kinds: &[PushKind]) {
        let mut state = self.lock();
        if state.kinds.len() >= MAX_DEVICES && !state.kinds.contains_key(device) {
            return;
        }
        state.kinds.insert(device.clone(), kinds.iter().copied().take(8).collect());
    }

    /// Records the sessions `device` shows on a visible screen (`presence`), replacing
    /// its previous report, for [`PRESENCE_TTL_SECS`].
    pub fn set_presence(&self, device: &DeviceId, visible: &[SessionId]) {
        self.set_presence_at(device, visible, Instant::now());
    }

    fn set_presence_at(&self, device: &DeviceId, visible: &[SessionId], now: Instant) {
        let mut state = self.lock();
        state.presence.retain(|_, (_, until)| *until > now);
        if visible.is_empty() {
            state.presence.remove(device);
            return;
        }
        if state.presence.len() >= MAX_DEVICES && !state.presence.contains_key(device) {
            return;
        }
        let sessions = visible.iter().take(MAX_VISIBLE_SESSIONS).cloned().collect();
        state.presence.insert(device.clone(), (sessions, now + Duration::from_secs(PRESENCE_TTL_SECS)));
    }

    /// Forgets `device`'s presence (its link ended).
    pub fn forget_presence(&self, device: &DeviceId) {
        self.lock().presence.remove(device);
    }

    /// Whether a notice of `kind` about `session` is pushed to `device` now; a push
    /// that is takes one of the device's tokens.
    pub fn decide(&self, device: &DeviceId, session: &SessionId, kind: PushKind) -> Result<(), Skipped> {
        self.decide_at(device, session, kind, Instant::now())
    }

    fn decide_at(&self, device: &DeviceId, session: &SessionId, kind: PushKind, now: Instant) -> Result<(), Skipped> {
        let mut state = self.lock();
        if state.kinds.get(device).is_some_and(|kinds| !kinds.contains(&kind)) {
            return Err(Skipped::SwitchedOff);
        }
        if state.presence.values().any(|(sessions, until)| *until > now && sessions.contains(session)) {
            return Err(Skipped::Present);
        }
        if state.buckets.len() >= MAX_DEVICES && !state.buckets.contains_key(device) {
            let full: Vec<DeviceId> = state
                .buckets
                .iter()
                .filter(|(_, (tokens, at))| *tokens + refill(*at, now) >= PUSH_BURST)
                .map(|(d, _)| d.clone())
                .collect();
            for d in full {
                state.buckets.remove(&d);
            }
        }
        let (tokens, at) = state.buckets.entry(device.clone()).or_insert((PUSH_BURST, now));
        *tokens = (*tokens + refill(*at, now)).min(PUSH_BURST);
        *at = now;
        if *tokens < 1.0 {
            return Err(Skipped::RateLimited);
        }
        *tokens -= 1.0;
        Ok(())
    }
}

fn refill(since: Instant, now: Instant) -> f64 {
    now.saturating_duration_since(since).as_secs_f64() * PUSHES_PER_MINUTE / 60.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (DeviceId, DeviceId, SessionId) {
        (DeviceId("dev_a".into()), DeviceId("dev_b".into()), SessionId("s-1".into()))
    }

    #[test]
    fn a_device_gets_every_kind_until_it_chooses_then_only_what_it_chose() {
        let (a, _, s) = ids();
        let p = PushPolicy::default();
        assert_eq!(p.decide(&a, &s, PushKind::TurnFinished), Ok(()));
        p.set_kinds(&a, &[PushKind::PermissionNeeded]);
        assert_eq!(p.decide(&a, &s, PushKind::TurnFinished), Err(Skipped::SwitchedOff));
        assert_eq!(p.decide(&a, &s, PushKind::PermissionNeeded), Ok(()));
        p.set_kinds(&a, &[]);
        assert_eq!(p.decide(&a, &s, PushKind::PermissionNeeded), Err(Skipped::SwitchedOff));
    }

    #[test]
    fn a_session_visible_on_any_device_is_not_pushed_until_the_report_lapses_or_the_link_ends() {
        let (a, b, s) = ids();
        let p = PushPolicy::default();
        let now = Instant::now();
        p.set_presence_at(&b, std::slice::from_ref(&s), now);
        assert_eq!(p.decide_at(&a, &s, PushKind::PermissionNeeded, now), Err(Skipped::Present));
        assert_eq!(p.decide_at(&a, &SessionId("s-2".into()), PushKind::PermissionNeeded, now), Ok(()));
        let later = now + Duration::from_secs(PRESENCE_TTL_SECS + 1);
        assert_eq!(p.decide_at(&a, &s, PushKind::PermissionNeeded, later), Ok(()));
        p.set_presence(&b, std::slice::from_ref(&s));
        p.forget_presence(&b);
        assert_eq!(p.decide(&a, &s, PushKind::PermissionNeeded), Ok(()));
        p.set_presence(&b, std::slice::from_ref(&s));
        p.set_presence(&b, &[]);
        assert_eq!(p.decide(&a, &s, PushKind::PermissionNeeded), Ok(()));
    }

    #[test]
    fn attack_push_flood_is_rate_limited_per_device() {
        let (a, b, s) = ids();
        let p = PushPolicy::default();
        let now = Instant::now();
        let sent = (0..1000).filter(|_| p.decide_at(&a, &s, PushKind::Error, now).is_ok()).count();
        assert_eq!(sent, PUSH_BURST as usize);
        assert_eq!(p.decide_at(&b, &s, PushKind::Error, now), Ok(()), "another device keeps its share");
        assert_eq!(p.decide_at(&a, &s, PushKind::Error, now + Duration::from_secs(7)), Ok(()));
        eprintln!(
            "attack: push flood from one session: 1000 notices -> {sent} pushes to the device (burst {PUSH_BURST}, then {PUSHES_PER_MINUTE}/min)"
        );
    }
}
