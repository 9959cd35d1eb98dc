//! The push sender against a local push service: a tiny HTTP server on loopback that checks
//! the VAPID token the way a push service does, decrypts the `aes128gcm` body with the
//! subscription keys the test made, and answers what each test needs.

mod support;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::SecretKey;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::user_agent::UserAgent;
use terminull_relay::webpush::{
    CryptoError, EndpointPolicy, MAX_PLAINTEXT_LEN, PushError, PushOutcome, PushSender, Subscription, Urgency,
    VapidKey, decrypt,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const SUBJECT: &str = "mailto:ops@terminull.test";

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn unb64(text: &str) -> Result<Vec<u8>, String> {
    URL_SAFE_NO_PAD.decode(text).map_err(|e| format!("base64url {text:?}: {e}"))
}

/// The subscription as the browser's `PushSubscription.toJSON()` would give it.
fn subscription(ua: &UserAgent, endpoint: &str) -> Subscription {
    let json = serde_json::json!({
        "endpoint": endpoint,
        "expirationTime": null,
        "keys": { "p256dh": ua.p256dh(), "auth": b64(&ua.auth) },
    });
    serde_json::from_value(json).unwrap()
}

/// What the receiver answers.
enum Reply {
    /// Check VAPID and decrypt; answer this status with these extra header lines (a failed
    /// check answers 400 and reports the failure).
    Checked(u16, &'static str),
    /// Answer these bytes verbatim without checking anything, then close.
    Raw(Vec<u8>),
    /// Read the request and never answer.
    Silent,
}

/// A request the receiver accepted.
#[derive(Debug)]
struct Received {
    headers: Vec<(String, String)>,
    plaintext: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A one-request push service on 127.0.0.1, port 0.
struct Receiver {
    endpoint: String,
    task: JoinHandle<Result<Received, String>>,
}

impl Receiver {
    async fn start(reply: Reply, ua: &UserAgent, vapid_public: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let origin = format!("http://{addr}");
        let endpoint = format!("{origin}/wpush/v2/opaque-token?x=1");
        let ua_private = ua.private.clone();
        let auth = ua.auth;
        let task = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
            let (head, body) = read_request(&mut stream).await?;
            match reply {
                Reply::Raw(bytes) => {
                    stream.write_all(&bytes).await.map_err(|e| e.to_string())?;
                    stream.shutdown().await.map_err(|e| e.to_string())?;
                    Ok(Received { headers: head, plaintext: Vec::new() })
                }
                Reply::Silent => {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Err("the sender never gave up".into())
                }
                Reply::Checked(status, extra) => {
                    let checked = check_request(&head, &body, &origin, &vapid_public, &ua_private, &auth);
                    let (status, reason) = match &checked {
                        Ok(_) => (status, String::new()),
                        Err(reason) => (400, reason.clone()),
                    };
                    let response = format!(
                        "HTTP/1.1 {status} X\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{reason}",
                        reason.len()
                    );
                    stream.write_all(response.as_bytes()).await.map_err(|e| e.to_string())?;
                    stream.shutdown().await.map_err(|e| e.to_string())?;
                    checked.map(|plaintext| Received { headers: head, plaintext })
                }
            }
        });
        Self { endpoint, task }
    }

    async fn received(self) -> Received {
        match tokio::time::timeout(Duration::from_secs(10), self.task).await {
            Ok(Ok(Ok(received))) => received,
            Ok(Ok(Err(reason))) => panic!("receiver refused the request: {reason}"),
            Ok(Err(join)) => panic!("receiver task failed: {join}"),
            Err(_) => panic!("receiver did not finish"),
        }
    }
}

/// Reads one request: headers (lowercased names) and a `Content-Length` body, both bounded.
async fn read_request(stream: &mut TcpStream) -> Result<(Vec<(String, String)>, Vec<u8>), String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > 16 * 1024 {
            return Err("request head too large".into());
        }
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed before the end of the head".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end - 4]).map_err(|_| "head not UTF-8")?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut headers = vec![(":request".to_owned(), request_line.to_owned())];
    for line in lines {
        let (name, value) = line.split_once(':').ok_or_else(|| format!("bad header line {line:?}"))?;
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .ok_or("no Content-Length")?
        .1
        .parse()
        .map_err(|_| "bad Content-Length")?;
    if length > 8192 {
        return Err("body too large".into());
    }
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed before the end of the body".into());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    if body.len() != length {
        return Err("more body than Content-Length".into());
    }
    Ok((headers, body))
}

/// What a push service checks, then what the browser does: verify the VAPID token against its
/// `k`, check its claims, decrypt the body.
fn check_request(
    headers: &[(String, String)],
    body: &[u8],
    origin: &str,
    vapid_public: &str,
    ua_private: &SecretKey,
    auth: &[u8; 16],
) -> Result<Vec<u8>, String> {
    let header = |name: &str| {
        headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str()).ok_or(format!("no {name} header"))
    };
    if header("content-encoding")? != "aes128gcm" {
        return Err("Content-Encoding is not aes128gcm".into());
    }
    let authorization = header("authorization")?;
    let rest = authorization.strip_prefix("vapid t=").ok_or("Authorization is not `vapid t=`")?;
    let (jwt, k) = rest.split_once(", k=").ok_or("Authorization has no `, k=`")?;
    if k != vapid_public {
        return Err("k= is not the sender's VAPID key".into());
    }
    let mut parts = jwt.split('.');
    let (Some(jose), Some(claims), Some(signature), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("JWT does not have three parts".into());
    };
    let key = VerifyingKey::from_sec1_bytes(&unb64(k)?).map_err(|_| "k= is not a P-256 point")?;
    let signature = Signature::from_slice(&unb64(signature)?).map_err(|_| "signature is not 64 octets r||s")?;
    key.verify(format!("{jose}.{claims}").as_bytes(), &signature).map_err(|_| "ES256 signature does not verify")?;

    let jose: serde_json::Value = serde_json::from_slice(&unb64(jose)?).map_err(|e| e.to_string())?;
    if jose != serde_json::json!({"typ": "JWT", "alg": "ES256"}) {
        return Err(format!("JOSE header {jose}"));
    }
    let claims: serde_json::Value = serde_json::from_slice(&unb64(claims)?).map_err(|e| e.to_string())?;
    if claims["aud"] != origin {
        return Err(format!("aud {} is not {origin}", claims["aud"]));
    }
    if claims["sub"] != SUBJECT {
        return Err(format!("sub {}", claims["sub"]));
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let exp = claims["exp"].as_u64().ok_or("exp is not a number")?;
    if exp <= now || exp > now + 24 * 3600 {
        return Err(format!("exp {exp} is not within 24 hours of {now}"));
    }
    if body.len() > 4096 {
        return Err("body exceeds 4096 octets".into());
    }
    decrypt(ua_private, auth, body).map_err(|e| format!("decrypt: {e}"))
}

/// A sender for the local receivers: plain http allowed, and 127.0.0.1 admitted as an
/// operator would admit a self-hosted push service (loopback is refused otherwise).
fn sender() -> PushSender {
    PushSender::new(VapidKey::generate(), SUBJECT)
        .unwrap()
        .allow_plain_http(true)
        .with_timeout(Duration::from_secs(5))
        .with_policy(EndpointPolicy::new(vec!["127.0.0.1".parse().unwrap()]))
}

#[tokio::test]
async fn a_push_is_verified_decrypted_and_delivered() {
    let ua = UserAgent::new();
    let sender = sender();
    let receiver = Receiver::start(Reply::Checked(201, ""), &ua, sender.vapid_public_key()).await;
    let subscription = subscription(&ua, &receiver.endpoint);
    // Stands in for an envelope the bridge sealed end to end: opaque bytes, any values.
    let sealed: Vec<u8> = (0..1500u32).map(|i| (i * 7 % 251) as u8).collect();

    let outcome = sender.send(&subscription, &sealed, 60, Urgency::High).await.unwrap();
    assert_eq!(outcome, PushOutcome::Delivered { status: 201 });

    let received = receiver.received().await;
    assert_eq!(received.plaintext, sealed);
    assert_eq!(received.header(":request"), Some("POST /wpush/v2/opaque-token?x=1 HTTP/1.1"));
    let host = receiver_host(&subscription);
    assert_eq!(received.header("host"), Some(host.as_str()));
    assert_eq!(received.header("ttl"), Some("60"));
    assert_eq!(received.header("urgency"), Some("high"));
    assert_eq!(received.header("content-type"), Some("application/octet-stream"));
    assert_eq!(received.header("connection"), Some("close"));
    assert_eq!(received.header("content-length"), Some((86 + sealed.len() + 1 + 16).to_string().as_str()));
}

#[tokio::test]
async fn a_maximal_and_an_empty_payload_round_trip() {
    for payload in [vec![0xa5; MAX_PLAINTEXT_LEN], Vec::new()] {
        let ua = UserAgent::new();
        let sender = sender();
        let receiver = Receiver::start(Reply::Checked(202, ""), &ua, sender.vapid_public_key()).await;
        let outcome = sender.send(&subscription(&ua, &receiver.endpoint), &payload, 0, Urgency::Normal).await.unwrap();
        assert_eq!(outcome, PushOutcome::Delivered { status: 202 });
        let received = receiver.received().await;
        assert_eq!(received.plaintext, payload);
        assert_eq!(received.header("urgency"), Some("normal"));
    }
}

#[tokio::test]
async fn gone_subscriptions_are_reported_as_gone() {
    for status in [410, 404] {
        let ua = UserAgent::new();
        let sender = sender();
        let receiver = Receiver::start(Reply::Checked(status, ""), &ua, sender.vapid_public_key()).await;
        let outcome = sender.send(&subscription(&ua, &receiver.endpoint), b"sealed", 60, Urgency::Low).await.unwrap();
        assert_eq!(outcome, PushOutcome::Gone { status });
        receiver.received().await;
    }
}

#[tokio::test]
async fn overload_is_retryable_with_retry_after() {
    let ua = UserAgent::new();
    let sender = sender();
    let receiver = Receiver::start(Reply::Checked(429, "Retry-After: 120\r\n"), &ua, sender.vapid_public_key()).await;
    let outcome = sender.send(&subscription(&ua, &receiver.endpoint), b"sealed", 60, Urgency::VeryLow).await.unwrap();
    assert_eq!(outcome, PushOutcome::Retryable { status: 429, retry_after: Some(Duration::from_secs(120)) });
    receiver.received().await;

    let ua = UserAgent::new();
    let receiver = Receiver::start(Reply::Checked(503, ""), &ua, sender.vapid_public_key()).await;
    let outcome = sender.send(&subscription(&ua, &receiver.endpoint), b"sealed", 60, Urgency::VeryLow).await.unwrap();
    assert_eq!(outcome, PushOutcome::Retryable { status: 503, retry_after: None });
    receiver.received().await;
}

#[tokio::test]
async fn a_refusal_is_a_rejected_error_with_the_services_reason() {
    let ua = UserAgent::new();
    let sender = sender();
    let body = "VAPID token expired";
    let reply = format!("HTTP/1.1 403 Forbidden\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    let receiver = Receiver::start(Reply::Raw(reply.into_bytes()), &ua, sender.vapid_public_key()).await;
    let subscription = subscription(&ua, &receiver.endpoint);
    let err = sender.send(&subscription, b"sealed", 60, Urgency::High).await.unwrap_err();
    let host = receiver_host(&subscription);
    assert!(
        matches!(&err, PushError::Rejected { host: h, status: 403, detail } if *h == host && detail == body),
        "{err:?}"
    );
    assert!(err.to_string().contains(&host), "{err}");
    receiver.received().await;
}

#[tokio::test]
async fn garbage_responses_are_typed_errors() {
    let cases: [(&[u8], &str); 4] = [
        (b"this is not http at all\r\n\r\n", "not an HTTP/1.x status line"),
        (b"", "connection closed without a response"),
        (b"HTTP/1.1 201 Created\r\nContent-Le", "connection closed inside the response headers"),
        (b"HTTP/1.1 201 Created\r\nContent-Length: nope\r\n\r\n", "invalid Content-Length"),
    ];
    for (reply, expected) in cases {
        let ua = UserAgent::new();
        let sender = sender();
        let receiver = Receiver::start(Reply::Raw(reply.to_vec()), &ua, sender.vapid_public_key()).await;
        let subscription = subscription(&ua, &receiver.endpoint);
        let err = sender.send(&subscription, b"sealed", 60, Urgency::High).await.unwrap_err();
        match &err {
            PushError::MalformedResponse { host, reason } => {
                assert_eq!(*host, receiver_host(&subscription));
                assert_eq!(*reason, expected);
            }
            other => panic!("{:?}: expected a malformed response, got {other:?}", String::from_utf8_lossy(reply)),
        }
        receiver.received().await;
    }
}

#[tokio::test]
async fn oversize_responses_are_typed_errors() {
    let mut huge_head = b"HTTP/1.1 201 Created\r\nX-Filler: ".to_vec();
    huge_head.resize(huge_head.len() + 20 * 1024, b'f');
    huge_head.extend_from_slice(b"\r\n\r\n");
    let mut huge_body = b"HTTP/1.1 201 Created\r\nContent-Length: 100000\r\n\r\n".to_vec();
    huge_body.resize(huge_body.len() + 100_000, b'b');
    let mut unframed_body = b"HTTP/1.1 500 Internal\r\n\r\n".to_vec();
    unframed_body.resize(unframed_body.len() + 70_000, b'b');

    for (reply, what) in [(huge_head, "headers"), (huge_body, "body"), (unframed_body, "body")] {
        let ua = UserAgent::new();
        let sender = sender();
        let receiver = Receiver::start(Reply::Raw(reply), &ua, sender.vapid_public_key()).await;
        let err = sender.send(&subscription(&ua, &receiver.endpoint), b"sealed", 60, Urgency::High).await.unwrap_err();
        assert!(matches!(&err, PushError::ResponseTooLarge { what: w, .. } if *w == what), "{err:?}");
        // The receiver may see its write cut short by the sender hanging up; either is fine.
        let _ = tokio::time::timeout(Duration::from_secs(10), receiver.task).await;
    }
}

#[tokio::test]
async fn a_silent_service_times_out() {
    let ua = UserAgent::new();
    let sender = sender().with_timeout(Duration::from_millis(300));
    let receiver = Receiver::start(Reply::Silent, &ua, sender.vapid_public_key()).await;
    let subscription = subscription(&ua, &receiver.endpoint);
    let err = sender.send(&subscription, b"sealed", 60, Urgency::High).await.unwrap_err();
    let expected_host = receiver_host(&subscription);
    assert!(
        matches!(&err, PushError::Timeout { host, timeout }
            if *host == expected_host && *timeout == Duration::from_millis(300)),
        "{err:?}"
    );
    receiver.task.abort();
}

#[tokio::test]
async fn connection_failures_and_bad_subscriptions_are_typed_errors() {
    let ua = UserAgent::new();
    let sender = sender();
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let subscription = subscription(&ua, &format!("http://127.0.0.1:{port}/x"));
    let err = sender.send(&subscription, b"sealed", 60, Urgency::High).await.unwrap_err();
    assert!(matches!(&err, PushError::Connect { host, .. } if *host == format!("127.0.0.1:{port}")), "{err:?}");

    let mut bad_keys = subscription.clone();
    bad_keys.p256dh = b64(&[4u8; 65]);
    let err = sender.send(&bad_keys, b"sealed", 60, Urgency::High).await.unwrap_err();
    assert!(
        matches!(err, PushError::Crypto { source: CryptoError::InvalidKey { field: "p256dh", .. }, .. }),
        "{err:?}"
    );

    let err = sender.send(&subscription, &[0; MAX_PLAINTEXT_LEN + 1], 60, Urgency::High).await.unwrap_err();
    assert!(matches!(err, PushError::Crypto { source: CryptoError::PlaintextTooLarge { .. }, .. }), "{err:?}");

    let strict = PushSender::new(VapidKey::generate(), SUBJECT).unwrap();
    let err = strict.send(&subscription, b"sealed", 60, Urgency::High).await.unwrap_err();
    assert!(matches!(err, PushError::InsecureEndpoint { .. }), "{err:?}");
}

#[tokio::test]
async fn https_endpoints_go_through_tls() {
    // A plain-text server behind an https:// endpoint: the TLS handshake must fail, typed.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut hello = [0u8; 512];
        let _ = stream.read(&mut hello).await;
        let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n").await;
    });
    let ua = UserAgent::new();
    let subscription = subscription(&ua, &format!("https://{addr}/x"));
    let err = sender().send(&subscription, b"sealed", 60, Urgency::High).await.unwrap_err();
    assert!(matches!(&err, PushError::Tls { host, .. } if *host == addr.to_string()), "{err:?}");
    server.await.unwrap();
}

/// `127.0.0.1:<port>` of a receiver subscription.
fn receiver_host(subscription: &Subscription) -> String {
    let rest = subscription.endpoint.strip_prefix("http://").unwrap();
    rest.split('/').next().unwrap().to_owned()
}
