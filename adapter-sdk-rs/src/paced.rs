//! A turn's blocks on their way to stdout, with a burst of appends joined
//! ([`AppendPacer`]): an adapter may push every delta the agent prints, and the first
//! of a burst still goes out at once, while thousands of tiny deltas printed at once
//! cost a few `stream` lines instead of thousands.
//!
//! The pacer sits behind an async lock that every send holds while it writes, so the
//! order of blocks on stdout is the order the adapter emitted them, whether a block
//! goes out from [`PacedStream::send`] or from the timer that ends a burst.

use std::sync::Arc;
use terminull_protocol::adapter::{Stream, StreamParams};
use terminull_protocol::blocks::Block;
use terminull_protocol::pacing::AppendPacer;
use terminull_rpc::{CallError, Peer};
use tokio::sync::Mutex;
use tokio::time::Instant;

/// The pacer of one turn and whether a timer will flush what it holds.
#[derive(Debug, Default)]
struct Pacing {
    pacer: AppendPacer,
    timer_armed: bool,
}

/// Sends a turn's blocks as `stream` notifications, appends paced.
#[derive(Debug, Clone)]
pub(crate) struct PacedStream {
    peer: Peer,
    pacing: Arc<Mutex<Pacing>>,
}

impl PacedStream {
    pub(crate) fn new(peer: Peer) -> Self {
        Self { peer, pacing: Arc::default() }
    }

    /// Sends `block`, or holds it to join it with the appends that follow; what was
    /// held goes out first.
    pub(crate) async fn send(&self, block: Block) -> Result<(), CallError> {
        let mut pacing = self.pacing.lock().await;
        for block in pacing.pacer.admit(block, Instant::now().into_std()) {
            write(&self.peer, block).await?;
        }
        if let Some(at) = pacing.pacer.flush_at()
            && !pacing.timer_armed
        {
            pacing.timer_armed = true;
            let stream = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(Instant::from_std(at)).await;
                let mut pacing = stream.pacing.lock().await;
                pacing.timer_armed = false;
                if let Some(block) = pacing.pacer.flush(Instant::now().into_std()) {
                    // A closed bridge ends the turn through the next send; nothing to do here.
                    let _ = write(&stream.peer, block).await;
                }
            });
        }
        Ok(())
    }

    /// Sends what is held, now (before the turn's end, or anything that must not pass it).
    pub(crate) async fn flush(&self) -> Result<(), CallError> {
        let mut pacing = self.pacing.lock().await;
        match pacing.pacer.flush(Instant::now().into_std()) {
            Some(block) => write(&self.peer, block).await,
            None => Ok(()),
        }
    }
}

async fn write(peer: &Peer, block: Block) -> Result<(), CallError> {
    peer.notify::<Stream>(&StreamParams { block }).await
}
