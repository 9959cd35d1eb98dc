//! The phone web app, embedded. The page, its style sheet, the web app manifest and
//! the icons are embedded from `web/` as written (`web/tools/icons.mjs` drew the
//! icons); the script `web/dist/app.js` and the service worker `web/dist/sw.js` are
//! bundled from `web/src/` by `web/build.mjs` and committed (so building the Rust
//! binaries needs no npm), and a test rebuilds them and fails on any difference. The
//! bridge's LAN server and the relay mount [`routes`] next to their own endpoints; the
//! app is same-origin with the pairing broker and the device WebSocket it talks to.
//!
//! The shell's digest ([`shell_digest`]) is what a bridge signs ([`sign_shell`]) so
//! that the app's service worker takes this build as an update
//! (docs/web-client.md#app-code-integrity).

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use terminull_protocol::crypto::app_code::{self, AppSignature, SHELL_PATHS};
use terminull_protocol::crypto::keys::Identity;

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
const MANIFEST: Asset =
    Asset { bytes: include_bytes!("manifest.webmanifest"), content_type: "application/manifest+json; charset=utf-8" };
const ICON_192: Asset = Asset { bytes: include_bytes!("icons/icon-192.png"), content_type: "image/png" };
const ICON_512: Asset = Asset { bytes: include_bytes!("icons/icon-512.png"), content_type: "image/png" };
const ICON_MASKABLE: Asset = Asset { bytes: include_bytes!("icons/icon-maskable-512.png"), content_type: "image/png" };

/// Every path served, the shell's ([`SHELL_PATHS`]) and the page's other names.
const PATHS: &[&str] = &[
    "/",
    "/pair",
    "/index.html",
    "/app.js",
    "/style.css",
    "/manifest.webmanifest",
    "/icons/icon-192.png",
    "/icons/icon-512.png",
    "/icons/icon-maskable-512.png",
    "/sw.js",
];

/// The asset served at `path`: the app's page at `/` and `/pair` (the pairing link's
/// path; its secret is in the fragment, which the browser never sends), its script,
/// its style sheet, the web app manifest, its icons and the service worker (at the
/// root, so its scope is the whole origin).
pub fn asset(path: &str) -> Option<Asset> {
    match path {
        "/" | "/pair" | "/index.html" => Some(INDEX),
        "/app.js" => Some(APP),
        "/sw.js" => Some(SERVICE_WORKER),
        "/style.css" => Some(STYLE),
        "/manifest.webmanifest" => Some(MANIFEST),
        "/icons/icon-192.png" => Some(ICON_192),
        "/icons/icon-512.png" => Some(ICON_512),
        "/icons/icon-maskable-512.png" => Some(ICON_MASKABLE),
        _ => None,
    }
}

/// The embedded shell's digest: [`app_code::shell_digest`] over [`SHELL_PATHS`] as served.
pub fn shell_digest() -> [u8; 32] {
    let files: Vec<(&str, &[u8])> =
        SHELL_PATHS.iter().map(|p| (*p, asset(p).map(|a| a.bytes).unwrap_or_default())).collect();
    // Every shell path has an asset (a unit test pins it), so the list is the shell's.
    app_code::shell_digest(&files).unwrap_or_default()
}

/// `bridge`'s signature over the embedded shell: what it hands its relay and serves on the LAN.
pub fn sign_shell(bridge: &Identity) -> AppSignature {
    app_code::sign_shell(bridge, &shell_digest())
}

/// The answer to `GET /v1/bridges/{id}/app-signature`: the signature as JSON, or a
/// 404 `{"error"}` naming the bridge when none is known.
pub fn signature_response(bridge_id: &str, signature: Option<&AppSignature>) -> Response {
    let (status, body) = match signature {
        Some(signature) => (StatusCode::OK, serde_json::to_string(signature).unwrap_or_default()),
        None => (
            StatusCode::NOT_FOUND,
            serde_json::json!({ "error": format!("no app signature is known for bridge `{bridge_id}`") }).to_string(),
        ),
    };
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `GET /v1/bridges/{bridge_id}/app-signature` answering `signature` for its own
/// bridge (the LAN server: the bridge serves its own signature).
pub fn signature_route<S: Clone + Send + Sync + 'static>(signature: AppSignature) -> Router<S> {
    let signature = std::sync::Arc::new(signature);
    Router::new().route(
        "/v1/bridges/{bridge_id}/app-signature",
        get(move |axum::extract::Path(bridge_id): axum::extract::Path<String>| async move {
            let known = (bridge_id == signature.bridge_id).then_some(&*signature);
            signature_response(&bridge_id, known)
        }),
    )
}

/// The policy every page response carries: scripts, styles and connections from this
/// origin only (and its WebSocket: `'self'` matches `ws:`/`wss:` to the same host
/// under CSP 3), the service worker and the manifest from this
/// origin, no framing, no referrer.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; worker-src 'self'; manifest-src 'self'; base-uri 'none'; \
form-action 'none'; frame-ancestors 'none'";

/// The origin (`ws[s]://host[:port]`) of a relay's WebSocket URL, or `None` when `url`
/// is not a plain `ws:`/`wss:` URL (nothing that could widen the policy beyond it).
pub fn relay_origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "ws" && scheme != "wss" {
        return None;
    }
    let host = rest.split(['/', '?', '#']).next()?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']');
    (!host.is_empty() && host.len() <= 255 && host.chars().all(allowed)).then(|| format!("{scheme}://{host}"))
}

/// [`CONTENT_SECURITY_POLICY`], letting the page also connect to `relay` (the bridge's
/// LAN page falls back to the relay its pairing named, docs/web-client.md "One
/// pairing, both paths"); the default policy when `relay` is not a plain WebSocket URL.
pub fn content_security_policy(relay: Option<&str>) -> String {
    match relay.and_then(relay_origin) {
        Some(origin) => {
            CONTENT_SECURITY_POLICY.replace("connect-src 'self';", &format!("connect-src 'self' {origin};"))
        }
        None => CONTENT_SECURITY_POLICY.to_owned(),
    }
}

fn respond(asset: Asset, csp: &HeaderValue) -> Response {
    let mut response = (StatusCode::OK, asset.bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::CONTENT_SECURITY_POLICY, csp.clone());
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// The app's routes, plus `GET /v1/server` answering `{"kind": kind}` so the page
/// can show whether it reached the bridge on the LAN (`"lan"`) or through a relay
/// (`"relay"`). `relay`: the relay the LAN page may fall back to
/// ([`content_security_policy`]); `None` on the relay itself.
pub fn routes<S: Clone + Send + Sync + 'static>(kind: &'static str, relay: Option<&str>) -> Router<S> {
    let csp = HeaderValue::from_str(&content_security_policy(relay))
        .unwrap_or_else(|_| HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    let mut router = Router::new();
    for &path in PATHS {
        let csp = csp.clone();
        router = router.route(
            path,
            get(move || async move {
                match asset(path) {
                    Some(asset) => respond(asset, &csp),
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
    fn a_lan_page_may_connect_to_its_relays_origin_and_nothing_else() {
        let csp = content_security_policy(Some("wss://relay.example:8443/v1?x=1"));
        assert!(csp.contains("connect-src 'self' wss://relay.example:8443;"), "{csp}");
        assert_eq!(relay_origin("ws://127.0.0.1:9000"), Some("ws://127.0.0.1:9000".into()));
        for hostile in ["https://relay.example", "wss://a.example; script-src *", "wss://", "ws://a b", "javascript:x"]
        {
            assert_eq!(content_security_policy(Some(hostile)), CONTENT_SECURITY_POLICY, "{hostile}");
        }
        assert_eq!(content_security_policy(None), CONTENT_SECURITY_POLICY);
    }

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

    #[test]
    fn every_shell_file_is_served_with_its_content_type() {
        for path in SHELL_PATHS {
            let served = asset(path).unwrap_or_else(|| panic!("{path} is not served"));
            assert!(!served.bytes.is_empty(), "{path} is empty");
            assert!(PATHS.contains(path), "{path} has no route");
        }
        assert_eq!(asset("/manifest.webmanifest").unwrap().content_type, "application/manifest+json; charset=utf-8");
        assert_eq!(asset("/sw.js").unwrap().content_type, "text/javascript; charset=utf-8");
        for icon in ["/icons/icon-192.png", "/icons/icon-512.png", "/icons/icon-maskable-512.png"] {
            let a = asset(icon).unwrap();
            assert_eq!((a.content_type, &a.bytes[1..4]), ("image/png", &b"PNG"[..]), "{icon}");
        }
    }

    #[test]
    fn the_embedded_shell_is_signed_under_the_bridges_key() {
        let bridge = Identity::generate();
        let signature = sign_shell(&bridge);
        let digest = app_code::verify_shell(&bridge.public(), &signature).unwrap();
        assert_eq!(digest, shell_digest());
    }

    #[test]
    fn the_csp_lets_the_worker_and_the_manifest_come_from_this_origin_only() {
        assert!(CONTENT_SECURITY_POLICY.contains("worker-src 'self'"));
        assert!(CONTENT_SECURITY_POLICY.contains("manifest-src 'self'"));
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
        // WebSockets to this origin only ('self' covers ws:/wss: of the same host, CSP 3).
        assert!(CONTENT_SECURITY_POLICY.contains("connect-src 'self';"));
        assert!(!CONTENT_SECURITY_POLICY.contains("ws:"));
    }
}
