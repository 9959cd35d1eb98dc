//! Web Push sending: wake a phone or browser whose client is not connected.
//!
//! # Layering
//!
//! The relay never sees notification text. What it pushes is an opaque payload the bridge has
//! already sealed end to end for the device (the same sealing as every routed envelope); the
//! relay only wraps those bytes in the two layers the Web Push standards require:
//!
//! 1. **Message encryption** (RFC 8291, [`encrypt`]/[`seal`]): the sealed payload is encrypted
//!    again to the browser's subscription keys (`p256dh`, `auth`) with the RFC 8188 `aes128gcm`
//!    content coding, so the push service in between (Google, Mozilla, Apple) learns nothing
//!    but the size. The device's service worker gets the sealed payload back from the browser
//!    and opens it with its end-to-end keys.
//! 2. **VAPID** (RFC 8292, [`VapidKey`]): an ES256 JWT in the `Authorization` header tells the
//!    push service which application server is sending; browsers subscribed with the relay's
//!    public key, so pushes signed by anyone else are refused.
//!
//! [`PushSender`] puts both on the wire: one HTTP/1.1 `POST` per push, over TLS for `https://`
//! endpoints (webpki roots), with every read bounded and the whole exchange under a timeout.
//! It connects only to public addresses unless its [`EndpointPolicy`] admits the host (the
//! address checked is the one connected to), and never follows a redirect.
//! Its [`PushOutcome`] tells the caller whether the push was accepted, whether the
//! subscription is gone for good (delete it) or whether to try again later.
//!
//! [`decrypt`] is the receiving side of layer 1, for tests and local test receivers.

mod ece;
mod error;
mod guard;
mod http;
mod vapid;

pub use ece::{CryptoError, MAX_PLAINTEXT_LEN, RECORD_SIZE, SubscriptionKeys, decrypt, encrypt, seal};
pub use error::PushError;
pub use guard::{AllowedHost, EndpointPolicy, non_public};
pub use vapid::VapidKey;

use http::{Endpoint, Scheme};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

/// How long a VAPID token stays valid (RFC 8292 §2: at most 24 hours).
const VAPID_TOKEN_LIFETIME_SECS: u64 = 12 * 60 * 60;
/// How much of an error response's body is kept for the error message.
const DETAIL_LEN: usize = 200;

/// A browser's push subscription: where to `POST` and the keys to encrypt to.
///
/// Serialized flat (`{"endpoint", "p256dh", "auth"}`); deserializes from that or from the
/// browser's `PushSubscription.toJSON()` shape (`{"endpoint", "keys": {"p256dh", "auth"}}`,
/// other members such as `expirationTime` ignored).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SubscriptionWire")]
pub struct Subscription {
    /// The push resource URL the push service handed the browser (a capability: whoever holds
    /// it and the VAPID key can wake the device).
    pub endpoint: String,
    /// The browser's ECDH public key: base64url of the uncompressed 65-octet P-256 point.
    pub p256dh: String,
    /// The browser's authentication secret: base64url of 16 octets.
    pub auth: String,
}

/// Either JSON shape of a subscription.
#[derive(Deserialize)]
struct SubscriptionWire {
    endpoint: String,
    p256dh: Option<String>,
    auth: Option<String>,
    keys: Option<WireKeys>,
}

#[derive(Deserialize)]
struct WireKeys {
    p256dh: String,
    auth: String,
}

impl TryFrom<SubscriptionWire> for Subscription {
    type Error = &'static str;

    fn try_from(wire: SubscriptionWire) -> Result<Self, Self::Error> {
        let (p256dh, auth) = match (wire.p256dh, wire.auth, wire.keys) {
            (Some(p256dh), Some(auth), None) => (p256dh, auth),
            (None, None, Some(keys)) => (keys.p256dh, keys.auth),
            (None, None, None) => return Err("push subscription has no keys"),
            (_, _, Some(_)) => return Err("push subscription has both `keys` and top-level `p256dh`/`auth`"),
            _ => return Err("push subscription needs both `p256dh` and `auth`"),
        };
        Ok(Self { endpoint: wire.endpoint, p256dh, auth })
    }
}

impl Subscription {
    /// Decodes the keys.
    pub fn keys(&self) -> Result<SubscriptionKeys, CryptoError> {
        SubscriptionKeys::from_base64url(&self.p256dh, &self.auth)
    }

    /// Checks the endpoint URL and the keys without sending anything: what to run before
    /// storing a subscription a client registers.
    pub fn validate(&self) -> Result<(), PushError> {
        let endpoint = Endpoint::parse(&self.endpoint).map_err(|reason| PushError::InvalidEndpoint { reason })?;
        self.keys().map_err(|source| PushError::Crypto { host: endpoint.authority, source })?;
        Ok(())
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The endpoint is a capability and `auth` a secret: show where, not what.
        let host = Endpoint::parse(&self.endpoint).map(|e| e.origin()).unwrap_or_else(|_| "<invalid>".to_owned());
        f.debug_struct("Subscription").field("endpoint", &host).field("p256dh", &self.p256dh).finish_non_exhaustive()
    }
}

/// The `Urgency` header (RFC 8030 §5.3): lets the push service save the device's battery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Urgency {
    /// Deliver only on power and Wi-Fi.
    VeryLow,
    /// Deliver on power or Wi-Fi.
    Low,
    /// Deliver unless the battery is low.
    #[default]
    Normal,
    /// Deliver now: a permission request waiting on the user.
    High,
}

impl Urgency {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Urgency::VeryLow => "very-low",
            Urgency::Low => "low",
            Urgency::Normal => "normal",
            Urgency::High => "high",
        }
    }
}

/// What the push service did with a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushOutcome {
    /// Accepted for delivery (any 2xx; push services answer 201).
    Delivered {
        /// The HTTP status.
        status: u16,
    },
    /// The subscription no longer exists (404 or 410): delete it and stop pushing to it.
    Gone {
        /// The HTTP status.
        status: u16,
    },
    /// Overloaded or failing (429 or 5xx): try again later, not before `retry_after` if given.
    Retryable {
        /// The HTTP status.
        status: u16,
        /// The `Retry-After` header, delta-seconds or an HTTP date turned into a wait.
        retry_after: Option<Duration>,
    },
}

/// Sends Web Push messages signed with the relay's VAPID key.
#[derive(Clone)]
pub struct PushSender {
    vapid: VapidKey,
    subject: String,
    timeout: Duration,
    allow_http: bool,
    policy: EndpointPolicy,
    tls: TlsConnector,
}

impl fmt::Debug for PushSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushSender")
            .field("vapid", &self.vapid)
            .field("subject", &self.subject)
            .field("timeout", &self.timeout)
            .field("allow_http", &self.allow_http)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl PushSender {
    /// The default bound on one push exchange.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

    /// A sender signing with `vapid` and naming `subject` (a `mailto:` or `https://` URL where
    /// push services can reach the relay's operator). Only `https://` endpoints are allowed
    /// until [`Self::allow_plain_http`] says otherwise.
    pub fn new(vapid: VapidKey, subject: impl Into<String>) -> Result<Self, PushError> {
        let subject = subject.into();
        vapid::check_subject(&subject)?;
        let roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        let config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(PushError::TlsConfig)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            vapid,
            subject,
            timeout: Self::DEFAULT_TIMEOUT,
            allow_http: false,
            policy: EndpointPolicy::default(),
            tls: TlsConnector::from(Arc::new(config)),
        })
    }

    /// Bounds each push exchange (connect, TLS handshake, request and response) by `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Allows plain `http://` endpoints: for local test receivers only, since the relay would
    /// otherwise `POST` wherever a client's subscription points.
    pub fn allow_plain_http(mut self, allow: bool) -> Self {
        self.allow_http = allow;
        self
    }

    /// Which endpoints may be contacted: public addresses only by default; `policy` may admit
    /// named hosts whatever they resolve to.
    pub fn with_policy(mut self, policy: EndpointPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The endpoint policy, for checking a subscription before storing it.
    pub fn policy(&self) -> &EndpointPolicy {
        &self.policy
    }

    /// The VAPID public key (base64url, uncompressed point) clients subscribe with as their
    /// `applicationServerKey`.
    pub fn vapid_public_key(&self) -> String {
        self.vapid.public_key_base64url()
    }

    /// Encrypts `payload` (an already end-to-end-sealed message, at most
    /// [`MAX_PLAINTEXT_LEN`] bytes) to `subscription` and `POST`s it to its endpoint with a
    /// `TTL` of `ttl_secs` and the given urgency.
    ///
    /// Statuses that say something about the subscription or the service's load come back as
    /// a [`PushOutcome`]; every other failure is a [`PushError`].
    pub async fn send(
        &self,
        subscription: &Subscription,
        payload: &[u8],
        ttl_secs: u32,
        urgency: Urgency,
    ) -> Result<PushOutcome, PushError> {
        let endpoint =
            Endpoint::parse(&subscription.endpoint).map_err(|reason| PushError::InvalidEndpoint { reason })?;
        let host = endpoint.authority.clone();
        if endpoint.scheme == Scheme::Http && !self.allow_http {
            return Err(PushError::InsecureEndpoint { host });
        }
        let crypto = |source| PushError::Crypto { host: host.clone(), source };
        let keys = subscription.keys().map_err(crypto)?;
        let body = seal(&keys, payload).map_err(crypto)?;
        let expires_at = http::unix_now() + VAPID_TOKEN_LIFETIME_SECS;
        let authorization = self.vapid.authorization_for(&endpoint, &self.subject, expires_at);
        let ttl = ttl_secs.to_string();
        let request = http::post_request(
            &endpoint,
            &[
                ("TTL", &ttl),
                ("Urgency", urgency.as_str()),
                ("Authorization", &authorization),
                ("Content-Encoding", "aes128gcm"),
                ("Content-Type", "application/octet-stream"),
            ],
            &body,
        );

        let response = tokio::time::timeout(self.timeout, self.exchange(&endpoint, &request))
            .await
            .map_err(|_| PushError::Timeout { host: host.clone(), timeout: self.timeout })??;
        let outcome = classify(&host, response);
        match &outcome {
            Ok(outcome) => tracing::debug!(%host, ?outcome, bytes = body.len(), "web push answered"),
            Err(error) => tracing::debug!(%host, %error, "web push refused"),
        }
        outcome
    }

    /// Resolves the host, keeps the addresses the policy allows, connects to the first that
    /// answers (TLS for `https`), writes the request, reads the response. The address
    /// checked is the address connected to: a name that resolves elsewhere later (DNS
    /// rebinding) is checked again on every push.
    async fn exchange(&self, endpoint: &Endpoint, request: &[u8]) -> Result<http::Response, PushError> {
        let host = endpoint.authority.as_str();
        let addrs = self.policy.resolve(endpoint).await?;
        let mut last = None;
        let mut connected = None;
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(tcp) => {
                    connected = Some(tcp);
                    break;
                }
                Err(source) => last = Some(source),
            }
        }
        let tcp = match (connected, last) {
            (Some(tcp), _) => tcp,
            (None, source) => {
                let source = source.unwrap_or_else(|| std::io::Error::other("no address to connect to"));
                return Err(PushError::Connect { host: host.to_owned(), source });
            }
        };
        // Only latency is at stake; a refusal changes nothing.
        let _ = tcp.set_nodelay(true);
        match endpoint.scheme {
            Scheme::Http => http::exchange(tcp, request, host).await,
            Scheme::Https => {
                let name = ServerName::try_from(endpoint.host.clone())
                    .map_err(|_| PushError::InvalidEndpoint { reason: "host is not a valid TLS server name" })?;
                let tls = self
                    .tls
                    .connect(name, tcp)
                    .await
                    .map_err(|source| PushError::Tls { host: host.to_owned(), source })?;
                http::exchange(tls, request, host).await
            }
        }
    }
}

/// Maps a response to an outcome or a rejection.
fn classify(host: &str, response: http::Response) -> Result<PushOutcome, PushError> {
    let status = response.status;
    match status {
        200..=299 => Ok(PushOutcome::Delivered { status }),
        404 | 410 => Ok(PushOutcome::Gone { status }),
        429 | 500..=599 => Ok(PushOutcome::Retryable { status, retry_after: response.retry_after }),
        _ => {
            let detail = response
                .body
                .iter()
                .take(DETAIL_LEN)
                .map(|&b| if b.is_ascii_graphic() || b == b' ' { char::from(b) } else { ' ' })
                .collect::<String>()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            Err(PushError::Rejected { host: host.to_owned(), status, detail })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P256DH: &str = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
    const AUTH: &str = "BTBZMqHH6r4Tts7J_aSIgg";

    #[test]
    fn subscriptions_deserialize_from_both_shapes() {
        let browser = serde_json::json!({
            "endpoint": "https://push.example/x",
            "expirationTime": null,
            "keys": { "p256dh": P256DH, "auth": AUTH },
        })
        .to_string();
        let flat = format!(r#"{{"endpoint":"https://push.example/x","p256dh":"{P256DH}","auth":"{AUTH}"}}"#);
        let a: Subscription = serde_json::from_str(&browser).unwrap();
        let b: Subscription = serde_json::from_str(&flat).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.p256dh, P256DH);
        a.validate().unwrap();
        // Serialization is the flat shape, and reads back.
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json, serde_json::json!({"endpoint": "https://push.example/x", "p256dh": P256DH, "auth": AUTH}));
        assert_eq!(serde_json::from_value::<Subscription>(json).unwrap(), a);

        for bad in [
            r#"{"endpoint":"https://push.example/x"}"#.to_owned(),
            format!(r#"{{"endpoint":"https://push.example/x","p256dh":"{P256DH}"}}"#),
            serde_json::json!({
                "endpoint": "e",
                "p256dh": P256DH,
                "auth": AUTH,
                "keys": { "p256dh": P256DH, "auth": AUTH },
            })
            .to_string(),
            r#"{"keys":{"p256dh":"a","auth":"b"}}"#.to_owned(),
        ] {
            assert!(serde_json::from_str::<Subscription>(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn validation_and_debug() {
        let sub = Subscription {
            endpoint: "https://push.example/secret-token".into(),
            p256dh: P256DH.into(),
            auth: AUTH.into(),
        };
        let shown = format!("{sub:?}");
        assert!(shown.contains("https://push.example") && !shown.contains("secret-token") && !shown.contains(AUTH));
        let bad_endpoint = Subscription { endpoint: "mailto:x".into(), ..sub.clone() };
        assert!(matches!(bad_endpoint.validate(), Err(PushError::InvalidEndpoint { .. })));
        let bad_keys = Subscription { auth: "AAAA".into(), ..sub };
        let err = bad_keys.validate().unwrap_err();
        assert!(matches!(&err, PushError::Crypto { host, .. } if host == "push.example"), "{err}");
    }

    #[test]
    fn urgency_values() {
        assert_eq!(Urgency::default(), Urgency::Normal);
        assert_eq!(
            [Urgency::VeryLow, Urgency::Low, Urgency::Normal, Urgency::High].map(Urgency::as_str),
            ["very-low", "low", "normal", "high"]
        );
        assert_eq!(serde_json::to_string(&Urgency::VeryLow).unwrap(), r#""very-low""#);
    }

    #[test]
    fn statuses_are_classified() {
        let response = |status, body: &[u8]| http::Response { status, retry_after: None, body: body.to_vec() };
        assert_eq!(classify("h", response(201, b"")).unwrap(), PushOutcome::Delivered { status: 201 });
        assert_eq!(classify("h", response(202, b"")).unwrap(), PushOutcome::Delivered { status: 202 });
        assert_eq!(classify("h", response(410, b"")).unwrap(), PushOutcome::Gone { status: 410 });
        assert_eq!(classify("h", response(404, b"")).unwrap(), PushOutcome::Gone { status: 404 });
        assert_eq!(
            classify("h", response(503, b"")).unwrap(),
            PushOutcome::Retryable { status: 503, retry_after: None }
        );
        let err = classify("h", response(403, b"invalid\r\nJWT \x00 token")).unwrap_err();
        assert!(matches!(&err, PushError::Rejected { status: 403, detail, .. } if detail == "invalid JWT token"));
        assert_eq!(err.to_string(), "push to h refused with HTTP 403: invalid JWT token");
        assert_eq!(classify("h", response(301, b"")).unwrap_err().to_string(), "push to h refused with HTTP 301");
    }

    #[tokio::test]
    async fn plain_http_and_oversize_payloads_are_refused_before_connecting() {
        let sender = PushSender::new(VapidKey::generate(), "mailto:ops@example.org").unwrap();
        // Port 9 on loopback: nothing is contacted, the checks come first.
        let sub = Subscription { endpoint: "http://127.0.0.1:9/x".into(), p256dh: P256DH.into(), auth: AUTH.into() };
        let err = sender.send(&sub, b"x", 60, Urgency::High).await.unwrap_err();
        assert!(matches!(&err, PushError::InsecureEndpoint { host } if host == "127.0.0.1:9"), "{err}");
        let sender = sender.allow_plain_http(true);
        let err = sender.send(&sub, &[0; MAX_PLAINTEXT_LEN + 1], 60, Urgency::High).await.unwrap_err();
        assert!(matches!(err, PushError::Crypto { source: CryptoError::PlaintextTooLarge { .. }, .. }), "{err}");
        assert!(matches!(PushSender::new(VapidKey::generate(), "ops"), Err(PushError::InvalidSubject { .. })));
    }
}
