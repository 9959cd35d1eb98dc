//! Reading frames and connecting to the relay.

use super::*;

/// The next frame or close (with the close code, when the relay sent one), skipping
/// pings; with `guard`, panics after [`HANG`].
pub(crate) async fn next_event<S>(stream: &mut S, guard: bool) -> Event
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    loop {
        let message = if guard {
            tokio::time::timeout(HANG, stream.next()).await.expect("hang guard: nothing arrived")
        } else {
            stream.next().await
        };
        if let Some(event) = event_of(message) {
            return event;
        }
    }
}

/// The next frame; panics on close.
pub(crate) async fn next_frame(ws: &mut Ws) -> RelayFrame {
    match next_event(ws, true).await {
        Event::Frame(frame) => frame,
        Event::Closed(close) => panic!("expected a frame, the connection closed ({close:?})"),
    }
}

/// Reads until the relay closes the connection.
pub(crate) async fn drain<S>(stream: &mut S) -> Drained
where
    S: Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    let mut drained = Drained::default();
    loop {
        match next_event(stream, true).await {
            Event::Frame(RelayFrame::Error(e)) => drained.errors.push((e.code, e.message)),
            Event::Frame(other) => drained.frames.push(other.frame_type()),
            Event::Closed(close) => {
                drained.close = close.map(|(code, _)| code);
                return drained;
            }
        }
    }
}

/// Opens a WebSocket, retrying while the relay refuses the upgrade for being at its
/// connection limit; returns it and how many upgrades were refused.
pub(crate) async fn open_admitted(url: &str) -> (Ws, usize) {
    let mut refused = 0;
    loop {
        match tokio_tungstenite::connect_async(url).await {
            Ok((ws, _)) => return (ws, refused),
            Err(tungstenite::Error::Http(response)) if response.status() == 503 => {
                refused += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("connecting to {url}: {e}"),
        }
    }
}

/// Opens `/v1/bridge` over a socket with a small send buffer, so that what the bridge has
/// written but the relay not yet read stays small (the bridge's writer puts answers ahead
/// of pushed blocks; a large kernel buffer would queue megabytes of blocks before them).
pub(crate) async fn open_bridge_socket(relay: &terminull_relay::RunningRelay) -> Ws {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(64 * 1024).unwrap();
    let stream = socket.connect(relay.addr()).await.unwrap();
    let url = format!("{}/v1/bridge", relay.ws_url());
    let (ws, _) = tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream)).await.expect("websocket opens");
    ws
}

/// Answers the challenge on a bridge connection with `register`.
pub(crate) async fn register_bridge(ws: &mut Ws, bridge: &Identity, devices: Vec<DeviceRecord>) {
    let nonce = read_challenge(ws).await;
    send(ws, &RelayFrame::Register(register(bridge, &nonce, devices, vec![]))).await;
    match next_frame(ws).await {
        RelayFrame::Registered(r) => assert_eq!(r.bridge_id, bridge.public().bridge_id()),
        other => panic!("expected registered, got {other:?}"),
    }
}

/// Reads the challenge nonce.
pub(crate) async fn read_challenge(ws: &mut Ws) -> Vec<u8> {
    match next_frame(ws).await {
        RelayFrame::Challenge(c) => from_b64url("nonce", &c.nonce).unwrap(),
        other => panic!("expected a challenge, got {other:?}"),
    }
}
