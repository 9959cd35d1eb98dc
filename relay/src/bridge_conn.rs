//! `/v1/bridge`: a bridge proves its key by signing the relay's challenge in `register`,
//! then sends sealed frames for its clients (blocks in signed `batch`es, read on the
//! fast path of `crate::batch`), pushes, device lists and pairing answers.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ws::WebSocket;
use terminull_protocol::BridgeId;
use terminull_protocol::crypto::envelope::relay_auth_bytes;
use terminull_protocol::crypto::from_b64;
use terminull_protocol::crypto::keys::PublicIdentity;
use terminull_protocol::relay::{PROTOCOL_VERSION, Register, RelayErrorCode, RelayFrame, version_mismatch};

use crate::batch::check_batch;
use crate::challenge::{Challenged, Side, challenge};
use crate::conn::{ConnId, ConnIo, Inbound, Kill, close_code};
use crate::hub::{ConnectionSlot, Hub};
use crate::peers::PeerSlot;
use crate::refusal::Refusal;

/// Serves one bridge connection until it ends.
pub(crate) async fn serve_bridge(
    hub: Arc<Hub>,
    socket: WebSocket,
    peer: SocketAddr,
    _slot: ConnectionSlot,
    admission: Option<Arc<PeerSlot>>,
) {
    let Challenged { id, mut io, nonce, answer } = match challenge(&hub, socket, peer, Side::Bridge).await {
        Ok(challenged) => challenged,
        Err(io) => return io.finish().await,
    };
    let (register, key) = match authenticate(answer, &nonce) {
        Ok(ok) => ok,
        Err(Refusal { code, message }) => {
            tracing::info!(conn = id, %peer, %message, "bridge registration refused");
            io.handle.kill(Kill::with_error(code, message, close_code::POLICY).after_queue());
            return io.finish().await;
        }
    };
    let bridge_id = register.bridge_id.clone();
    if let Err(Refusal { code, message }) = hub.register_bridge(&register, io.handle.clone(), peer.ip()) {
        tracing::info!(conn = id, %bridge_id, %message, "bridge registration refused");
        io.handle.kill(Kill::with_error(code, message, close_code::POLICY).after_queue());
        return io.finish().await;
    }
    if let Some(admission) = &admission {
        admission.authenticated();
    }
    drop(register);

    loop {
        match io.next_frame(None).await {
            Inbound::Ended => break,
            Inbound::Frame(frame) => {
                if !handle_frame(&hub, &mut io, &bridge_id, *frame) {
                    break;
                }
            }
            Inbound::Batch(text) => {
                let (open, blocks) = handle_batch(&hub, &mut io, &bridge_id, &key, text.as_str());
                // Each forwarded block wakes a device's writer: charge the task budget
                // per block (the reader charged one for the frame), so that the reader
                // yields to those writers as often as it did when blocks came one by one.
                for _ in 1..blocks {
                    tokio::task::consume_budget().await;
                }
                if !open {
                    break;
                }
            }
        }
    }
    hub.bridge_gone(&bridge_id, id);
    io.finish().await;
}

/// Checks `register`: its keys, that the id is derived from them, the protocol version,
/// and the signature over the challenge.
fn authenticate(frame: RelayFrame, nonce: &[u8; 32]) -> Result<(Register, PublicIdentity), Refusal> {
    let bad = Refusal::bad_frame;
    let RelayFrame::Register(register) = frame else {
        return Err(bad(format!("expected `register` answering the challenge, got `{}`", frame.frame_type())));
    };
    if register.protocol_version != PROTOCOL_VERSION {
        return Err(Refusal::new(
            RelayErrorCode::UnsupportedVersion,
            version_mismatch("this bridge", register.protocol_version, "the relay", PROTOCOL_VERSION),
        ));
    }
    let key = PublicIdentity::from_wire(&register.keys).map_err(|e| bad(format!("register.keys: {e}")))?;
    if key.bridge_id() != register.bridge_id {
        return Err(bad(format!("bridge_id `{}` is not the id of the keys presented", register.bridge_id)));
    }
    let signed = relay_auth_bytes("bridge", register.bridge_id.as_str(), register.bridge_id.as_str(), nonce);
    from_b64("sig", &register.sig)
        .and_then(|sig| key.verify(&signed, &sig, "the challenge"))
        .map_err(|e| Refusal::new(RelayErrorCode::BadSignature, format!("register.sig: {e}")))?;
    Ok((register, key))
}

/// Handles one frame from an authenticated bridge. Returns false when the connection
/// is over.
fn handle_frame(hub: &Arc<Hub>, io: &mut ConnIo, bridge_id: &BridgeId, frame: RelayFrame) -> bool {
    match frame {
        RelayFrame::Devices(devices) => match hub.replace_devices(bridge_id, devices.devices) {
            Ok(()) => true,
            Err(Refusal { code, message }) => io.refuse(code, &message, None),
        },
        RelayFrame::Sessions(sessions) => match hub.add_resumable(bridge_id, &sessions.resumable_session_ids) {
            Ok(()) => true,
            Err(Refusal { code, message }) => io.refuse(code, &message, None),
        },
        RelayFrame::Block(block) => io.refuse(
            RelayErrorCode::BadFrame,
            "a bridge sends blocks in a `batch`, not as `block` frames (relay protocol 2)",
            Some(block.session_id),
        ),
        RelayFrame::ReplayDone(mut f) => route(hub, io, bridge_id, f.conn.take(), RelayFrame::ReplayDone(f)),
        RelayFrame::Reply(mut f) => route(hub, io, bridge_id, f.conn.take(), RelayFrame::Reply(f)),
        RelayFrame::LinkAccept(mut f) => route(hub, io, bridge_id, f.conn.take(), RelayFrame::LinkAccept(f)),
        RelayFrame::PairResponse(f) => match hub.pair_response(bridge_id, f) {
            Ok(()) => true,
            Err(Refusal { code, message }) => io.refuse(code, &message, None),
        },
        RelayFrame::Push(push) => match hub.bridge_push(bridge_id, push) {
            Ok(()) => true,
            Err(Refusal { code, message }) => io.refuse(code, &message, None),
        },
        RelayFrame::CloseConn(c) => {
            hub.close_conn(bridge_id, c.conn, &c.reason);
            true
        }
        other => io.refuse(
            RelayErrorCode::BadFrame,
            &format!("`{}` is not a frame a bridge sends after registering", other.frame_type()),
            None,
        ),
    }
}

/// Checks a `batch` and forwards its blocks; a batch that fails any check is refused
/// whole, none of its blocks forwarded. Returns whether the connection is still open
/// and how many blocks were forwarded.
fn handle_batch(hub: &Hub, io: &mut ConnIo, bridge_id: &BridgeId, key: &PublicIdentity, text: &str) -> (bool, usize) {
    match check_batch(text, key, bridge_id.as_str()) {
        Ok(batch) => {
            let blocks = batch.blocks.len();
            io.charge(blocks.saturating_sub(1));
            hub.route_batch(bridge_id, batch.conn, batch.blocks);
            (true, blocks)
        }
        Err(e) => {
            let Refusal { code, message } = e.refusal();
            if code == RelayErrorCode::BadSignature {
                tracing::warn!(%bridge_id, reason = %message, "refusing a batch whose signature does not verify");
            }
            (io.refuse(code, &message, None), 0)
        }
    }
}

/// Routes a frame that must name its `conn` (already taken out of it).
fn route(hub: &Hub, io: &mut ConnIo, bridge_id: &BridgeId, conn: Option<ConnId>, frame: RelayFrame) -> bool {
    match conn {
        Some(conn) => {
            hub.route_to_client(bridge_id, conn, &frame);
            true
        }
        None => {
            io.refuse(RelayErrorCode::BadFrame, &format!("`{}` needs the `conn` it is for", frame.frame_type()), None)
        }
    }
}
