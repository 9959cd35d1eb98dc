//! The queue between a peer's reader and whoever handles what the other side sent,
//! bounded in messages and in bytes.
//!
//! A count alone does not bound memory: 1,024 queued notifications of 8 MiB lines are
//! 8 GiB. Each message therefore holds a share of a byte budget (the length of the line
//! it was read from) until its receiver lets go of it; the reader waits for room before
//! queueing the next one, which stops it reading, which stops the other side writing.
//! A receiver that passes a message further along (the bridge hands an adapter's blocks
//! to the session) takes the share with it ([`IncomingQueue::recv_held`]), so the
//! budget covers the whole way to where the message is consumed.

use std::sync::Arc;

use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::Incoming;

/// A received message's share of its peer's incoming byte budget; the room returns
/// when this is dropped.
#[derive(Debug)]
pub struct Held(#[allow(dead_code, reason = "held for its Drop, which returns the room")] Option<OwnedSemaphorePermit>);

impl Held {
    /// A share of nothing (for events that did not come through a peer).
    pub fn none() -> Self {
        Self(None)
    }
}

/// The receiving end: what the other side sent, in order.
#[derive(Debug)]
pub struct IncomingQueue {
    rx: mpsc::Receiver<(Incoming, Held)>,
}

impl IncomingQueue {
    /// The next message, `None` once the stream ended and everything was received; its
    /// bytes are released at once.
    pub async fn recv(&mut self) -> Option<Incoming> {
        self.rx.recv().await.map(|(message, _)| message)
    }

    /// The next message with its share of the byte budget, for a receiver that queues
    /// it further: the reader counts it until the [`Held`] is dropped.
    pub async fn recv_held(&mut self) -> Option<(Incoming, Held)> {
        self.rx.recv().await
    }

    /// The next message if one is queued.
    pub fn try_recv(&mut self) -> Result<Incoming, TryRecvError> {
        self.rx.try_recv().map(|(message, _)| message)
    }
}

/// The reader's end.
#[derive(Debug)]
pub(crate) struct IncomingSender {
    tx: mpsc::Sender<(Incoming, Held)>,
    budget: Arc<Semaphore>,
    /// The whole budget: a single line longer than it takes all of it.
    total: u32,
}

impl IncomingSender {
    /// Queues `message`, read from a line of `bytes`, once there is room for it in both
    /// counts; `Err` when the receiver is gone.
    pub(crate) async fn send(&self, message: Incoming, bytes: usize) -> Result<(), ()> {
        let share = u32::try_from(bytes).unwrap_or(u32::MAX).clamp(1, self.total);
        let permit = self.budget.clone().acquire_many_owned(share).await.map_err(|_| ())?;
        self.tx.send((message, Held(Some(permit)))).await.map_err(|_| ())
    }
}

/// A queue of at most `messages` messages and `bytes` bytes of lines.
pub(crate) fn channel(messages: usize, bytes: usize) -> (IncomingSender, IncomingQueue) {
    let (tx, rx) = mpsc::channel(messages.max(1));
    let total = u32::try_from(bytes).unwrap_or(u32::MAX).max(1);
    (IncomingSender { tx, budget: Arc::new(Semaphore::new(total as usize)), total }, IncomingQueue { rx })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Incoming;
    use terminull_protocol::ndjson::LineError;

    fn message() -> Incoming {
        Incoming::BadLine(LineError::NotJson { line: 1, problem: String::new(), preview: String::new() })
    }

    #[tokio::test]
    async fn the_reader_waits_while_queued_bytes_fill_the_budget_and_resumes_when_they_are_taken() {
        let (tx, mut rx) = channel(100, 1000);
        tx.send(message(), 600).await.unwrap();
        let second = tokio::spawn(async move {
            tx.send(message(), 600).await.unwrap();
            tx
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "a second 600-byte line fits in a 1000-byte budget");
        let (_, held) = rx.recv_held().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "the first line's bytes count until its share is dropped");
        drop(held);
        let _tx = second.await.unwrap();
        assert!(rx.recv().await.is_some());
    }

    #[tokio::test]
    async fn a_line_longer_than_the_budget_takes_all_of_it_rather_than_waiting_forever() {
        let (tx, mut rx) = channel(100, 1000);
        tx.send(message(), 50_000).await.unwrap();
        assert!(rx.recv().await.is_some());
        tx.send(message(), 50_000).await.unwrap();
    }
}
