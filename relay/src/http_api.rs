//! The HTTP side of the relay, and the router that also upgrades the two WebSocket
//! endpoints. Every error body is `{"error": "<sentence>"}`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, RawQuery, State, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde::Deserialize;
use terminull_protocol::crypto::envelope::push_subscription_bytes;
use terminull_protocol::crypto::from_b64;
use terminull_protocol::crypto::pairing::PairRequest;
use terminull_protocol::{BridgeId, DeviceId};

use crate::admission::{Admission, retry_later};
use crate::bridge_conn::serve_bridge;
use crate::challenge::Side;
use crate::client_conn::serve_client;
use crate::http_limits::{BodyLimits, bounded_body};
use crate::hub::push::SubscriptionError;
use crate::hub::{Hub, PairOutcome, PairStartError, unix_now};
use crate::limits::IpRateLimiter;
use crate::listing::ListingAuth;
use crate::peers::PeerSlot;
use crate::webpush::Subscription;

/// What every handler shares.
#[derive(Debug, Clone)]
struct Api {
    hub: Arc<Hub>,
    pair_limiter: Arc<IpRateLimiter>,
    admission: Arc<Admission>,
}

/// The relay's router: `/healthz`, the WebSocket endpoints and the HTTP API.
pub(crate) fn router(hub: Arc<Hub>) -> Router {
    let pair_limiter = Arc::new(IpRateLimiter::new(hub.config.pair_requests_per_minute, hub.config.max_tracked_ips));
    let body_limit = hub.config.http_body_limit;
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/bridge", socket_endpoint(Side::Bridge))
        .route("/v1/client", socket_endpoint(Side::Client))
        .route("/v1/bridges/{bridge_id}/pair", post(pair))
        .route("/v1/bridges/{bridge_id}/devices", get(devices))
        .route("/v1/bridges/{bridge_id}/app-signature", get(app_signature))
        .route("/v1/push/subscriptions", post(subscribe).delete(unsubscribe))
        .route("/v1/push/vapid", get(vapid))
        // The phone web app, served here so a phone needs nothing installed.
        .merge(terminull_web::routes("relay", None))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint on this relay") })
        .method_not_allowed_fallback(|| async {
            error(StatusCode::METHOD_NOT_ALLOWED, "this endpoint does not accept that method")
        })
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(
            BodyLimits { max: body_limit, timeout: hub.config.http_body_timeout },
            bounded_body,
        ))
        .with_state(Api { admission: Arc::new(Admission::new(&hub.config)), hub, pair_limiter })
}

/// `{"error": message}` with `status`.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

/// An HTTP request the relay refuses: the status and the sentence of the JSON `error`.
struct HttpRefusal {
    status: StatusCode,
    message: String,
}

impl IntoResponse for HttpRefusal {
    fn into_response(self) -> Response {
        error(self.status, self.message)
    }
}

/// A request body, or why there is none.
fn body_or_error(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<Bytes, HttpRefusal> {
    body.map_err(|rejection| {
        let status = rejection.status();
        let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!("the request body is larger than {limit} bytes")
        } else {
            format!("the request body could not be read: {}", rejection.body_text())
        };
        HttpRefusal { status, message }
    })
}

fn path_refused(rejection: PathRejection) -> Response {
    error(rejection.status(), format!("the bridge id in the path is not usable: {}", rejection.body_text()))
}

fn upgrade_refused(rejection: WebSocketUpgradeRejection) -> Response {
    error(rejection.status(), format!("this endpoint only accepts WebSocket upgrades: {}", rejection.body_text()))
}

/// The handler of the WebSocket endpoint of `side` (`/v1/bridge`, `/v1/client`).
fn socket_endpoint(side: Side) -> MethodRouter<Api> {
    get(
        move |State(api): State<Api>,
              ConnectInfo(peer): ConnectInfo<SocketAddr>,
              admission: Option<Extension<Arc<PeerSlot>>>,
              upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>| async move {
            accept_socket(api, peer, admission.map(|Extension(slot)| slot), upgrade, side)
        },
    )
}

/// The read buffer of a device connection. tungstenite zero-fills its whole read
/// buffer on the first read, so its default (128 KiB) was resident for every idle
/// device: the end-to-end benchmark measured 140 KiB of relay RSS per connection.
/// Devices send small control frames; a larger message still arrives, over more reads.
const CLIENT_READ_BUFFER: usize = 8 * 1024;

/// Upgrades to a WebSocket served by `side`'s loop, within the relay's connection
/// limit and message size (devices get the small read buffer). `admission` is the
/// connection's place in the per-address table: it moves to the WebSocket's task.
fn accept_socket(
    api: Api,
    peer: SocketAddr,
    admission: Option<Arc<PeerSlot>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    side: Side,
) -> Response {
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return upgrade_refused(rejection),
    };
    if let Err(secs) = api.admission.admit() {
        return retry_later(secs, "the relay is admitting connections gradually");
    }
    let Some(slot) = api.hub.try_connection_slot() else {
        return retry_later(api.admission.retry_after(), "the relay is at its connection limit");
    };
    let hub = api.hub;
    let tracked = hub.tasks.token();
    let max = hub.config.max_message_bytes;
    let upgrade = match side {
        Side::Bridge => upgrade,
        Side::Client => upgrade.read_buffer_size(CLIENT_READ_BUFFER),
    };
    upgrade.max_message_size(max).max_frame_size(max).on_upgrade(move |socket| async move {
        let _tracked = tracked;
        match side {
            Side::Bridge => serve_bridge(hub, socket, peer, slot, admission).await,
            Side::Client => serve_client(hub, socket, peer, slot, admission).await,
        }
    })
}

/// `POST /v1/bridges/{bridge_id}/pair`: hands a device's pairing request to the bridge
/// and returns its answer. The relay cannot check the request's MAC; only the bridge,
/// which holds the pairing secret, can.
async fn pair(
    State(api): State<Api>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    bridge_id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if !api.pair_limiter.allow(peer.ip()) {
        return error(StatusCode::TOO_MANY_REQUESTS, "too many pairing requests from this address; retry in a minute");
    }
    if api.hub.in_reconnect_reserve() {
        return retry_later(api.admission.retry_after(), "the relay keeps its last connections for reconnecting peers");
    }
    let body = match body_or_error(body, api.hub.config.http_body_limit) {
        Ok(body) => body,
        Err(refusal) => return refusal.into_response(),
    };
    let request: PairRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("the body is not a pairing request: {e}")),
    };
    let bridge_id = match bridge_id {
        Ok(Path(bridge_id)) => BridgeId(bridge_id),
        Err(rejection) => return path_refused(rejection),
    };
    if request.bridge_id != bridge_id {
        return error(
            StatusCode::BAD_REQUEST,
            format!("the request is for bridge `{}` but was posted to `{bridge_id}`", request.bridge_id),
        );
    }
    // The bridge answers a pairing with a new device registry the relay must store:
    // refuse while the database is unavailable rather than pair a device that would
    // be forgotten.
    if let Err(unavailable) = api.hub.store().ready().await {
        tracing::warn!(%bridge_id, error = %unavailable, "refusing a pairing: the database is unavailable");
        let mut response = error(StatusCode::SERVICE_UNAVAILABLE, format!("pairing is paused: {unavailable}"));
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("5"));
        return response;
    }
    // The bridge may be connected to another relay node.
    api.hub.locate(&bridge_id).await;
    let (request_id, outcome) = match api.hub.start_pairing(&bridge_id, request) {
        Ok(started) => started,
        Err(PairStartError::UnknownBridge) => {
            return error(StatusCode::NOT_FOUND, format!("bridge `{bridge_id}` is not registered at this relay"));
        }
        Err(PairStartError::Offline) => {
            return error(StatusCode::SERVICE_UNAVAILABLE, format!("bridge `{bridge_id}` is not connected"));
        }
        Err(PairStartError::TooManyForBridge) => {
            return error(StatusCode::TOO_MANY_REQUESTS, "too many pairing requests are waiting for this bridge");
        }
        Err(PairStartError::Busy) => {
            return error(StatusCode::SERVICE_UNAVAILABLE, "the relay cannot take more pairing requests right now");
        }
    };
    let timeout = api.hub.config.pair_timeout;
    match tokio::time::timeout(timeout, outcome).await {
        Err(_) => {
            api.hub.cancel_pairing(request_id);
            error(
                StatusCode::GATEWAY_TIMEOUT,
                format!("bridge `{bridge_id}` did not answer within {} s", timeout.as_secs_f32()),
            )
        }
        Ok(Ok(PairOutcome::Accepted(response))) => (StatusCode::OK, Json(response)).into_response(),
        Ok(Ok(PairOutcome::Refused(reason))) => error(StatusCode::FORBIDDEN, reason),
        Ok(Ok(PairOutcome::BridgeGone)) | Ok(Err(_)) => {
            error(StatusCode::SERVICE_UNAVAILABLE, format!("bridge `{bridge_id}` went offline before answering"))
        }
    }
}

/// `GET /v1/bridges/{bridge_id}/devices`: the registry (public keys and names), for the
/// bridge or one of its active devices only (signed query, `crate::listing`).
/// `GET /v1/bridges/{id}/app-signature`: the bridge's signature over the app it
/// embeds, as it sent it in `register` (docs/web-client.md#app-code-integrity).
async fn app_signature(State(api): State<Api>, bridge_id: Result<Path<String>, PathRejection>) -> Response {
    match bridge_id {
        Ok(Path(id)) => terminull_web::signature_response(&id, api.hub.app_signature(&BridgeId(id.clone())).as_ref()),
        Err(rejection) => path_refused(rejection),
    }
}

async fn devices(
    State(api): State<Api>,
    bridge_id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Response {
    let bridge_id = match bridge_id {
        Ok(Path(bridge_id)) => BridgeId(bridge_id),
        Err(rejection) => return path_refused(rejection),
    };
    let auth = ListingAuth::from_query(query.as_deref());
    // Without a signature, nothing is told, not even whether the bridge is registered.
    if let Err(refusal) = auth.require_all() {
        return error(StatusCode::UNAUTHORIZED, refusal.message);
    }
    let Some((keys, devices)) = api.hub.devices(&bridge_id) else {
        return error(StatusCode::NOT_FOUND, format!("bridge `{bridge_id}` is not registered at this relay"));
    };
    let skew = api.hub.config.subscription_clock_skew.as_secs();
    match auth.check(bridge_id.as_str(), &keys, &devices, unix_now(), skew) {
        Ok(()) => Json(devices).into_response(),
        Err(refusal) => {
            error(StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::UNAUTHORIZED), refusal.message)
        }
    }
}

/// `GET /v1/push/vapid`: the key browsers subscribe with.
async fn vapid(State(api): State<Api>) -> Response {
    Json(serde_json::json!({ "public_key": api.hub.vapid_public_key() })).into_response()
}

/// The body of `POST`/`DELETE /v1/push/subscriptions`.
#[derive(Debug, Deserialize)]
struct SubscriptionChange {
    bridge_id: BridgeId,
    device_id: DeviceId,
    subscription: Subscription,
    ts: u64,
    sig: String,
}

async fn subscribe(State(api): State<Api>, body: Result<Bytes, BytesRejection>) -> Response {
    change_subscription(&api, body, true).await
}

async fn unsubscribe(State(api): State<Api>, body: Result<Bytes, BytesRejection>) -> Response {
    change_subscription(&api, body, false).await
}

/// Checks a signed subscription change and applies it.
async fn change_subscription(api: &Api, body: Result<Bytes, BytesRejection>, subscribe: bool) -> Response {
    let config = &api.hub.config;
    let body = match body_or_error(body, config.http_body_limit) {
        Ok(body) => body,
        Err(refusal) => return refusal.into_response(),
    };
    let change: SubscriptionChange = match serde_json::from_slice(&body) {
        Ok(change) => change,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("the body is not a push subscription change: {e}")),
    };
    let sub = &change.subscription;
    if subscribe {
        if let Err(e) = sub.validate() {
            return error(StatusCode::BAD_REQUEST, format!("the subscription is not usable: {e}"));
        }
        if !config.allow_insecure_push_endpoints && !sub.endpoint.starts_with("https://") {
            return error(StatusCode::BAD_REQUEST, "the subscription endpoint must be an https:// URL");
        }
    }
    let now = unix_now();
    let skew = config.subscription_clock_skew.as_secs();
    if change.ts.abs_diff(now) > skew {
        return error(
            StatusCode::UNAUTHORIZED,
            format!("`ts` is {} s away from the relay's clock; at most {skew} s is accepted", change.ts.abs_diff(now)),
        );
    }
    let key = match api.hub.subscription_device_key(&change.bridge_id, &change.device_id) {
        Ok(key) => key,
        Err(e) => return subscription_error(&change, e),
    };
    let signed = push_subscription_bytes(
        change.bridge_id.as_str(),
        change.device_id.as_str(),
        &sub.endpoint,
        &sub.p256dh,
        &sub.auth,
        change.ts,
    );
    let verified = from_b64("sig", &change.sig).and_then(|sig| key.verify(&signed, &sig, "the subscription change"));
    if let Err(e) = verified {
        return error(StatusCode::UNAUTHORIZED, format!("`sig`: {e} under the device's key"));
    }
    if subscribe && let Err(e) = api.hub.push_policy().check_subscription_endpoint(&sub.endpoint).await {
        return error(StatusCode::BAD_REQUEST, format!("the subscription endpoint is not allowed: {e}"));
    }
    let new = subscribe.then(|| change.subscription.clone());
    match api.hub.set_subscription(&change.bridge_id, &change.device_id, new, change.ts).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => subscription_error(&change, e),
    }
}

fn subscription_error(change: &SubscriptionChange, e: SubscriptionError) -> Response {
    match e {
        SubscriptionError::UnknownBridge => {
            error(StatusCode::NOT_FOUND, format!("bridge `{}` is not registered at this relay", change.bridge_id))
        }
        SubscriptionError::UnknownDevice => error(
            StatusCode::FORBIDDEN,
            format!("device `{}` is not paired with bridge `{}`", change.device_id, change.bridge_id),
        ),
        SubscriptionError::Stale => {
            error(StatusCode::CONFLICT, "a subscription change with a later `ts` is already stored for this device")
        }
    }
}
