//! Bounds on an HTTP request's body, applied before any handler runs: a declared
//! `Content-Length` above `http_body_limit` is refused with 413 before a byte of the
//! body is read, and the body must arrive whole within `http_body_timeout` (else 408),
//! so a client that trickles its body cannot hold the connection (nor the handler)
//! open. Either refusal closes the connection.

use std::time::Duration;

use axum::Json;
use axum::body::{Body, HttpBody as _};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;

/// The bounds of one request body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    /// The largest body, in bytes.
    pub max: usize,
    /// How long the whole body may take to arrive.
    pub timeout: Duration,
}

/// `{"error": message}` with `status`, closing the connection (the rest of the body, if
/// any, is never read).
fn refuse(status: StatusCode, message: String) -> Response {
    let mut response = (status, Json(serde_json::json!({ "error": message }))).into_response();
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The declared `Content-Length`, if any; `Err` when it is not a number.
fn declared_length(headers: &HeaderMap) -> Result<Option<u64>, ()> {
    match headers.get(header::CONTENT_LENGTH) {
        None => Ok(None),
        Some(value) => value.to_str().ok().and_then(|s| s.trim().parse().ok()).map(Some).ok_or(()),
    }
}

/// Reads the request's body within `limits` and hands the request on with the body in
/// memory; refuses it otherwise.
pub(crate) async fn bounded_body(State(limits): State<BodyLimits>, request: Request, next: Next) -> Response {
    let too_large =
        || refuse(StatusCode::PAYLOAD_TOO_LARGE, format!("the request body is larger than {} bytes", limits.max));
    let (parts, body) = request.into_parts();
    match declared_length(&parts.headers) {
        Ok(Some(n)) if n > limits.max as u64 => return too_large(),
        Ok(_) => {}
        Err(()) => return refuse(StatusCode::BAD_REQUEST, "the Content-Length header is not a number".into()),
    }
    if body.is_end_stream() {
        // No body (every GET, the WebSocket upgrades): nothing to wait for.
        return next.run(Request::from_parts(parts, body)).await;
    }
    let mut data = body.into_data_stream();
    let mut buf: Vec<u8> = Vec::new();
    let read = async {
        while let Some(chunk) = data.next().await {
            let chunk = chunk.map_err(|e| Some(e.to_string()))?;
            if buf.len().saturating_add(chunk.len()) > limits.max {
                return Err(None::<String>);
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(())
    };
    let outcome = tokio::time::timeout(limits.timeout, read).await;
    match outcome {
        Ok(Ok(())) => next.run(Request::from_parts(parts, Body::from(buf))).await,
        Ok(Err(None)) => too_large(),
        Ok(Err(Some(e))) => refuse(StatusCode::BAD_REQUEST, format!("the request body could not be read: {e}")),
        Err(_elapsed) => {
            tracing::debug!(received = buf.len(), "an HTTP request body did not arrive in time");
            refuse(
                StatusCode::REQUEST_TIMEOUT,
                format!("the request body did not arrive within {} s", limits.timeout.as_secs_f32()),
            )
        }
    }
}
