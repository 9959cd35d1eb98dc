//! The attacking connections and when each strikes.

use super::*;

/// A message just larger than the relay accepts, text or binary.
pub(crate) fn oversized_message(binary: bool) -> Message {
    let size = MAX_MESSAGE_BYTES + 1024;
    if binary {
        Message::binary(vec![0xa5; size])
    } else {
        let pad = "x".repeat(size);
        Message::text(format!(r#"{{"type":"link_hello","pad":"{pad}"}}"#))
    }
}

/// Malformed message number `n`: binary, not JSON, truncated JSON, and (when `wrong_type`)
/// a well-formed frame a client may not send.
pub(crate) fn malformed_message(n: usize, wrong_type: bool) -> Message {
    match n % if wrong_type { 4 } else { 3 } {
        0 => Message::binary(vec![0xde, 0xad, 0xbe, 0xef]),
        1 => Message::text(format!("not json {n}")),
        2 => Message::text(r#"{"type":"link_hello","device_id":"#.to_owned()),
        _ => Message::text(r#"{"type":"registered","bridge_id":"brg_aaaaaaaaaaaaaaaa"}"#.to_owned()),
    }
}

/// Sends `next(n)` over and over while reading, until the relay closes the connection.
pub(crate) async fn keep_sending(ws: Ws, mut next: impl FnMut(usize) -> Message) -> Drained {
    let (mut sink, mut stream) = ws.split();
    let mut drained = Drained::default();
    let (mut sent, mut sending) = (0, true);
    loop {
        tokio::select! {
            biased;
            event = next_event(&mut stream, true) => match event {
                Event::Frame(RelayFrame::Error(e)) => drained.errors.push((e.code, e.message)),
                Event::Frame(other) => drained.frames.push(other.frame_type()),
                Event::Closed(close) => {
                    drained.close = close.map(|(code, _)| code);
                    return drained;
                }
            },
            // Sends fail once the relay has dropped the socket.
            result = sink.send(next(sent)), if sending => {
                sent += 1;
                sending = result.is_ok();
            }
        }
    }
}

/// Each attacker (its kind and index within the kind) and the healthy round trip it waits
/// for: the even ones strike together at once, the odd ones one after another over the
/// round trips up to [`SPREAD_UNTIL`], the kinds interleaved.
pub(crate) fn schedule() -> Vec<(Attack, usize, u64)> {
    let kinds = [
        (Attack::OversizedBeforeAuth, OVERSIZED_BEFORE_AUTH),
        (Attack::OversizedAfterAuth, OVERSIZED_AFTER_AUTH),
        (Attack::MalformedBeforeAuth, MALFORMED_BEFORE_AUTH),
        (Attack::MalformedAfterAuth, MALFORMED_AFTER_AUTH),
        (Attack::Flood, FLOOD),
        (Attack::Silent, SILENT),
        (Attack::SlowConsumer, SLOW),
        (Attack::OverDeviceLimit, OVER_DEVICE_LIMIT),
    ];
    let most = kinds.iter().map(|(_, count)| *count).max().unwrap_or(0);
    let (mut plan, mut spread) = (Vec::new(), Vec::new());
    for index in 0..most {
        for (attack, count) in kinds {
            if index >= count {
                continue;
            }
            if index.is_multiple_of(2) {
                plan.push((attack, index, 0));
            } else {
                spread.push((attack, index));
            }
        }
    }
    let n = spread.len() as u64;
    plan.extend(spread.into_iter().zip(1..).map(|((attack, index), j)| (attack, index, j * SPREAD_UNTIL / n)));
    plan
}

/// Runs `attack` once the healthy device has completed `due` round trips, counted in
/// `active` meanwhile.
pub(crate) async fn when_due(
    due: u64,
    mut progress: watch::Receiver<u64>,
    active: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    attack: impl Future<Output = Outcome>,
) -> Outcome {
    progress.wait_for(|done| *done >= due).await.expect("the healthy device keeps going");
    peak.fetch_max(active.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
    let outcome = attack.await;
    active.fetch_sub(1, Ordering::SeqCst);
    outcome
}

/// An attacker that authenticated during setup.
pub(crate) async fn attack_after_auth(
    attack: Attack,
    index: usize,
    mut ws: Ws,
    device: Identity,
    slow_start: Option<oneshot::Receiver<()>>,
) -> Outcome {
    let drained = match attack {
        Attack::OversizedAfterAuth => {
            // The relay may close before the whole message is written.
            let _ = ws.send(oversized_message(index % 2 == 1)).await;
            drain(&mut ws).await
        }
        Attack::MalformedAfterAuth => keep_sending(ws, |n| malformed_message(n + index, true)).await,
        Attack::Flood => {
            let hello = serde_json::to_string(&link_hello(&device)).unwrap();
            keep_sending(ws, move |_| Message::text(hello.clone())).await
        }
        Attack::SlowConsumer => {
            // Opens a link so the bridge pushes blocks to it, then reads nothing until the
            // bridge has been told the connection is gone.
            send(&mut ws, &link_hello(&device)).await;
            let start = slow_start.expect("a slow consumer has a start signal");
            tokio::time::timeout(HANG, start).await.expect("hang guard: the slow consumer is cut off").unwrap();
            drain(&mut ws).await
        }
        other => unreachable!("{other:?} does not authenticate first"),
    };
    Outcome { attack, drained, http_status: None, retried_503: 0 }
}

/// An attacker that starts with a fresh connection.
pub(crate) async fn attack_before_auth(
    attack: Attack,
    index: usize,
    ws_url: String,
    bridge_id: BridgeId,
    full_device: Identity,
) -> Outcome {
    let (mut ws, retried_503) = open_admitted(&format!("{ws_url}/v1/client")).await;
    let nonce = read_challenge(&mut ws).await;
    let drained = match attack {
        Attack::OversizedBeforeAuth => {
            let _ = ws.send(oversized_message(index % 2 == 1)).await;
            drain(&mut ws).await
        }
        Attack::MalformedBeforeAuth => keep_sending(ws, |n| malformed_message(n + index, false)).await,
        Attack::Silent => drain(&mut ws).await,
        Attack::OverDeviceLimit => {
            // A device that already holds all the connections it may.
            send(&mut ws, &RelayFrame::Auth(auth(&full_device, &bridge_id, &nonce))).await;
            drain(&mut ws).await
        }
        other => unreachable!("{other:?} authenticates first"),
    };
    Outcome { attack, drained, http_status: None, retried_503 }
}

/// An upgrade while the relay is at its connection limit.
pub(crate) async fn over_connection_limit(ws_url: String) -> Outcome {
    let http_status = match tokio_tungstenite::connect_async(format!("{ws_url}/v1/client")).await {
        Ok(_) => None,
        Err(tungstenite::Error::Http(response)) => Some(response.status().as_u16()),
        Err(e) => panic!("upgrade failed without an HTTP answer: {e}"),
    };
    Outcome { attack: Attack::OverConnectionLimit, drained: Drained::default(), http_status, retried_503: 0 }
}
