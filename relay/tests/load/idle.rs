//! The idle devices: connections that only stay open and must still answer at the end.

use super::*;

#[derive(Debug)]
pub(crate) enum Idle {
    /// A `relay_status` arrived; a `link_hello` went out.
    Status,
    /// The bridge's `link_accept` echoing that hello arrived.
    Accepted,
    Wrong(String),
    Closed(Option<(u16, String)>),
}

/// Holds an authenticated connection, reading (and so answering pings); on the bridge's
/// next `relay_status` sends a `link_hello`, and expects the bridge's echo of it. Returns
/// the connection, still open, once the echo arrived.
pub(crate) async fn idle_connection(
    index: usize,
    mut ws: Ws,
    device: Identity,
    events: mpsc::UnboundedSender<(usize, Idle)>,
) -> Option<Ws> {
    let mut nonce = None;
    loop {
        let event = match next_event(&mut ws, false).await {
            Event::Frame(RelayFrame::RelayStatus(s)) if s.bridge_online && nonce.is_none() => {
                let hello = link_hello(&device);
                if let RelayFrame::LinkHello(h) = &hello {
                    nonce = Some(h.client_nonce.clone());
                }
                send(&mut ws, &hello).await;
                Idle::Status
            }
            Event::Frame(RelayFrame::LinkAccept(a))
                if Some(&a.bridge_nonce) == nonce.as_ref() && a.device_id == device.public().device_id() =>
            {
                let _ = events.send((index, Idle::Accepted));
                return Some(ws);
            }
            Event::Frame(other) => Idle::Wrong(format!("{other:?}")),
            Event::Closed(close) => {
                let _ = events.send((index, Idle::Closed(close)));
                return None;
            }
        };
        let _ = events.send((index, event));
    }
}
