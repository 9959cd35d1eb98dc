//! A relay that misbehaves on purpose, for the hostile-relay tests. It routes like a
//! relay (a bridge's `batch` is forwarded to the device as one `block` frame per
//! block, without checking the batch's signature: it is hostile), records every
//! frame, and lets a test hold, tamper with, replay, reorder, drop, splice and inject
//! frames in both directions.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use terminull_protocol::crypto::b64url;
use terminull_protocol::ids::SessionId;
use terminull_protocol::relay::{
    BlockBatch, BlockEnvelope, Challenge, ConnClosed, PROTOCOL_VERSION, Registered, RelayError, RelayErrorCode,
    RelayFrame, RelayStatus,
};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

type Shared<T> = Arc<Mutex<T>>;

/// The misbehaving relay.
#[derive(Clone)]
pub struct HostileRelay {
    /// `ws://127.0.0.1:port`.
    pub url: String,
    /// Frames injected toward the bridge (as if from a device).
    pub to_bridge: mpsc::UnboundedSender<RelayFrame>,
    clients: Shared<HashMap<u64, mpsc::UnboundedSender<RelayFrame>>>,
    /// Every frame the bridge sent, as it came.
    pub from_bridge: Shared<Vec<RelayFrame>>,
    /// Every frame devices sent (their `conn` filled in).
    pub from_clients: Shared<Vec<RelayFrame>>,
    /// While `Some`, batches and replies from the bridge are held here instead of routed.
    hold: Shared<Option<Vec<RelayFrame>>>,
    /// The resume tokens devices are given (`relay_status`), so a control naming a
    /// session goes at once.
    tokens: Shared<BTreeMap<SessionId, String>>,
    /// The protocol version its `registered` and its `relay_status` name (this build's
    /// unless a test says otherwise).
    pub versions: Shared<(u32, u32)>,
    /// While true, it reads nothing more from the bridge (a relay that stopped reading);
    /// it still writes to it.
    pub stall_bridge: Arc<std::sync::atomic::AtomicBool>,
}

/// A frame as a device receives it: no `conn`; a batch becomes its blocks.
pub fn for_device(frame: RelayFrame) -> Vec<RelayFrame> {
    match frame {
        RelayFrame::Batch(batch) => batch.blocks.into_iter().map(RelayFrame::Block).collect(),
        mut other => {
            match &mut other {
                RelayFrame::ReplayDone(f) => f.conn = None,
                RelayFrame::Reply(f) => f.conn = None,
                RelayFrame::LinkAccept(f) => f.conn = None,
                _ => {}
            }
            vec![other]
        }
    }
}

impl HostileRelay {
    /// Listens on a loopback port.
    // The handshake callback's error type is tungstenite's, large by its design.
    #[allow(clippy::result_large_err)]
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let (to_bridge, bridge_rx) = mpsc::unbounded_channel();
        let relay = HostileRelay {
            url,
            to_bridge,
            clients: Arc::default(),
            from_bridge: Arc::default(),
            from_clients: Arc::default(),
            hold: Arc::default(),
            tokens: Arc::default(),
            versions: Arc::new(Mutex::new((PROTOCOL_VERSION, PROTOCOL_VERSION))),
            stall_bridge: Arc::default(),
        };
        let bridge_rx = Arc::new(tokio::sync::Mutex::new(bridge_rx));
        let r = relay.clone();
        tokio::spawn(async move {
            let mut next_conn = 0u64;
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let path = Arc::new(Mutex::new(String::new()));
                let seen = path.clone();
                let callback = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request, resp| {
                    *seen.lock().unwrap() = req.uri().path().to_owned();
                    Ok(resp)
                };
                let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else { continue };
                let path = path.lock().unwrap().clone();
                next_conn += 1;
                if path == "/v1/bridge" {
                    tokio::spawn(r.clone().serve_bridge(ws, bridge_rx.clone()));
                } else {
                    tokio::spawn(r.clone().serve_client(ws, next_conn));
                }
            }
        });
        relay
    }

    async fn serve_bridge(
        self,
        mut ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
        injected: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<RelayFrame>>>,
    ) {
        let send = |f: &RelayFrame| Message::text(serde_json::to_string(f).unwrap());
        ws.send(send(&RelayFrame::Challenge(Challenge { nonce: b64url(&[7; 32]) }))).await.unwrap();
        let Some(Ok(Message::Text(register))) = ws.next().await else { return };
        let register: RelayFrame = serde_json::from_str(&register).unwrap();
        self.from_bridge.lock().unwrap().push(register.clone());
        let RelayFrame::Register(register) = register else { panic!("not register") };
        let protocol_version = self.versions.lock().unwrap().0;
        let registered = Registered { bridge_id: register.bridge_id, protocol_version };
        ws.send(send(&RelayFrame::Registered(registered))).await.unwrap();
        let mut injected = injected.lock().await;
        loop {
            let stalled = self.stall_bridge.load(std::sync::atomic::Ordering::SeqCst);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(50)), if stalled => {}
                frame = ws.next(), if !stalled => {
                    let Some(Ok(Message::Text(text))) = frame else { return };
                    let frame: RelayFrame = serde_json::from_str(&text).unwrap();
                    self.from_bridge.lock().unwrap().push(frame.clone());
                    let Some(conn) = frame.conn() else { continue };
                    {
                        let mut hold = self.hold.lock().unwrap();
                        if let Some(held) = hold.as_mut()
                            && matches!(frame, RelayFrame::Batch(_) | RelayFrame::Reply(_))
                        {
                            held.push(frame);
                            continue;
                        }
                    }
                    let frame = match frame {
                        RelayFrame::CloseConn(c) => RelayFrame::Error(RelayError {
                            code: RelayErrorCode::UnknownDevice,
                            message: c.reason,
                            session_id: None,
                        }),
                        other => other,
                    };
                    self.to_client(conn, frame);
                }
                Some(frame) = injected.recv() => {
                    if ws.send(send(&frame)).await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    fn status(&self) -> RelayStatus {
        RelayStatus {
            protocol_version: self.versions.lock().unwrap().1,
            bridge_online: true,
            agents: vec![],
            resume_tokens: self.tokens.lock().unwrap().clone(),
        }
    }

    async fn serve_client(self, mut ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, conn: u64) {
        let send = |f: &RelayFrame| Message::text(serde_json::to_string(f).unwrap());
        ws.send(send(&RelayFrame::Challenge(Challenge { nonce: b64url(&[8; 32]) }))).await.unwrap();
        let Some(Ok(Message::Text(_auth))) = ws.next().await else { return };
        ws.send(send(&RelayFrame::RelayStatus(self.status()))).await.unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.clients.lock().unwrap().insert(conn, tx);
        loop {
            tokio::select! {
                frame = ws.next() => {
                    let Some(Ok(Message::Text(text))) = frame else { break };
                    let mut frame: RelayFrame = serde_json::from_str(&text).unwrap();
                    match &mut frame {
                        RelayFrame::LinkHello(h) => h.conn = Some(conn),
                        RelayFrame::Control(c) => c.conn = Some(conn),
                        _ => {}
                    }
                    self.from_clients.lock().unwrap().push(frame.clone());
                    let _ = self.to_bridge.send(frame);
                }
                Some(frame) = rx.recv() => {
                    if ws.send(send(&frame)).await.is_err() {
                        break;
                    }
                }
            }
        }
        self.clients.lock().unwrap().remove(&conn);
        let _ = self.to_bridge.send(RelayFrame::ConnClosed(ConnClosed { conn }));
    }

    /// Sends `frame` to device connection `conn` as a relay would (a batch as its blocks).
    pub fn to_client(&self, conn: u64, frame: RelayFrame) {
        let clients = self.clients.lock().unwrap();
        let Some(client) = clients.get(&conn) else { return };
        for frame in for_device(frame) {
            let _ = client.send(frame);
        }
    }

    /// Gives devices a resume token for `session` (in every later `relay_status`, and
    /// in one sent now to every device).
    pub fn announce(&self, session: &SessionId) {
        self.tokens.lock().unwrap().insert(session.clone(), format!("token-{session}"));
        let status = RelayFrame::RelayStatus(self.status());
        for client in self.clients.lock().unwrap().values() {
            let _ = client.send(status.clone());
        }
    }

    /// Holds the bridge's batches and replies from now on.
    pub fn hold(&self) {
        *self.hold.lock().unwrap() = Some(Vec::new());
    }

    /// Stops holding and returns what was held.
    pub fn release(&self) -> Vec<RelayFrame> {
        self.hold.lock().unwrap().take().unwrap_or_default()
    }

    /// The held blocks in order (each held batch's blocks), once at least `n` are held.
    pub async fn held_blocks(&self, n: usize) -> Vec<RelayFrame> {
        for _ in 0..200 {
            if self.held_batches().iter().map(|b| b.blocks.len()).sum::<usize>() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        self.held_batches().into_iter().flat_map(|b| b.blocks).map(RelayFrame::Block).collect()
    }

    /// The batches held so far.
    pub fn held_batches(&self) -> Vec<BlockBatch> {
        let hold = self.hold.lock().unwrap();
        let held = hold.as_deref().unwrap_or_default();
        held.iter().filter_map(|f| if let RelayFrame::Batch(b) = f { Some(b.clone()) } else { None }).collect()
    }

    /// Waits until a held block has type `block_type` (the turn's end, say); panics after 30 s.
    pub async fn hold_until(&self, block_type: &str) {
        for _ in 0..1200 {
            let seen = self.held_batches().iter().flat_map(|b| b.blocks.iter()).any(|b| b.block_type == block_type);
            if seen {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no `{block_type}` block reached the relay within 30 s");
    }

    /// The newest recorded frame from a device that matches `pred`.
    pub fn last_from_client(&self, pred: impl Fn(&RelayFrame) -> bool) -> RelayFrame {
        self.from_clients.lock().unwrap().iter().rev().find(|f| pred(f)).cloned().expect("a recorded frame")
    }

    /// The connection of the newest `link_hello` (the device's current link), and how
    /// many links devices opened so far.
    pub fn newest_link(&self) -> (u64, usize) {
        let clients = self.from_clients.lock().unwrap();
        let hellos: Vec<u64> =
            clients.iter().filter_map(|f| if let RelayFrame::LinkHello(h) = f { h.conn } else { None }).collect();
        (hellos.last().copied().unwrap_or(0), hellos.len())
    }
}

/// The blocks of a batch as the `block` frames a device receives.
pub fn blocks(blocks: &[BlockEnvelope]) -> Vec<RelayFrame> {
    blocks.iter().cloned().map(RelayFrame::Block).collect()
}
