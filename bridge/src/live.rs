//! The live sessions' bookkeeping: who follows each, when it was last busy, the cap on
//! how many run at once, and the reaper that lets idle adapters go. A session nobody
//! follows and that runs no turn for `[limits] idle_secs` has its actor and adapter
//! ended with `detach` (it stays resumable: the next message revives it); a session
//! started by a local client (`terminull chat`, `chat -p`) is let go as soon as that
//! client leaves, if no one else follows it and no turn runs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use terminull_protocol::control::SessionState;
use terminull_protocol::ids::SessionId;
use tokio::sync::{Mutex, mpsc};

use crate::session::SessionHandle;

/// Sessions to look at now (their starter left), queued for the reaper.
const REAP_QUEUE: usize = 256;

/// One live session.
#[derive(Debug)]
pub(crate) struct Live {
    /// Its actor.
    pub handle: SessionHandle,
    /// One clone per connection following it (plus this one).
    followers: Arc<()>,
    /// When it was last seen followed, busy, or asked for something.
    last_active: Instant,
}

impl Live {
    pub(crate) fn new(handle: SessionHandle) -> Self {
        Self { handle, followers: Arc::new(()), last_active: Instant::now() }
    }

    /// Marks the session as used now.
    pub(crate) fn touch(&mut self) {
        self.last_active = Instant::now();
    }

    fn followed(&self) -> bool {
        Arc::strong_count(&self.followers) > 1
    }
}

/// The live sessions, by id.
pub(crate) type LiveSessions = Mutex<HashMap<SessionId, Live>>;

/// Held by a connection while it follows a session. Dropped, it may let the reaper
/// look at the session at once (see [`FollowGuard::reap_when_left`]).
#[derive(Debug)]
pub struct FollowGuard {
    _follower: Arc<()>,
    session: SessionId,
    /// The follower started the session with this message.
    started: bool,
    /// Whether to wake the reaper when dropped.
    wake_on_drop: bool,
    reaper: mpsc::Sender<SessionId>,
}

impl FollowGuard {
    /// The connection is a local client: when it started the session, the session is
    /// let go as soon as this follower leaves (if no one else follows it and no turn
    /// runs), as `terminull chat -p` ends.
    pub fn reap_when_left(&mut self) {
        self.wake_on_drop = self.started;
    }
}

impl Drop for FollowGuard {
    fn drop(&mut self) {
        if self.wake_on_drop {
            let _ = self.reaper.try_send(self.session.clone());
        }
    }
}

/// The reaper's side of the live sessions.
#[derive(Debug)]
pub(crate) struct Reaper {
    /// Idle time before a session is let go.
    pub idle: Duration,
    /// The most live sessions.
    pub cap: usize,
    wake: mpsc::Sender<SessionId>,
    woken: std::sync::Mutex<Option<mpsc::Receiver<SessionId>>>,
}

impl Reaper {
    pub(crate) fn new(idle: Duration, cap: usize) -> Self {
        let (wake, woken) = mpsc::channel(REAP_QUEUE);
        Self { idle, cap: cap.max(1), wake, woken: std::sync::Mutex::new(Some(woken)) }
    }

    /// A guard for a new follower of `live`; `started` when its message started the session.
    pub(crate) fn guard(&self, live: &mut Live, started: bool) -> FollowGuard {
        live.touch();
        FollowGuard {
            _follower: live.followers.clone(),
            session: live.handle.id.clone(),
            started,
            wake_on_drop: false,
            reaper: self.wake.clone(),
        }
    }

    /// The queue of sessions to look at now (taken once, by the reaper task).
    pub(crate) fn take_queue(&self) -> Option<mpsc::Receiver<SessionId>> {
        self.woken.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// How often the reaper looks at every session.
    pub(crate) fn tick(&self) -> Duration {
        (self.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30))
    }
}

/// Lets go of the sessions in `only` (or all) that nobody follows, that run no turn and
/// that were idle for `idle` (`Duration::ZERO`: at once). Returns those let go.
pub(crate) async fn reap(sessions: &LiveSessions, idle: Duration, only: Option<&SessionId>) -> Vec<SessionId> {
    let candidates: Vec<(SessionId, SessionHandle, Instant)> = {
        let mut map = sessions.lock().await;
        let now = Instant::now();
        map.iter_mut()
            .filter(|(id, _)| only.is_none_or(|o| o == *id))
            .filter_map(|(id, live)| {
                if live.followed() {
                    live.last_active = now;
                    return None;
                }
                (now.duration_since(live.last_active) >= idle)
                    .then(|| (id.clone(), live.handle.clone(), live.last_active))
            })
            .collect()
    };
    let mut reaped = Vec::new();
    for (id, handle, seen) in candidates {
        let state =
            tokio::time::timeout(Duration::from_secs(2), handle.listing()).await.ok().flatten().map(|l| l.state);
        let idle_now = matches!(state, Some(SessionState::Idle | SessionState::Detached));
        let mut map = sessions.lock().await;
        let Some(live) = map.get_mut(&id) else { continue };
        if !idle_now {
            live.last_active = Instant::now();
            continue;
        }
        if live.followed() || live.last_active != seen {
            continue;
        }
        map.remove(&id);
        drop(map);
        handle.detach().await;
        tracing::info!(session = %id, "idle: its adapter was stopped (the session stays resumable)");
        reaped.push(id);
    }
    reaped
}
