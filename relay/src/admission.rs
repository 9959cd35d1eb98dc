//! Admission control per relay process: WebSocket upgrades are admitted at a bounded
//! rate (a herd of reconnecting peers after another process died gets `503` with a
//! jittered `Retry-After` instead of crowding in at once), and the last
//! `reconnect_reserve` connection slots are kept for peers the relay already knows
//! (registered bridges, paired devices): a new bridge registration or a pairing is
//! refused ("retry later") once the connection count reaches `max_connections -
//! reconnect_reserve`.

use std::sync::Mutex;
use std::time::Instant;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use rand::RngExt as _;

use crate::config::RelayConfig;
use crate::limits::TokenBucket;

/// The pace of WebSocket admissions.
#[derive(Debug)]
pub(crate) struct Admission {
    bucket: Mutex<TokenBucket>,
    /// `Retry-After` is drawn uniformly from 1..=this many seconds.
    spread_secs: u64,
}

impl Admission {
    /// `admissions_per_sec` with `admission_burst` banked.
    pub(crate) fn new(config: &RelayConfig) -> Self {
        Self {
            bucket: Mutex::new(TokenBucket::new(
                f64::from(config.admissions_per_sec),
                f64::from(config.admission_burst),
            )),
            spread_secs: config.admission_retry_spread.as_secs().max(1),
        }
    }

    /// `Ok` when a connection may be admitted now, else the seconds it should wait.
    pub(crate) fn admit(&self) -> Result<(), u64> {
        let admitted = self.bucket.lock().map(|mut b| b.try_take(Instant::now())).unwrap_or(true);
        if admitted { Ok(()) } else { Err(self.retry_after()) }
    }

    /// A jittered wait, so that refused peers come back spread out.
    pub(crate) fn retry_after(&self) -> u64 {
        rand::rng().random_range(1..=self.spread_secs)
    }
}

/// `503` with `Retry-After: secs` and a JSON `error` saying why.
pub(crate) fn retry_later(secs: u64, why: &str) -> Response {
    let body = serde_json::json!({ "error": format!("{why}; retry after {secs} s") });
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    response
}
