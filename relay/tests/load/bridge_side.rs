//! The bridge: answers the healthy device and pushes blocks to the slow consumers.

use super::*;

/// What the bridge's reader needs.
pub(crate) struct BridgeSide {
    pub(crate) bridge: Identity,
    pub(crate) healthy_conn: u64,
    pub(crate) healthy_device: DeviceId,
    pub(crate) flood_devices: HashSet<DeviceId>,
    /// Fired when the bridge hears that a slow consumer's connection is gone.
    pub(crate) slow_starts: HashMap<DeviceId, oneshot::Sender<()>>,
    /// Connections of slow consumers, for the pusher.
    pub(crate) new_slow: mpsc::UnboundedSender<u64>,
    pub(crate) closed: Arc<Mutex<HashSet<u64>>>,
    /// Answers to the healthy device, written ahead of pushed blocks.
    pub(crate) answers: mpsc::UnboundedSender<String>,
}

#[derive(Debug, Default)]
pub(crate) struct BridgeLog {
    pub(crate) round_trips: u64,
    pub(crate) flood_hellos: usize,
    pub(crate) conn_closed: usize,
    pub(crate) unexpected: Vec<String>,
    pub(crate) close: Option<u16>,
}

/// Reads the bridge connection until the relay closes it: answers the healthy device,
/// hands slow consumers to the pusher, counts the rest. Anything else is unexpected.
pub(crate) async fn bridge_reader(mut stream: SplitStream<Ws>, mut side: BridgeSide) -> BridgeLog {
    let bridge_id = side.bridge.public().bridge_id();
    let mut log = BridgeLog::default();
    let mut opener = Opener::new(HEALTHY_CONTROL_KEY, "control");
    let mut sealer = Sealer::new(HEALTHY_BLOCK_KEY, "block");
    let mut slow_conns: HashMap<u64, DeviceId> = HashMap::new();
    loop {
        let frame = match next_event(&mut stream, false).await {
            Event::Frame(frame) => frame,
            Event::Closed(close) => {
                log.close = close.map(|(code, _)| code);
                return log;
            }
        };
        let healthy = frame.conn() == Some(side.healthy_conn);
        match frame {
            RelayFrame::Control(c) if healthy && c.device_id == side.healthy_device => {
                let round = log.round_trips;
                match open_control(&mut opener, bridge_id.as_str(), &c) {
                    Ok(body) if body == request_text(round).as_bytes() => {}
                    other => log.unexpected.push(format!("round trip {round}: control {other:?}")),
                }
                let session = SessionId(HEALTHY_SESSION.into());
                let answer = answer_text(round);
                let block = seal_block(&mut sealer, &session, "text", false, SERVER_TS, answer.as_bytes()).unwrap();
                let batch = sign_batch(&side.bridge, side.healthy_conn, vec![block]);
                side.answers.send(serde_json::to_string(&RelayFrame::Batch(batch)).unwrap()).unwrap();
                log.round_trips += 1;
            }
            RelayFrame::LinkHello(h) if healthy && h.device_id == side.healthy_device => {
                let round = log.round_trips;
                if nonce_round(&h.client_nonce) != Some(round) {
                    log.unexpected.push(format!("round trip {round}: link_hello {}", h.client_nonce));
                }
                let accept = LinkAccept {
                    device_id: h.device_id,
                    bridge_nonce: h.client_nonce,
                    bridge_ephemeral: h.client_ephemeral,
                    sig: b64(&[0; 64]),
                    conn: Some(side.healthy_conn),
                };
                side.answers.send(serde_json::to_string(&RelayFrame::LinkAccept(accept)).unwrap()).unwrap();
                log.round_trips += 1;
            }
            RelayFrame::LinkHello(h) if !healthy && h.conn.is_some() && side.flood_devices.contains(&h.device_id) => {
                log.flood_hellos += 1;
            }
            RelayFrame::LinkHello(h) if !healthy && side.slow_starts.contains_key(&h.device_id) => {
                let conn = h.conn.expect("the relay sets conn");
                slow_conns.insert(conn, h.device_id);
                side.new_slow.send(conn).unwrap();
            }
            RelayFrame::ConnClosed(c) => {
                log.conn_closed += 1;
                if healthy {
                    log.unexpected.push("conn_closed for the healthy device".to_owned());
                }
                side.closed.lock().unwrap().insert(c.conn);
                if let Some(start) = slow_conns.get(&c.conn).and_then(|device| side.slow_starts.remove(device)) {
                    let _ = start.send(());
                }
            }
            other => log.unexpected.push(format!("{other:?}")),
        }
    }
}

/// Writes the bridge's frames: answers first, then pushed blocks.
pub(crate) async fn bridge_writer(
    mut sink: SplitSink<Ws, Message>,
    mut answers: mpsc::UnboundedReceiver<String>,
    mut bulk: mpsc::Receiver<String>,
) {
    loop {
        let text = tokio::select! {
            biased;
            Some(text) = answers.recv() => text,
            Some(text) = bulk.recv() => text,
            else => return,
        };
        if sink.send(Message::text(text)).await.is_err() {
            return;
        }
    }
}

/// Pushes big signed blocks to every slow consumer, round-robin, until the relay has
/// cut off all of them; [`PUSH_PER_ROUND`] blocks per healthy round trip, so that what
/// the relay has yet to read on the bridge connection stays bounded (every answer the
/// healthy device gets means the relay has read the blocks written before it). Returns
/// how many blocks it pushed.
pub(crate) async fn pusher(
    bridge: Identity,
    mut new_slow: mpsc::UnboundedReceiver<u64>,
    closed: Arc<Mutex<HashSet<u64>>>,
    bulk: mpsc::Sender<String>,
    mut progress: watch::Receiver<u64>,
) -> usize {
    let mut sealer = Sealer::new(SLOW_BLOCK_KEY, "block");
    // One block per connection, sealed and signed once (a batch of one) and sent over and
    // over: the relay verifies every copy.
    let mut seal = |conn: u64| {
        let json = format!(r#"{{"type":"text","text":"{}"}}"#, "y".repeat(SLOW_BLOCK_BYTES));
        let session = SessionId(SLOW_SESSION.into());
        let block = seal_block(&mut sealer, &session, "text", false, SERVER_TS, json.as_bytes()).unwrap();
        (conn, serde_json::to_string(&RelayFrame::Batch(sign_batch(&bridge, conn, vec![block]))).unwrap())
    };
    let (mut active, mut seen, mut pushed) = (Vec::new(), 0, 0);
    let mut next = 0;
    loop {
        while let Ok(conn) = new_slow.try_recv() {
            active.push(seal(conn));
            seen += 1;
        }
        {
            let closed = closed.lock().unwrap();
            active.retain(|(conn, _)| !closed.contains(conn));
        }
        if active.is_empty() {
            if seen == SLOW {
                return pushed;
            }
            match new_slow.recv().await {
                Some(conn) => {
                    active.push(seal(conn));
                    seen += 1;
                }
                None => return pushed,
            }
            continue;
        }
        for _ in 0..PUSH_PER_ROUND {
            let (_, text) = &active[next % active.len()];
            next += 1;
            if bulk.send(text.clone()).await.is_err() {
                return pushed;
            }
            pushed += 1;
        }
        let round = *progress.borrow_and_update();
        if progress.wait_for(|done| *done > round).await.is_err() {
            return pushed;
        }
    }
}
