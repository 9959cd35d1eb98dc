//! The queue between the connection loop and its transport, bounded in bytes as well
//! as in messages: a transport that stops taking messages (a device or relay that
//! does not read) holds at most [`OutboundQueue::max_bytes`] of them, whatever their
//! size. A message counts for its length as JSON; one larger than the whole budget
//! still goes out, alone. A sender waits for room (that is the backpressure that makes
//! a follower fall behind and later resume from history); the room a message takes is
//! given back when the transport is done with it — when it drops the [`Queued`] it
//! took, so messages a transport holds on to (read ahead to join chunks) still count.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::Outbound;

/// A queue's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboundQueue {
    /// Messages queued at most.
    pub max_messages: usize,
    /// Bytes (messages' JSON length) queued at most.
    pub max_bytes: usize,
}

impl OutboundQueue {
    /// A new queue with these bounds: its sending and receiving sides.
    pub fn open<A>(self) -> (OutboundSender<A>, OutboundReceiver<A>) {
        let (tx, rx) = mpsc::channel(self.max_messages.max(1));
        let max_bytes = self.max_bytes.clamp(1, Semaphore::MAX_PERMITS);
        let room = Arc::new(Semaphore::new(max_bytes));
        (OutboundSender { tx, room: room.clone(), max_bytes }, OutboundReceiver { rx, room })
    }
}

/// The receiving side is gone (or was closed): nothing more can be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the connection's outbound queue is closed")]
pub struct QueueClosed;

/// Why [`OutboundSender::try_send`] did not queue a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TrySendError {
    /// No room now.
    #[error("the connection's outbound queue is full")]
    Full,
    /// See [`QueueClosed`].
    #[error(transparent)]
    Closed(#[from] QueueClosed),
}

/// The sending side; cheap to clone.
#[derive(Debug)]
pub struct OutboundSender<A = ()> {
    tx: mpsc::Sender<Queued<A>>,
    room: Arc<Semaphore>,
    max_bytes: usize,
}

impl<A> Clone for OutboundSender<A> {
    fn clone(&self) -> Self {
        Self { tx: self.tx.clone(), room: self.room.clone(), max_bytes: self.max_bytes }
    }
}

impl<A> OutboundSender<A> {
    /// Queues `message` once there is room for it.
    pub async fn send(&self, message: Outbound<A>) -> Result<(), QueueClosed> {
        let cost = self.cost(&message);
        let room = self.room.clone().acquire_many_owned(cost).await.map_err(|_| QueueClosed)?;
        self.tx.send(Queued { message, room: Room(room) }).await.map_err(|_| QueueClosed)
    }

    /// Queues `message` if there is room for it now.
    pub fn try_send(&self, message: Outbound<A>) -> Result<(), TrySendError> {
        let cost = self.cost(&message);
        let room = self.room.clone().try_acquire_many_owned(cost).map_err(|e| match e {
            tokio::sync::TryAcquireError::Closed => TrySendError::Closed(QueueClosed),
            tokio::sync::TryAcquireError::NoPermits => TrySendError::Full,
        })?;
        self.tx.try_send(Queued { message, room: Room(room) }).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => TrySendError::Full,
            mpsc::error::TrySendError::Closed(_) => TrySendError::Closed(QueueClosed),
        })
    }

    fn cost(&self, message: &Outbound<A>) -> u32 {
        let len = match message {
            Outbound::Message(message) => json_len(message),
            Outbound::Attached { reply, .. } => json_len(reply),
        };
        u32::try_from(len.clamp(1, self.max_bytes)).unwrap_or(u32::MAX)
    }
}

/// A message taken from the queue, still holding its room until dropped.
#[derive(Debug)]
pub struct Queued<A = ()> {
    /// The message.
    pub message: Outbound<A>,
    room: Room,
}

/// The room a queued message takes in its queue's byte budget, given back on drop.
#[derive(Debug)]
pub struct Room(OwnedSemaphorePermit);

impl Room {
    /// Takes `other` into this one: for a message that absorbed another's content
    /// (joined chunks), so both are given back when the joined one is done.
    pub fn merge(&mut self, other: Room) {
        self.0.merge(other.0);
    }
}

impl<A> Queued<A> {
    /// The message; its room is given back.
    pub fn into_message(self) -> Outbound<A> {
        self.message
    }

    /// The message and its room, apart.
    pub fn into_parts(self) -> (Outbound<A>, Room) {
        (self.message, self.room)
    }

    /// A message with the room it holds.
    pub fn from_parts(message: Outbound<A>, room: Room) -> Self {
        Self { message, room }
    }

    /// Takes `room` into this message's room ([`Room::merge`]).
    pub fn absorb(&mut self, room: Room) {
        self.room.merge(room);
    }
}

/// The receiving side. Dropping it closes the queue: senders waiting for room get
/// [`QueueClosed`].
#[derive(Debug)]
pub struct OutboundReceiver<A = ()> {
    rx: mpsc::Receiver<Queued<A>>,
    room: Arc<Semaphore>,
}

impl<A> OutboundReceiver<A> {
    /// The next message, its room given back.
    pub async fn recv(&mut self) -> Option<Outbound<A>> {
        self.rx.recv().await.map(Queued::into_message)
    }

    /// The next message with its room, given back when the [`Queued`] is dropped.
    pub async fn recv_queued(&mut self) -> Option<Queued<A>> {
        self.rx.recv().await
    }

    /// The next message with its room if one is queued now.
    pub fn try_recv_queued(&mut self) -> Option<Queued<A>> {
        self.rx.try_recv().ok()
    }
}

impl<A> Drop for OutboundReceiver<A> {
    fn drop(&mut self) {
        self.room.close();
    }
}

/// The length of `value` as JSON, counted without building the text.
pub fn json_len<T: serde::Serialize>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Serializing protocol types cannot fail; a failure counts as small.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use terminull_protocol::blocks::Block;
    use terminull_protocol::control::BridgeMessage;
    use terminull_protocol::ids::SessionId;

    use super::*;

    fn block_of(bytes: usize) -> Outbound {
        let block: Block = serde_json::from_value(serde_json::json!({
            "type": "text", "id": "m", "ts": 1.0, "text": "x".repeat(bytes), "done": true
        }))
        .unwrap();
        Outbound::Message(BridgeMessage::Block { session_id: SessionId("s".into()), block, replay: false })
    }

    #[tokio::test]
    async fn a_sender_waits_once_the_bytes_are_queued_and_goes_on_when_they_are_taken() {
        let (tx, mut rx) = OutboundQueue { max_messages: 1000, max_bytes: 10_000 }.open::<()>();
        for _ in 0..3 {
            tx.try_send(block_of(3_000)).unwrap();
        }
        assert_eq!(tx.try_send(block_of(3_000)), Err(TrySendError::Full), "4 x 3 kB does not fit in 10 kB");
        let waiting = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(block_of(3_000)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "the sender waits for room");
        let held = rx.recv_queued().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a message taken but still held keeps its room");
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_message_larger_than_the_budget_goes_out_alone_and_a_dropped_receiver_frees_waiters() {
        let (tx, mut rx) = OutboundQueue { max_messages: 10, max_bytes: 1_000 }.open::<()>();
        tx.send(block_of(50_000)).await.unwrap();
        assert_eq!(tx.try_send(block_of(10)), Err(TrySendError::Full));
        assert!(rx.recv().await.is_some());
        tx.send(block_of(10)).await.unwrap();
        let waiting = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(block_of(50_000)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "the large one waits for the whole budget");
        drop(rx);
        assert_eq!(tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap(), Err(QueueClosed));
    }

    #[test]
    fn json_len_is_the_length_of_the_json_text() {
        let message = block_of(123);
        let Outbound::Message(message) = message else { unreachable!() };
        assert_eq!(json_len(&message), serde_json::to_vec(&message).unwrap().len());
    }
}
