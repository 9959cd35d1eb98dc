//! The healthy device: round trips through the bridge while the attack goes on.

use super::*;

pub(crate) fn answer_text(round: u64) -> String {
    format!(r#"{{"type":"text","text":"round trip {round}"}}"#)
}

pub(crate) fn request_text(round: u64) -> String {
    format!(r#"{{"rt":{round}}}"#)
}

/// A `client_nonce` carrying the round trip's number.
pub(crate) fn round_nonce(round: u64) -> String {
    let mut bytes = [0x5a; 16];
    bytes[..8].copy_from_slice(&round.to_be_bytes());
    b64url(&bytes)
}

pub(crate) fn nonce_round(nonce: &str) -> Option<u64> {
    let bytes = from_b64url("client_nonce", nonce).ok()?;
    Some(u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?))
}

pub(crate) struct Healthy {
    pub(crate) ws: Ws,
    pub(crate) latencies: Vec<Duration>,
    /// Round trips that started while at least one attacker was at work.
    pub(crate) during_attack: usize,
}

/// Round trips through the relay and the bridge, one at a time: even ones a signed
/// `control` answered by a sealed `block` (in a signed batch of one), odd ones a `link_hello` answered by a
/// `link_accept` echoing its nonce. Each answer must be the one for this request: blocks
/// open in counter order (none lost, duplicated or reordered) and carry the request's
/// number; accepts echo the request's nonce.
pub(crate) async fn healthy_round_trips(
    mut ws: Ws,
    device: Identity,
    bridge_id: BridgeId,
    progress: watch::Sender<u64>,
    active: Arc<AtomicUsize>,
    attack_over: Arc<AtomicBool>,
) -> Healthy {
    let mut sealer = Sealer::new(HEALTHY_CONTROL_KEY, "control");
    let mut opener = Opener::new(HEALTHY_BLOCK_KEY, "block");
    let (mut latencies, mut during_attack, mut status_seen) = (Vec::new(), 0, false);
    let mut round = 0u64;
    loop {
        let over = attack_over.load(Ordering::SeqCst);
        if over && round >= MIN_ROUND_TRIPS {
            break;
        }
        let attacked = active.load(Ordering::SeqCst) > 0;
        let started = Instant::now();
        if round.is_multiple_of(2) {
            let body = request_text(round);
            let control = seal_control(&mut sealer, &device, bridge_id.as_str(), None, None, body.as_bytes()).unwrap();
            send(&mut ws, &RelayFrame::Control(control)).await;
            let block = loop {
                match next_frame(&mut ws).await {
                    // The first block of the session brings its resume token first.
                    RelayFrame::RelayStatus(s) if !status_seen => {
                        status_seen = true;
                        assert!(s.resume_tokens.contains_key(&SessionId(HEALTHY_SESSION.into())), "{s:?}");
                    }
                    RelayFrame::Block(block) => break block,
                    other => panic!("round trip {round}: expected the block answering it, got {other:?}"),
                }
            };
            let json = open_block(&mut opener, &block)
                .unwrap_or_else(|e| panic!("round trip {round}: the answer does not open in order: {e}"));
            assert_eq!(String::from_utf8(json).unwrap(), answer_text(round), "round trip {round}: another answer");
        } else {
            let nonce = round_nonce(round);
            let hello = LinkHello {
                device_id: device.public().device_id(),
                client_nonce: nonce.clone(),
                client_ephemeral: nonce.clone(),
                sig: b64(&[0; 64]),
                conn: None,
            };
            send(&mut ws, &RelayFrame::LinkHello(hello)).await;
            match next_frame(&mut ws).await {
                RelayFrame::LinkAccept(a) => {
                    assert_eq!(a.bridge_nonce, nonce, "round trip {round}: the accept of another hello");
                    assert_eq!((a.device_id, a.conn), (device.public().device_id(), None), "round trip {round}");
                }
                other => panic!("round trip {round}: expected link_accept, got {other:?}"),
            }
        }
        latencies.push(started.elapsed());
        if attacked {
            during_attack += 1;
        }
        round += 1;
        progress.send_replace(round);
        tokio::time::sleep(PACE).await;
    }
    Healthy { ws, latencies, during_attack }
}
