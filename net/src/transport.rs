//! Connections to a relay or a LAN server: `ws://`/`http://` over TCP, `wss://`/`https://`
//! over TLS (rustls with the webpki root store), a WebSocket on top, and a minimal
//! HTTP/1.1 request for the relay's JSON API.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// The largest WebSocket message accepted from the relay (the relay's default cap).
pub const MAX_MESSAGE: usize = 1 << 20;
/// The largest HTTP response accepted (headers and body together).
const MAX_HTTP_RESPONSE: usize = 256 * 1024;
/// How long connecting (TCP, TLS, WebSocket or HTTP exchange) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a connection failed. Each names the URL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The URL is not one this client can use.
    #[error("`{url}`: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// TCP or TLS failed.
    #[error("connecting to {url}: {source}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        source: std::io::Error,
    },
    /// The WebSocket handshake failed.
    #[error("WebSocket handshake with {url}: {detail}")]
    WebSocket {
        /// The URL.
        url: String,
        /// Why.
        detail: String,
    },
    /// The HTTP exchange failed or the answer is malformed.
    #[error("HTTP {url}: {detail}")]
    Http {
        /// The URL.
        url: String,
        /// Why.
        detail: String,
    },
    /// It took too long.
    #[error("{0}: timed out")]
    Timeout(String),
}

/// A parsed `ws`, `wss`, `http` or `https` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// TLS or not.
    pub tls: bool,
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
}

impl Endpoint {
    /// Parses `url`.
    pub fn parse(url: &str) -> Result<Self, NetError> {
        let bad = |reason| NetError::BadUrl { url: url.to_owned(), reason };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let tls = match scheme {
            "ws" | "http" => false,
            "wss" | "https" => true,
            _ => return Err(bad("the scheme must be ws, wss, http or https")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
                (h.to_owned(), p.parse().map_err(|_| bad("the port is not a number"))?)
            }
            _ => (authority.to_owned(), if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Self { tls, host: host.trim_matches(['[', ']']).to_owned(), port, path: path.to_owned() })
    }

    /// The same server's base URL with another scheme family: `http(s)://host:port`.
    pub fn http_base(&self) -> String {
        format!("{}://{}:{}", if self.tls { "https" } else { "http" }, self.host_for_url(), self.port)
    }

    /// The same server's base URL for WebSockets: `ws(s)://host:port`.
    pub fn ws_base(&self) -> String {
        format!("{}://{}:{}", if self.tls { "wss" } else { "ws" }, self.host_for_url(), self.port)
    }

    fn host_for_url(&self) -> String {
        if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() }
    }
}

/// A TCP stream, with or without TLS.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, std::io::Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Opens a TCP (and, for `wss`/`https`, TLS) connection to `url`'s server.
pub async fn connect(url: &str) -> Result<(Endpoint, Stream), NetError> {
    let endpoint = Endpoint::parse(url)?;
    let io = |source| NetError::Connect { url: url.to_owned(), source };
    let open = async {
        let tcp = TcpStream::connect((endpoint.host.as_str(), endpoint.port)).await.map_err(io)?;
        let _ = tcp.set_nodelay(true);
        if !endpoint.tls {
            return Ok(Stream::Plain(tcp));
        }
        let name = rustls::pki_types::ServerName::try_from(endpoint.host.clone())
            .map_err(|_| NetError::BadUrl { url: url.to_owned(), reason: "the host is not a valid TLS server name" })?;
        let connector = tokio_rustls::TlsConnector::from(tls_config().map_err(io)?);
        Ok(Stream::Tls(Box::new(connector.connect(name, tcp).await.map_err(io)?)))
    };
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, open).await.map_err(|_| NetError::Timeout(url.to_owned()))??;
    Ok((endpoint, stream))
}

/// Opens a WebSocket to `url`, accepting messages up to [`MAX_MESSAGE`].
pub async fn websocket(url: &str) -> Result<WebSocketStream<Stream>, NetError> {
    let (_, stream) = connect(url).await?;
    let config = WebSocketConfig::default().max_message_size(Some(MAX_MESSAGE)).max_frame_size(Some(MAX_MESSAGE));
    let handshake = tokio_tungstenite::client_async_with_config(url, stream, Some(config));
    let (ws, _) = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
        .await
        .map_err(|_| NetError::Timeout(url.to_owned()))?
        .map_err(|e| NetError::WebSocket { url: url.to_owned(), detail: e.to_string() })?;
    Ok(ws)
}

/// An HTTP response: status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

/// Sends one HTTP/1.1 request (`Connection: close`) with a JSON body, when given.
pub async fn request_json(
    method: &str,
    url: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<HttpResponse, NetError> {
    let http = |detail: String| NetError::Http { url: url.to_owned(), detail };
    let exchange = async {
        let (endpoint, mut stream) = connect(url).await?;
        let mut head = format!(
            "{method} {} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\nAccept: application/json\r\nUser-Agent: terminull\r\n",
            endpoint.path, endpoint.host, endpoint.port
        );
        if let Some(body) = body {
            head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let io = |e: std::io::Error| http(e.to_string());
        stream.write_all(head.as_bytes()).await.map_err(io)?;
        if let Some(body) = body {
            stream.write_all(body).await.map_err(io)?;
        }
        stream.flush().await.map_err(io)?;
        let mut raw = Vec::new();
        let mut limited = (&mut stream).take(MAX_HTTP_RESPONSE as u64 + 1);
        limited.read_to_end(&mut raw).await.map_err(io)?;
        if raw.len() > MAX_HTTP_RESPONSE {
            return Err(http(format!("the response is larger than {MAX_HTTP_RESPONSE} bytes")));
        }
        parse_response(&raw).map_err(|d| http(d.to_owned()))
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| NetError::Timeout(url.to_owned()))?
}

fn parse_response(raw: &[u8]) -> Result<HttpResponse, &'static str> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("no status line")?;
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or("malformed status line")?;
    let mut body = raw[split + 4..].to_vec();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                let len: usize = value.trim().parse().map_err(|_| "malformed Content-Length")?;
                if body.len() < len {
                    return Err("the body is shorter than its Content-Length");
                }
                body.truncate(len);
            } else if name == "transfer-encoding" && value.trim().eq_ignore_ascii_case("chunked") {
                body = dechunk(&body)?;
            }
        }
    }
    Ok(HttpResponse { status, body })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, &'static str> {
    let mut out = Vec::new();
    loop {
        let end = data.windows(2).position(|w| w == b"\r\n").ok_or("malformed chunk")?;
        let size_text = std::str::from_utf8(&data[..end]).map_err(|_| "malformed chunk")?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "malformed chunk")?;
        data = &data[end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            return Err("truncated chunk");
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_default_ports_and_paths() {
        let e = Endpoint::parse("wss://relay.example/v1/client?x=1").unwrap();
        assert_eq!((e.tls, e.host.as_str(), e.port, e.path.as_str()), (true, "relay.example", 443, "/v1/client?x=1"));
        let e = Endpoint::parse("ws://127.0.0.1:8477").unwrap();
        assert_eq!((e.port, e.path.as_str()), (8477, "/"));
        assert_eq!(e.http_base(), "http://127.0.0.1:8477");
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("ws://:80").is_err());
    }

    #[test]
    fn responses_parse_with_length_or_chunks_and_garbage_is_an_error() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
        let r =
            parse_response(b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!(r.body, b"abc");
        assert!(parse_response(b"garbage").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
    }
}
