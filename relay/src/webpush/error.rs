//! Why a Web Push delivery failed.

use std::io;
use std::time::Duration;

use tokio_rustls::rustls;

use super::ece::CryptoError;

/// Why a push could not be sent or was refused. Every error names the endpoint's host (never
/// the full endpoint URL, which is a capability).
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The endpoint is not an acceptable absolute `https`/`http` URL.
    #[error("invalid push endpoint: {reason}")]
    InvalidEndpoint {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A plain `http://` endpoint and the sender was not told to allow those.
    #[error("push to {host}: plain http endpoints are not allowed")]
    InsecureEndpoint {
        /// The endpoint's host.
        host: String,
    },
    /// The VAPID subject is not a `mailto:` or `https:` URL.
    #[error("invalid VAPID subject: {reason}")]
    InvalidSubject {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The subscription keys are invalid or the payload is too large.
    #[error("push to {host}: {source}")]
    Crypto {
        /// The endpoint's host.
        host: String,
        /// The encryption error.
        #[source]
        source: CryptoError,
    },
    /// The endpoint's host is, or resolves only to, an address outside public unicast space
    /// (loopback, private, link-local…) and the operator did not admit the host.
    #[error(
        "push to {host}: {addr} is a {range} address; the relay only pushes to public hosts \
         (an operator admits a self-hosted push service with --push-allow-host)"
    )]
    ForbiddenAddress {
        /// The endpoint's host.
        host: String,
        /// The refused address (the first one, when the host resolves to several).
        addr: std::net::IpAddr,
        /// The range it is in, e.g. `loopback (127.0.0.0/8)`.
        range: &'static str,
    },
    /// The TLS client could not be configured.
    #[error("TLS client configuration: {0}")]
    TlsConfig(#[source] rustls::Error),
    /// Resolving the host or opening the TCP connection failed.
    #[error("push to {host}: connecting failed: {source}")]
    Connect {
        /// The endpoint's host.
        host: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The TLS handshake failed (including certificate verification).
    #[error("push to {host}: TLS handshake failed: {source}")]
    Tls {
        /// The endpoint's host.
        host: String,
        /// The I/O error carrying the TLS error.
        #[source]
        source: io::Error,
    },
    /// Writing the request or reading the response failed.
    #[error("push to {host}: {during} failed: {source}")]
    Io {
        /// The endpoint's host.
        host: String,
        /// `sending the request` or `reading the response`.
        during: &'static str,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The exchange (connect, TLS, request, response) took longer than the sender's timeout.
    #[error("push to {host}: no complete response within {timeout:?}")]
    Timeout {
        /// The endpoint's host.
        host: String,
        /// The timeout that ran out.
        timeout: Duration,
    },
    /// The response is not well-formed HTTP/1.1.
    #[error("push to {host}: malformed response: {reason}")]
    MalformedResponse {
        /// The endpoint's host.
        host: String,
        /// What was wrong.
        reason: &'static str,
    },
    /// The response headers or body exceed their bound.
    #[error("push to {host}: response {what} larger than {limit} bytes")]
    ResponseTooLarge {
        /// The endpoint's host.
        host: String,
        /// `headers` or `body`.
        what: &'static str,
        /// The bound that was exceeded.
        limit: usize,
    },
    /// The push service refused the push for a reason retrying will not fix (400, 401, 403,
    /// 413, a redirect…): a bad VAPID token, a payload too large, a misconfiguration.
    #[error("push to {host} refused with HTTP {status}{}", detail_suffix(.detail))]
    Rejected {
        /// The endpoint's host.
        host: String,
        /// The HTTP status.
        status: u16,
        /// The start of the response body, printable ASCII only, at most 200 characters.
        detail: String,
    },
}

/// `": detail"`, or nothing when the service said nothing.
fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() { String::new() } else { format!(": {detail}") }
}
