//! The phone web app, embedded. The page and its style sheet are embedded from
//! `web/index.html` and `web/style.css` as written; the script, `web/dist/app.js`, is
//! bundled from `web/src/` by `web/build.mjs` and committed (so building the Rust
//! binaries needs no npm), and a test rebuilds it and fails on any difference. The bridge's LAN server and the relay
//! mount [`routes`] next to their own endpoints; the app is same-origin with the
//! pairing broker and the device WebSocket it talks to.

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Its bytes.
    pub bytes: &'static [u8],
    /// Its `Content-Type`.
    pub content_type: &'static str,
}

const INDEX: Asset = Asset { bytes: include_bytes!("index.html"), content_type: "text/html; charset=utf-8" };
const APP: Asset = Asset { bytes: include_bytes!("dist/app.js"), content_type: "text/javascript; charset=utf-8" };
/// The service worker (web/src/sw/, bundled to web/dist/sw.js): served at `/sw.js` so
/// its scope is the whole app.
const SERVICE_WORKER: Asset =
    Asset { bytes: include_bytes!("dist/sw.js"), content_type: "text/javascript; charset=utf-8" };
const STYLE: Asset = Asset { bytes: include_bytes!("style.css"), content_type: "text/css; charset=utf-8" };

/// The asset served at `path`: the app's page at `/` and `/pair` (the pairing link's
/// path; its secret is in the fragment, which the browser never sends), its script
/// and its style sheet.
pub fn asset(path: &str) -> Option<Asset> {
    match path {
        "/" | "/pair" | "/index.html" => Some(INDEX),
        "/app.js" => Some(APP),
        "/sw.js" => Some(SERVICE_WORKER),
        "/style.css" => Some(STYLE),
        _ => None,
    }
}

/// The policy every page response carries: scripts, styles and connections from this
/// origin only (and its WebSocket), no framing, no referrer.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn respond(asset: Asset) -> Response {
    let mut response = (StatusCode::OK, asset.bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// The app's routes, plus `GET /v1/server` answering `{"kind": kind}` so the page
/// can show whether it reached the bridge on the LAN (`"lan"`) or through a relay
/// (`"relay"`).
pub fn routes<S: Clone + Send + Sync + 'static>(kind: &'static str) -> Router<S> {
    let mut router = Router::new();
    for path in ["/", "/pair", "/index.html", "/app.js", "/sw.js", "/style.css"] {
        router = router.route(
            path,
            get(move || async move {
                match asset(path) {
                    Some(asset) => respond(asset),
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            }),
        );
    }
    router.route(
        "/v1/server",
        get(move || async move {
            let body = format!("{{\"kind\":\"{kind}\"}}");
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_served_at_the_root_and_at_the_pairing_links_path() {
        for path in ["/", "/pair", "/index.html"] {
            assert_eq!(asset(path).map(|a| a.content_type), Some("text/html; charset=utf-8"), "{path}");
        }
        assert!(asset("/app.js").is_some_and(|a| !a.bytes.is_empty()));
        assert!(asset("/style.css").is_some());
        assert!(asset("/sw.js").is_some_and(|a| !a.bytes.is_empty() && a.content_type.starts_with("text/javascript")));
        assert!(asset("/../Cargo.toml").is_none() && asset("/v1/client").is_none());
    }
}
