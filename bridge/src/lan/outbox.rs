//! A LAN device connection's outgoing side: a queue bounded in bytes and in frames,
//! and a writer task with its own deadline, so a device that stops reading can
//! neither grow the bridge's memory nor stall the connection's read loop (its pings,
//! its idle check). The queue gives backpressure to the link (the link then falls
//! behind and later resumes from the session's history); the writer ends the
//! connection when a write makes no progress within the write deadline.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::Message;
use futures::SinkExt;
use futures::stream::SplitSink;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Frames written per flush: frames already queued go out in one write (a flush per
/// frame cost a syscall each while the link streams).
const WRITE_BATCH: usize = 64;

/// A message with the queue room it holds until written.
struct Queued {
    message: Message,
    _bytes: OwnedSemaphorePermit,
    _frame: OwnedSemaphorePermit,
}

/// Why the writer stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WriterEnd {
    /// Every sender is gone and the queue was written (or the socket closed).
    Closed,
    /// A write made no progress within the write deadline: a slow consumer.
    Stalled,
}

/// The queue's sending side; cheap to clone.
#[derive(Clone)]
pub(super) struct Outbox {
    tx: mpsc::UnboundedSender<Queued>,
    bytes: Arc<Semaphore>,
    frames: Arc<Semaphore>,
    max_bytes: usize,
}

/// The size a message counts for in the queue (at least 1, at most the whole budget
/// so that one message larger than the budget can still go out alone).
fn cost(message: &Message, max_bytes: usize) -> u32 {
    let len = match message {
        Message::Text(t) => t.len(),
        Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => b.len(),
        Message::Close(_) => 0,
    };
    u32::try_from(len.clamp(1, max_bytes.max(1))).unwrap_or(u32::MAX)
}

impl Outbox {
    /// Starts the writer over `sink`: at most `max_bytes` and `max_frames` queued, each
    /// write (or flush) given `write_timeout`.
    pub(super) fn start<S: super::DeviceSocket>(
        sink: SplitSink<S, Message>,
        max_bytes: usize,
        max_frames: usize,
        write_timeout: Duration,
    ) -> (Self, tokio::task::JoinHandle<WriterEnd>) {
        // Semaphores count in u32 and cap at `Semaphore::MAX_PERMITS`.
        let max_bytes = max_bytes.clamp(1, u32::MAX as usize >> 4);
        let max_frames = max_frames.clamp(1, u32::MAX as usize >> 4);
        let (tx, rx) = mpsc::unbounded_channel();
        let outbox = Self {
            tx,
            bytes: Arc::new(Semaphore::new(max_bytes)),
            frames: Arc::new(Semaphore::new(max_frames)),
            max_bytes,
        };
        (outbox, tokio::spawn(write(sink, rx, write_timeout)))
    }

    /// Queues `message`, waiting for room; `false` once the writer is gone.
    pub(super) async fn push(&self, message: Message) -> bool {
        let n = cost(&message, self.max_bytes);
        let Ok(frame) = self.frames.clone().acquire_owned().await else { return false };
        let Ok(bytes) = self.bytes.clone().acquire_many_owned(n).await else { return false };
        self.tx.send(Queued { message, _bytes: bytes, _frame: frame }).is_ok()
    }

    /// Queues `message` when there is room now; `false` when full or gone.
    pub(super) fn try_push(&self, message: Message) -> bool {
        let n = cost(&message, self.max_bytes);
        let Ok(frame) = self.frames.clone().try_acquire_owned() else { return false };
        let Ok(bytes) = self.bytes.clone().try_acquire_many_owned(n) else { return false };
        self.tx.send(Queued { message, _bytes: bytes, _frame: frame }).is_ok()
    }
}

async fn write<S: super::DeviceSocket>(
    mut sink: SplitSink<S, Message>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    deadline: Duration,
) -> WriterEnd {
    loop {
        let Some(first) = rx.recv().await else {
            let _ = tokio::time::timeout(deadline, sink.close()).await;
            return WriterEnd::Closed;
        };
        let mut next = Some(first);
        let mut written = 0;
        while let Some(queued) = next.take() {
            // The queue room is given back once the message is in the socket's buffer.
            match tokio::time::timeout(deadline, sink.feed(queued.message)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return WriterEnd::Closed,
                Err(_) => return WriterEnd::Stalled,
            }
            written += 1;
            if written < WRITE_BATCH {
                next = rx.try_recv().ok();
            }
        }
        match tokio::time::timeout(deadline, sink.flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return WriterEnd::Closed,
            Err(_) => return WriterEnd::Stalled,
        }
    }
}
