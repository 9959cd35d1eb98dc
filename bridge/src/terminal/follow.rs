//! Sends one followed terminal's output to one connection: the scrollback after the
//! attach's `since_seq` (marked `replay`), then live output, then `terminal_exit`.
//! Consecutive chunks waiting together are joined (up to [`MAX_OUTPUT_CHUNK`] bytes)
//! so a burst goes out as few large messages; the joined message carries the `seq` of
//! its last chunk. A follower that fell behind the live feed resumes from the ring.

use bytes::{Bytes, BytesMut};
use terminull_protocol::control::BridgeMessage;
use terminull_protocol::crypto::b64;
use terminull_protocol::terminal::{MAX_OUTPUT_CHUNK, TerminalId, TerminalOutput};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::term::{Attachment, Event, Snapshot};

/// A connection's follow of one terminal, from attach to the end.
#[derive(Debug)]
pub struct Following {
    pub(crate) attachment: Attachment,
    pub(crate) snapshot: Snapshot,
}

impl Following {
    /// The terminal followed.
    pub fn terminal_id(&self) -> &TerminalId {
        &self.attachment.0.id
    }

    /// Sends the terminal's output through `send` until the terminal ends (after its
    /// `terminal_exit`) or `send` fails (the connection is gone).
    pub async fn run<F, Fut>(self, mut send: F)
    where
        F: FnMut(BridgeMessage) -> Fut,
        Fut: std::future::Future<Output = Result<(), ()>>,
    {
        let Following { attachment, snapshot } = self;
        let terminal = attachment.0.clone();
        let id = terminal.id.clone();
        let Snapshot { chunks, mut live, ended } = snapshot;
        let mut covered = 0u64;
        if send_chunks(&id, chunks, true, &mut covered, &mut send).await.is_err() {
            return;
        }
        if let Some(exit) = ended {
            let _ = send(BridgeMessage::TerminalExit(exit)).await;
            return;
        }
        let mut pending: Option<Event> = None;
        loop {
            let event = match pending.take() {
                Some(event) => event,
                None => match live.recv().await {
                    Ok(event) => event,
                    Err(RecvError::Lagged(missed)) => {
                        tracing::debug!(terminal = %id, "a follower fell {missed} chunks behind; resuming from the scrollback");
                        let again = terminal.snapshot(covered);
                        live = again.live;
                        if send_chunks(&id, again.chunks, false, &mut covered, &mut send).await.is_err() {
                            return;
                        }
                        if let Some(exit) = again.ended {
                            let _ = send(BridgeMessage::TerminalExit(exit)).await;
                            return;
                        }
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                },
            };
            match event {
                Event::Exit(exit) => {
                    let _ = send(BridgeMessage::TerminalExit(exit)).await;
                    return;
                }
                Event::Output(seq, bytes) => {
                    let mut chunks = vec![(seq, bytes)];
                    let mut size = chunks[0].1.len();
                    // Join what is already waiting, up to one message's worth.
                    while size < MAX_OUTPUT_CHUNK {
                        match live.try_recv() {
                            Ok(Event::Output(seq, bytes)) => {
                                size += bytes.len();
                                chunks.push((seq, bytes));
                            }
                            Ok(exit @ Event::Exit(_)) => {
                                pending = Some(exit);
                                break;
                            }
                            Err(TryRecvError::Lagged(_)) => {
                                // Pick the rest up from the ring on the next turn.
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    if send_chunks(&id, chunks, false, &mut covered, &mut send).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// Sends `chunks` (skipping any at or below `covered`), joined into messages of at most
/// [`MAX_OUTPUT_CHUNK`] bytes; raises `covered`.
async fn send_chunks<F, Fut>(
    id: &TerminalId,
    chunks: Vec<(u64, Bytes)>,
    replay: bool,
    covered: &mut u64,
    send: &mut F,
) -> Result<(), ()>
where
    F: FnMut(BridgeMessage) -> Fut,
    Fut: std::future::Future<Output = Result<(), ()>>,
{
    let mut joined = BytesMut::new();
    let mut last = 0u64;
    for (seq, bytes) in chunks {
        if seq <= *covered {
            continue;
        }
        if !joined.is_empty() && joined.len() + bytes.len() > MAX_OUTPUT_CHUNK {
            send(output(id, last, &joined, replay)).await?;
            joined.clear();
        }
        joined.extend_from_slice(&bytes);
        last = seq;
        *covered = seq;
    }
    if !joined.is_empty() {
        send(output(id, last, &joined, replay)).await?;
    }
    Ok(())
}

fn output(id: &TerminalId, seq: u64, bytes: &[u8], replay: bool) -> BridgeMessage {
    BridgeMessage::TerminalOutput(TerminalOutput { terminal_id: id.clone(), seq, data: b64(bytes), replay })
}
