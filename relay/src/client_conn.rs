//! `/v1/client`: a paired device proves its key by signing the relay's challenge in
//! `auth`, receives `relay_status` and its held pushes, then sends `link_hello` and
//! signed `control` frames that the relay checks and forwards to the bridge.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ws::WebSocket;
use terminull_protocol::crypto::envelope::{relay_auth_bytes, verify_control};
use terminull_protocol::crypto::from_b64;
use terminull_protocol::crypto::keys::PublicIdentity;
use terminull_protocol::relay::{Auth, PROTOCOL_VERSION, RelayErrorCode, RelayFrame, version_mismatch};
use terminull_protocol::{BridgeId, DeviceId};

use crate::challenge::{Challenged, Side, challenge};
use crate::conn::{ConnId, ConnIo, Inbound, Kill, close_code};
use crate::hub::{ConnectionSlot, Hub};
use crate::peers::PeerSlot;
use crate::refusal::Refusal;

/// Serves one client connection until it ends.
pub(crate) async fn serve_client(
    hub: Arc<Hub>,
    socket: WebSocket,
    peer: SocketAddr,
    _slot: ConnectionSlot,
    admission: Option<Arc<PeerSlot>>,
) {
    let Challenged { id, mut io, nonce, answer } = match challenge(&hub, socket, peer, Side::Client).await {
        Ok(challenged) => challenged,
        Err(io) => return io.finish().await,
    };
    let (bridge_id, device_id, key) = match authenticate(&hub, answer, &nonce) {
        Ok(ok) => ok,
        Err(Refusal { code, message }) => {
            tracing::info!(conn = id, %peer, %message, "client authentication refused");
            io.handle.kill(Kill::with_error(code, message, close_code::POLICY).after_queue());
            return io.finish().await;
        }
    };
    // The bridge may be connected to another relay node.
    hub.locate(&bridge_id).await;
    if let Err(Refusal { code, message }) = hub.attach_client(&bridge_id, &device_id, io.handle.clone()) {
        tracing::info!(conn = id, %bridge_id, %device_id, %message, "client refused");
        let close =
            if code == RelayErrorCode::TooManyConnections { close_code::TRY_AGAIN_LATER } else { close_code::POLICY };
        io.handle.kill(Kill::with_error(code, message, close).after_queue());
        return io.finish().await;
    }
    if let Some(admission) = &admission {
        admission.authenticated();
    }

    let client = Authenticated { id, bridge_id, device_id, key };
    loop {
        match io.next_frame(None).await {
            Inbound::Ended => break,
            Inbound::Frame(frame) => {
                if !handle_frame(&hub, &mut io, &client, *frame) {
                    break;
                }
            }
            Inbound::Batch(_) => {
                let message = "`batch` is not a frame a client sends after authenticating";
                if !io.refuse(RelayErrorCode::BadFrame, message, None) {
                    break;
                }
            }
        }
    }
    hub.client_gone(id);
    io.finish().await;
}

/// Who is on the other end.
#[derive(Debug)]
struct Authenticated {
    id: ConnId,
    bridge_id: BridgeId,
    device_id: DeviceId,
    key: PublicIdentity,
}

/// Checks `auth`: the bridge is known, the device is paired and not revoked, and the
/// signature over the challenge verifies under the device's key.
fn authenticate(
    hub: &Hub,
    frame: RelayFrame,
    nonce: &[u8; 32],
) -> Result<(BridgeId, DeviceId, PublicIdentity), Refusal> {
    let RelayFrame::Auth(Auth { bridge_id, device_id, sig, protocol_version }) = frame else {
        return Err(Refusal::bad_frame(format!(
            "expected `auth` answering the challenge, got `{}`",
            frame.frame_type()
        )));
    };
    if protocol_version != PROTOCOL_VERSION {
        return Err(Refusal::new(
            RelayErrorCode::UnsupportedVersion,
            version_mismatch("this device", protocol_version, "the relay", PROTOCOL_VERSION),
        ));
    }
    let key = hub.device_key(&bridge_id, &device_id)?;
    let signed = relay_auth_bytes("device", device_id.as_str(), bridge_id.as_str(), nonce);
    from_b64("sig", &sig)
        .and_then(|sig| key.verify(&signed, &sig, "the challenge"))
        .map_err(|e| Refusal::new(RelayErrorCode::BadSignature, format!("auth.sig: {e}")))?;
    Ok((bridge_id, device_id, key))
}

/// Handles one frame from an authenticated client. Returns false when the connection is
/// over.
fn handle_frame(hub: &Hub, io: &mut ConnIo, client: &Authenticated, frame: RelayFrame) -> bool {
    let foreign =
        |claimed: &DeviceId| format!("this connection is authenticated as `{}`, not `{claimed}`", client.device_id);
    let forwarded = match frame {
        RelayFrame::LinkHello(mut hello) => {
            if hello.device_id != client.device_id {
                return io.refuse(RelayErrorCode::UnknownDevice, &foreign(&hello.device_id), None);
            }
            hello.conn = Some(client.id);
            RelayFrame::LinkHello(hello)
        }
        RelayFrame::Control(mut control) => {
            if control.device_id != client.device_id {
                return io.refuse(RelayErrorCode::UnknownDevice, &foreign(&control.device_id), control.session_id);
            }
            if let Err(e) = verify_control(&client.key, client.bridge_id.as_str(), &control) {
                tracing::debug!(conn = client.id, reason = %e, "refusing a control whose signature does not verify");
                return io.refuse(RelayErrorCode::BadSignature, &e.to_string(), control.session_id);
            }
            if let Some(session_id) = &control.session_id {
                let checked = match control.token.as_deref() {
                    None => Err(format!("a control for session `{session_id}` needs that session's resume token")),
                    Some(token) => hub
                        .check_token(token, &client.bridge_id, &client.device_id, session_id)
                        .map_err(|e| e.to_string()),
                };
                if let Err(message) = checked {
                    return io.refuse(RelayErrorCode::Unauthorized, &message, control.session_id);
                }
            }
            control.conn = Some(client.id);
            RelayFrame::Control(control)
        }
        other => {
            return io.refuse(
                RelayErrorCode::BadFrame,
                &format!("`{}` is not a frame a client sends after authenticating", other.frame_type()),
                None,
            );
        }
    };
    match hub.forward_to_bridge(&client.bridge_id, &forwarded) {
        Ok(()) => true,
        Err(Refusal { code, message }) => {
            let session_id = match &forwarded {
                RelayFrame::Control(c) => c.session_id.clone(),
                _ => None,
            };
            io.refuse(code, &message, session_id)
        }
    }
}
