//! A connection's outbound queue: items of one or several frames, bounded in frames and
//! in bytes, and the writer's end that frees what it holds when the connection ends.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

/// One item of a connection's outbound queue: a frame, or the frames of one batch
/// (one channel operation and one writer wake-up for up to a batch's worth of blocks).
#[derive(Debug)]
pub(crate) enum Outbound {
    /// One frame's text.
    One(String),
    /// Several frames' texts, in order.
    Many(Vec<String>),
}

impl Outbound {
    /// How many frames it holds.
    pub(super) fn frames(&self) -> usize {
        match self {
            Outbound::One(_) => 1,
            Outbound::Many(texts) => texts.len(),
        }
    }

    /// The memory its texts hold (their allocations, not only their lengths).
    pub(super) fn bytes(&self) -> usize {
        match self {
            Outbound::One(text) => text.capacity(),
            Outbound::Many(texts) => texts.iter().map(String::capacity).sum(),
        }
    }
}

/// How much a connection's outbound queue may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueLimits {
    /// Frames (not queue items).
    pub frames: usize,
    /// Bytes of frame text.
    pub bytes: usize,
}

/// What is queued: frames and bytes not yet taken by the writer.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Queued {
    pub(super) frames: usize,
    pub(super) bytes: usize,
}

/// The bound of a connection's outbound queue, counted in frames (not queue items) and
/// in bytes.
#[derive(Debug)]
pub(super) struct QueueBound {
    /// What is queued now.
    queued: Mutex<Queued>,
    /// Most frames and bytes queued at once; an item is also admitted whole when the
    /// queue is empty, so the bound is the larger of this and the largest item — a
    /// batch holds at most `MAX_BATCH_BLOCKS` frames and `max_message_bytes` of text.
    limits: QueueLimits,
}

impl QueueBound {
    pub(super) fn new(limits: QueueLimits) -> Self {
        Self { queued: Mutex::new(Queued::default()), limits }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        // Two counters, each valid on its own: a panic elsewhere leaves them usable.
        self.queued.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reserves room for `frames` frames of `bytes` bytes, or says the queue is full.
    pub(super) fn reserve(&self, frames: usize, bytes: usize) -> bool {
        let mut q = self.lock();
        let (f, b) = (q.frames.saturating_add(frames), q.bytes.saturating_add(bytes));
        if q.frames == 0 || (f <= self.limits.frames && b <= self.limits.bytes) {
            *q = Queued { frames: f, bytes: b };
            true
        } else {
            false
        }
    }

    /// Gives back room for `frames` frames of `bytes` bytes.
    pub(super) fn release(&self, frames: usize, bytes: usize) {
        let mut q = self.lock();
        q.frames = q.frames.saturating_sub(frames);
        q.bytes = q.bytes.saturating_sub(bytes);
    }

    /// What is queued now.
    pub(super) fn queued(&self) -> Queued {
        *self.lock()
    }
}

/// The writer's end of the outbound queue.
#[derive(Debug)]
pub(super) struct Queue {
    pub(super) rx: mpsc::Receiver<Outbound>,
    pub(super) bound: Arc<QueueBound>,
}

impl Queue {
    /// The next item, waiting for it; `None` when every sender is gone.
    pub(super) async fn recv(&mut self) -> Option<Outbound> {
        let item = self.rx.recv().await?;
        self.bound.release(item.frames(), item.bytes());
        Some(item)
    }

    /// The next item if one is queued.
    pub(super) fn try_recv(&mut self) -> Option<Outbound> {
        let item = self.rx.try_recv().ok()?;
        self.bound.release(item.frames(), item.bytes());
        Some(item)
    }

    /// Closes the queue and frees what it holds: senders get [`super::SendError::Closed`]
    /// from now on. Returns how many frames were dropped.
    pub(super) fn discard(&mut self) -> usize {
        self.rx.close();
        let mut dropped = 0;
        while let Some(item) = self.try_recv() {
            dropped += item.frames();
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(frames: usize, bytes: usize) -> QueueBound {
        QueueBound::new(QueueLimits { frames, bytes })
    }

    #[test]
    fn a_queue_counts_frames_not_items_and_refuses_what_does_not_fit() {
        let q = bound(100, usize::MAX);
        assert!(q.reserve(64, 64), "a batch fits an empty queue");
        assert!(q.reserve(36, 36), "up to the bound");
        assert!(!q.reserve(1, 1), "one frame past the bound is refused");
        q.release(64, 64);
        assert!(!q.reserve(65, 65), "a batch larger than the room left is refused whole");
        assert!(q.reserve(64, 64));
        assert_eq!(q.queued(), Queued { frames: 100, bytes: 100 });
    }

    #[test]
    fn a_batch_larger_than_the_queue_is_admitted_only_into_an_empty_queue() {
        let q = bound(8, 1000);
        assert!(q.reserve(64, 5000), "an empty queue takes a whole batch, whatever its bound");
        assert!(!q.reserve(1, 1), "then nothing more until the writer takes it");
        q.release(64, 5000);
        assert!(q.reserve(1, 1));
    }

    #[test]
    fn a_queue_of_few_big_frames_is_full_at_its_byte_bound() {
        let mib = 1024 * 1024;
        let q = bound(1024, 8 * mib);
        let admitted = (0..1000).take_while(|_| q.reserve(1, mib * 9 / 10)).count();
        assert_eq!(admitted, 8, "8 frames of 0.9 MiB fit 8 MiB; the frame bound (1024) is far");
        q.release(1, mib * 9 / 10);
        assert!(q.reserve(1, mib / 2), "room again once the writer took one");
    }
}
