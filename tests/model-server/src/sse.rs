//! Server-sent-event bodies.

use std::{convert::Infallible, time::Duration};

use axum::{
    body::Body,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::watch;

/// A frame with an `event:` line.
pub(crate) fn named(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// A frame with only a `data:` line.
pub(crate) fn data(data: &str) -> String {
    format!("data: {data}\n\n")
}

/// How an answer's events are spaced: at once, a fixed delay apart (`slow`), or the rest
/// held after the first until the test releases it (`held`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Pace {
    delay: Option<Duration>,
    /// For a held answer: turns true at `POST /__release`.
    release: Option<watch::Receiver<bool>>,
}

impl Pace {
    pub(crate) fn new(delay: Option<Duration>, release: Option<watch::Receiver<bool>>) -> Self {
        Self { delay, release }
    }

    /// Waits before event `i` of a stream (never before the first).
    async fn before_event(&mut self, i: usize) {
        if i > 0 {
            self.before_answer().await;
        }
    }

    /// Waits before a whole (non-streamed) answer, or before the next event.
    pub(crate) async fn before_answer(&mut self) {
        if let Some(mut release) = self.release.take() {
            // Bounded: a test that never releases gets its answer after HOLD_LIMIT.
            let _ = tokio::time::timeout(crate::HOLD_LIMIT, release.wait_for(|released| *released)).await;
        }
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
    }
}

/// A `text/event-stream` response that sends `frames` in order, paced by `pace`.
pub(crate) fn response(frames: Vec<String>, pace: Pace) -> Response {
    let stream = futures::stream::unfold((frames.into_iter().enumerate(), pace), |(mut frames, mut pace)| async move {
        let (i, frame) = frames.next()?;
        pace.before_event(i).await;
        Some((Ok::<_, Infallible>(Bytes::from(frame)), (frames, pace)))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        Body::from_stream(stream),
    )
        .into_response()
}
