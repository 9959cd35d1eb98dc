//! Server-sent-event bodies.

use std::{convert::Infallible, time::Duration};

use axum::{
    body::Body,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;

/// A frame with an `event:` line.
pub(crate) fn named(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// A frame with only a `data:` line.
pub(crate) fn data(data: &str) -> String {
    format!("data: {data}\n\n")
}

/// A `text/event-stream` response that sends `frames` in order, sleeping `delay` before every frame but the first.
pub(crate) fn response(frames: Vec<String>, delay: Option<Duration>) -> Response {
    let stream = futures::stream::iter(frames.into_iter().enumerate()).then(move |(i, frame)| async move {
        if let Some(d) = delay.filter(|_| i > 0) {
            tokio::time::sleep(d).await;
        }
        Ok::<_, Infallible>(Bytes::from(frame))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        Body::from_stream(stream),
    )
        .into_response()
}
