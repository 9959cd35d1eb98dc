//! The smallest HTTP/1.1 client a push service needs: one `POST` per connection
//! (`Connection: close`), a status line and a few headers read back with bounded buffers.

use super::error::PushError;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Longest endpoint URL accepted (push services hand out a few hundred bytes).
const MAX_ENDPOINT_LEN: usize = 4096;
/// Cap on the response status line and headers.
pub(crate) const MAX_HEAD_LEN: usize = 16 * 1024;
/// Cap on the (decoded) response body.
pub(crate) const MAX_BODY_LEN: usize = 64 * 1024;
/// Extra room for chunk-size lines when the body is chunked.
const CHUNK_FRAMING_ALLOWANCE: usize = 16 * 1024;
/// How many `1xx` interim responses are skipped before giving up.
const MAX_INTERIM_RESPONSES: usize = 4;
const READ_CHUNK: usize = 8 * 1024;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    Http,
    Https,
}

/// A parsed push endpoint URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) scheme: Scheme,
    /// The host, lowercased, IPv6 literals without brackets.
    pub(crate) host: String,
    pub(crate) port: u16,
    /// `host[:port]` as it goes in the `Host` header and in the origin (default port omitted).
    pub(crate) authority: String,
    /// Path and query, never empty, starting with `/`.
    pub(crate) path: String,
}

impl Endpoint {
    /// Parses an absolute `http`/`https` URL. Refuses user info, non-ASCII, whitespace and
    /// control characters (so nothing from the URL can break the request line).
    pub(crate) fn parse(url: &str) -> Result<Self, &'static str> {
        if url.len() > MAX_ENDPOINT_LEN {
            return Err("longer than 4096 bytes");
        }
        if !url.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("contains whitespace, control or non-ASCII characters");
        }
        let (scheme, rest) = url.split_once("://").ok_or("not an absolute URL")?;
        let (scheme, default_port) = if scheme.eq_ignore_ascii_case("https") {
            (Scheme::Https, 443)
        } else if scheme.eq_ignore_ascii_case("http") {
            (Scheme::Http, 80)
        } else {
            return Err("scheme is neither https nor http");
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let (authority, path) = match rest.find(['/', '?']) {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err("user info is not allowed");
        }
        let (host, port, bracketed) = if let Some(inner) = authority.strip_prefix('[') {
            let (host, after) = inner.split_once(']').ok_or("unterminated IPv6 literal")?;
            if host.is_empty() || !host.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
                return Err("invalid IPv6 literal");
            }
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':').ok_or("junk after the IPv6 literal")?),
            };
            (host, port, true)
        } else {
            let (host, port) = match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            };
            if host.is_empty() {
                return Err("no host");
            }
            if !host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')) {
                return Err("invalid host name");
            }
            (host, port, false)
        };
        let port = match port {
            None => default_port,
            Some(text) => match text.parse::<u16>() {
                Ok(0) | Err(_) => return Err("invalid port"),
                Ok(port) => port,
            },
        };
        let host = host.to_ascii_lowercase();
        let mut authority = if bracketed { format!("[{host}]") } else { host.clone() };
        if port != default_port {
            authority.push_str(&format!(":{port}"));
        }
        let path = if path.starts_with('/') { path.to_owned() } else { format!("/{path}") };
        Ok(Self { scheme, host, port, authority, path })
    }

    /// The origin (RFC 6454 serialization): what the VAPID `aud` claim names.
    pub(crate) fn origin(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!("{scheme}://{}", self.authority)
    }
}

/// Builds a complete `POST` request: request line, `Host`, the given headers, `Content-Length`,
/// `Connection: close`, then the body. Header values must not contain CR or LF (the callers
/// pass fixed strings, numbers and base64url).
pub(crate) fn post_request(endpoint: &Endpoint, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("POST {} HTTP/1.1\r\nHost: {}\r\n", endpoint.path, endpoint.authority);
    for (name, value) in headers {
        debug_assert!(!value.contains(['\r', '\n']));
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\nUser-Agent: terminull-relay/{}\r\n\r\n",
        body.len(),
        env!("CARGO_PKG_VERSION")
    ));
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    request
}

/// A push service's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) body: Vec<u8>,
}

/// Writes `request` and reads one response.
pub(crate) async fn exchange<S>(mut stream: S, request: &[u8], host: &str) -> Result<Response, PushError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    stream.write_all(request).await.map_err(|source| io_error(host, "sending the request", source))?;
    stream.flush().await.map_err(|source| io_error(host, "sending the request", source))?;
    read_response(&mut stream, host).await
}

fn io_error(host: &str, during: &'static str, source: io::Error) -> PushError {
    PushError::Io { host: host.to_owned(), during, source }
}

fn malformed(host: &str, reason: &'static str) -> PushError {
    PushError::MalformedResponse { host: host.to_owned(), reason }
}

fn too_large(host: &str, what: &'static str, limit: usize) -> PushError {
    PushError::ResponseTooLarge { host: host.to_owned(), what, limit }
}

/// One read; a TLS peer that closes without `close_notify` counts as end of stream.
async fn read_some<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>, host: &str) -> Result<usize, PushError> {
    let mut chunk = [0u8; READ_CHUNK];
    match stream.read(&mut chunk).await {
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(n)
        }
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
        Err(source) => Err(io_error(host, "reading the response", source)),
    }
}

/// Reads a response: skips interim `1xx` responses, parses the status line and the headers
/// that matter, then reads the body by its framing.
pub(crate) async fn read_response<S: AsyncRead + Unpin>(stream: &mut S, host: &str) -> Result<Response, PushError> {
    let mut buf = Vec::with_capacity(READ_CHUNK);
    let mut interim = 0;
    loop {
        let head_len = loop {
            let window = &buf[..buf.len().min(MAX_HEAD_LEN)];
            if let Some(at) = window.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            if buf.len() >= MAX_HEAD_LEN {
                return Err(too_large(host, "headers", MAX_HEAD_LEN));
            }
            if read_some(stream, &mut buf, host).await? == 0 {
                let reason = if buf.is_empty() {
                    "connection closed without a response"
                } else {
                    "connection closed inside the response headers"
                };
                return Err(malformed(host, reason));
            }
        };
        let head = parse_head(&buf[..head_len - 4]).map_err(|reason| malformed(host, reason))?;
        buf.drain(..head_len);
        if (100..200).contains(&head.status) {
            interim += 1;
            if interim > MAX_INTERIM_RESPONSES {
                return Err(malformed(host, "too many interim responses"));
            }
            continue;
        }
        let body = read_body(stream, buf, &head, host).await?;
        return Ok(Response { status: head.status, retry_after: head.retry_after, body });
    }
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Head {
    status: u16,
    content_length: Option<usize>,
    chunked: bool,
    retry_after: Option<Duration>,
}

/// Parses the status line and headers (without the final blank line).
fn parse_head(head: &[u8]) -> Result<Head, &'static str> {
    let mut lines = head.split(|&b| b == b'\n').map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let status_line = lines.next().ok_or("empty response")?;
    let mut parsed = Head { status: parse_status_line(status_line)?, ..Head::default() };
    for line in lines {
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            return Err("obsolete header line folding");
        }
        let colon = line.iter().position(|&b| b == b':').ok_or("header line without a colon")?;
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
            return Err("invalid header name");
        }
        let value = value.trim_ascii();
        if name.eq_ignore_ascii_case(b"content-length") {
            let text = std::str::from_utf8(value).map_err(|_| "invalid Content-Length")?;
            if text.is_empty() || text.len() > 18 || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err("invalid Content-Length");
            }
            let length: usize = text.parse().map_err(|_| "invalid Content-Length")?;
            if parsed.content_length.is_some_and(|known| known != length) {
                return Err("conflicting Content-Length headers");
            }
            parsed.content_length = Some(length);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let last = value.rsplit(|&b| b == b',').next().unwrap_or_default().trim_ascii();
            parsed.chunked = last.eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"retry-after") {
            parsed.retry_after = std::str::from_utf8(value).ok().and_then(|text| parse_retry_after(text, unix_now()));
        }
    }
    Ok(parsed)
}

/// `HTTP/1.x SSS[ reason]`.
fn parse_status_line(line: &[u8]) -> Result<u16, &'static str> {
    let rest = line.strip_prefix(b"HTTP/1.").ok_or("not an HTTP/1.x status line")?;
    let (minor, rest) = rest.split_first().ok_or("not an HTTP/1.x status line")?;
    let rest = rest.strip_prefix(b" ").ok_or("not an HTTP/1.x status line")?;
    let (code, reason) = rest.split_at_checked(3).ok_or("no status code")?;
    if !minor.is_ascii_digit() || !code.iter().all(u8::is_ascii_digit) || !(reason.is_empty() || reason[0] == b' ') {
        return Err("not an HTTP/1.x status line");
    }
    let status = code.iter().fold(0u16, |acc, d| acc * 10 + u16::from(d - b'0'));
    if !(100..=599).contains(&status) {
        return Err("status code out of range");
    }
    Ok(status)
}

/// Reads the body by its framing (RFC 9112 §6.3); `buf` holds what arrived with the head.
async fn read_body<S: AsyncRead + Unpin>(
    stream: &mut S,
    mut buf: Vec<u8>,
    head: &Head,
    host: &str,
) -> Result<Vec<u8>, PushError> {
    if head.status == 204 || head.status == 304 {
        return Ok(Vec::new());
    }
    if head.chunked {
        loop {
            match dechunk(&buf, MAX_BODY_LEN) {
                Chunked::Complete(body) => return Ok(body),
                Chunked::TooLarge => return Err(too_large(host, "body", MAX_BODY_LEN)),
                Chunked::Invalid(reason) => return Err(malformed(host, reason)),
                Chunked::Incomplete => {}
            }
            if buf.len() > MAX_BODY_LEN + CHUNK_FRAMING_ALLOWANCE {
                return Err(too_large(host, "body", MAX_BODY_LEN));
            }
            if read_some(stream, &mut buf, host).await? == 0 {
                return Err(malformed(host, "connection closed inside the chunked body"));
            }
        }
    }
    if let Some(length) = head.content_length {
        if length > MAX_BODY_LEN {
            return Err(too_large(host, "body", MAX_BODY_LEN));
        }
        while buf.len() < length {
            if read_some(stream, &mut buf, host).await? == 0 {
                return Err(malformed(host, "connection closed before the end of the body"));
            }
        }
        buf.truncate(length);
        return Ok(buf);
    }
    // No framing: the body runs to the end of the connection.
    loop {
        if buf.len() > MAX_BODY_LEN {
            return Err(too_large(host, "body", MAX_BODY_LEN));
        }
        if read_some(stream, &mut buf, host).await? == 0 {
            return Ok(buf);
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Chunked {
    Complete(Vec<u8>),
    Incomplete,
    TooLarge,
    Invalid(&'static str),
}

/// Decodes a chunked body held entirely in `raw` (trailers are ignored).
fn dechunk(raw: &[u8], limit: usize) -> Chunked {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let rest = &raw[at..];
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
            return if rest.len() > 1024 { Chunked::Invalid("chunk size line too long") } else { Chunked::Incomplete };
        };
        let line = &rest[..eol];
        let digits = line.split(|&b| b == b';').next().unwrap_or_default().trim_ascii();
        if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Chunked::Invalid("invalid chunk size");
        }
        let size = digits.iter().fold(0usize, |acc, &d| acc * 16 + hex_value(d));
        if size == 0 {
            return Chunked::Complete(body);
        }
        if body.len() + size > limit {
            return Chunked::TooLarge;
        }
        let data_start = at + eol + 2;
        let Some(data) = raw.get(data_start..data_start + size) else {
            return Chunked::Incomplete;
        };
        match raw.get(data_start + size..data_start + size + 2) {
            None => return Chunked::Incomplete,
            Some(b"\r\n") => {}
            Some(_) => return Chunked::Invalid("chunk not followed by CRLF"),
        }
        body.extend_from_slice(data);
        at = data_start + size + 2;
    }
}

/// The value of an ASCII hex digit (callers have checked it is one).
fn hex_value(digit: u8) -> usize {
    char::from(digit).to_digit(16).map_or(0, |v| v as usize)
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `Retry-After`: delta-seconds, or an IMF-fixdate turned into the wait from `now`.
fn parse_retry_after(value: &str, now: u64) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    parse_imf_fixdate(value).map(|at| Duration::from_secs(at.saturating_sub(now)))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` as Unix seconds.
fn parse_imf_fixdate(value: &str) -> Option<u64> {
    let mut parts = value.split_ascii_whitespace();
    let weekday = parts.next()?.strip_suffix(',')?;
    if !matches!(weekday, "Mon" | "Tue" | "Wed" | "Thu" | "Fri" | "Sat" | "Sun") {
        return None;
    }
    let day = parts.next().filter(|d| d.len() == 2)?.parse::<i64>().ok()?;
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month_name = parts.next()?;
    let month = MONTHS.iter().position(|m| *m == month_name)?;
    let year = parts.next().filter(|y| y.len() == 4)?.parse::<i64>().ok()?;
    let mut clock = parts.next()?.split(':').map(|part| part.parse::<i64>().ok().filter(|_| part.len() == 2));
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    if clock.next().is_some() || parts.next()? != "GMT" || parts.next().is_some() {
        return None;
    }
    if !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month as i64 + 1, day);
    u64::try_from(days * 86_400 + hour * 3600 + minute * 60 + second).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = if year >= 0 { year } else { year - 399 } / 400;
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_to_origin_and_request_target() {
        let e = Endpoint::parse("https://FCM.googleapis.com/fcm/send/abc:def?x=1#frag").unwrap();
        assert_eq!((e.scheme, e.host.as_str(), e.port), (Scheme::Https, "fcm.googleapis.com", 443));
        assert_eq!(e.path, "/fcm/send/abc:def?x=1");
        assert_eq!(e.origin(), "https://fcm.googleapis.com");

        let e = Endpoint::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!((e.host.as_str(), e.port, e.path.as_str()), ("127.0.0.1", 8080, "/"));
        assert_eq!(e.origin(), "http://127.0.0.1:8080");

        let e = Endpoint::parse("https://push.example:443?q").unwrap();
        assert_eq!((e.authority.as_str(), e.path.as_str()), ("push.example", "/?q"));

        let e = Endpoint::parse("http://[::1]:9000/p").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 9000));
        assert_eq!(e.origin(), "http://[::1]:9000");

        for bad in [
            "",
            "push.example/x",
            "ftp://push.example/",
            "https:///x",
            "https://user@push.example/",
            "https://push.example:0/",
            "https://push.example:99999/",
            "https://push.example:/",
            "https://push example/",
            "https://push.example/a b",
            "https://push.example/\r\nX-Evil: 1",
            "https://pûsh.example/",
            "https://[::1/",
            "https://[zz]/",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Endpoint::parse(&format!("https://push.example/{}", "a".repeat(5000))).is_err());
    }

    #[test]
    fn request_is_well_formed() {
        let e = Endpoint::parse("http://127.0.0.1:9/push/1").unwrap();
        let request = post_request(&e, &[("TTL", "60")], b"body");
        let text = String::from_utf8(request).unwrap();
        assert!(text.starts_with("POST /push/1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nTTL: 60\r\n"), "{text}");
        assert!(text.contains("\r\nContent-Length: 4\r\nConnection: close\r\n"));
        assert!(text.ends_with("\r\n\r\nbody"));
    }

    #[test]
    fn status_lines() {
        assert_eq!(parse_status_line(b"HTTP/1.1 201 Created"), Ok(201));
        assert_eq!(parse_status_line(b"HTTP/1.0 410"), Ok(410));
        assert_eq!(parse_status_line(b"HTTP/1.1 429 "), Ok(429));
        for bad in [&b""[..], b"HTTP/2 200 OK", b"HTTP/1.1 20 OK", b"HTTP/1.1 2000 OK", b"HTTP/1.1 099 x", b"garbage"] {
            assert!(parse_status_line(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn heads() {
        let head = parse_head(b"HTTP/1.1 429 Too Many\r\nRetry-After: 30\r\ncontent-length: 5\r\nX: y").unwrap();
        assert_eq!(
            head,
            Head { status: 429, content_length: Some(5), chunked: false, retry_after: Some(Duration::from_secs(30)) }
        );
        let head = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked").unwrap();
        assert!(head.chunked);
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: -1").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nno colon").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nA: b\r\n folded").is_err());
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("120", 0), Some(Duration::from_secs(120)));
        assert_eq!(parse_imf_fixdate("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(parse_imf_fixdate("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse_imf_fixdate("Tue, 29 Feb 2000 12:00:00 GMT"), Some(951_825_600));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_700), Some(Duration::from_secs(77)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_800), Some(Duration::ZERO));
        for bad in [
            "",
            "soon",
            "-5",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, 0), None, "{bad:?}");
        }
    }

    #[test]
    fn chunked_bodies() {
        assert_eq!(
            dechunk(b"5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n", 100),
            Chunked::Complete(b"hello world".to_vec())
        );
        assert_eq!(dechunk(b"5\r\nhel", 100), Chunked::Incomplete);
        assert_eq!(dechunk(b"5\r\nhello\r\n", 100), Chunked::Incomplete);
        assert_eq!(dechunk(b"A\r\n0123456789\r\n0\r\n", 5), Chunked::TooLarge);
        assert_eq!(dechunk(b"zz\r\n", 100), Chunked::Invalid("invalid chunk size"));
        assert_eq!(dechunk(b"123456789\r\n", usize::MAX), Chunked::Invalid("invalid chunk size"));
        assert_eq!(dechunk(b"2\r\nabXY", 100), Chunked::Invalid("chunk not followed by CRLF"));
    }

    async fn respond(bytes: &[u8]) -> Result<Response, PushError> {
        let (mut client, mut server) = tokio::io::duplex(1024);
        let bytes = bytes.to_vec();
        let writer = tokio::spawn(async move {
            // The reader may stop early (an error), which ends the write; that is fine.
            let _ = server.write_all(&bytes).await;
        });
        let result = read_response(&mut client, "push.test").await;
        drop(client);
        writer.await.unwrap();
        result
    }

    #[tokio::test]
    async fn responses_are_read_by_their_framing() {
        let r = respond(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nokEXTRA")
            .await
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (201, &b"ok"[..]));
        let r = respond(b"HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nbad\r\n0\r\n\r\n").await.unwrap();
        assert_eq!((r.status, r.body.as_slice()), (400, &b"bad"[..]));
        let r = respond(b"HTTP/1.0 503 Busy\r\nRetry-After: 7\r\n\r\nto the end").await.unwrap();
        assert_eq!(
            (r.status, r.retry_after, r.body.as_slice()),
            (503, Some(Duration::from_secs(7)), &b"to the end"[..])
        );
        let r = respond(b"HTTP/1.1 204 No Content\r\n\r\n").await.unwrap();
        assert_eq!((r.status, r.body.len()), (204, 0));
    }

    #[tokio::test]
    async fn bad_responses_are_typed_errors() {
        let err = respond(b"").await.unwrap_err();
        assert!(matches!(err, PushError::MalformedResponse { reason: "connection closed without a response", .. }));
        let err = respond(b"HTTP/1.1 201 Created\r\nContent-").await.unwrap_err();
        assert!(matches!(err, PushError::MalformedResponse { .. }), "{err:?}");
        let err = respond(b"SSH-2.0-OpenSSH\r\n\r\n").await.unwrap_err();
        assert!(matches!(err, PushError::MalformedResponse { reason: "not an HTTP/1.x status line", .. }));
        let err = respond(b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\nshort").await.unwrap_err();
        assert!(matches!(err, PushError::MalformedResponse { .. }), "{err:?}");

        let mut huge_head = b"HTTP/1.1 201 Created\r\nX-Filler: ".to_vec();
        huge_head.resize(MAX_HEAD_LEN + 10, b'a');
        huge_head.extend_from_slice(b"\r\n\r\n");
        let err = respond(&huge_head).await.unwrap_err();
        assert!(matches!(err, PushError::ResponseTooLarge { what: "headers", .. }), "{err:?}");

        let err = respond(b"HTTP/1.1 500 Oops\r\nContent-Length: 70000\r\n\r\n").await.unwrap_err();
        assert!(matches!(err, PushError::ResponseTooLarge { what: "body", .. }), "{err:?}");
        let mut unframed = b"HTTP/1.1 500 Oops\r\n\r\n".to_vec();
        unframed.resize(unframed.len() + MAX_BODY_LEN + 1, b'x');
        let err = respond(&unframed).await.unwrap_err();
        assert!(matches!(err, PushError::ResponseTooLarge { what: "body", .. }), "{err:?}");

        let mut interim = Vec::new();
        for _ in 0..=MAX_INTERIM_RESPONSES {
            interim.extend_from_slice(b"HTTP/1.1 103 Early Hints\r\n\r\n");
        }
        let err = respond(&interim).await.unwrap_err();
        assert!(matches!(err, PushError::MalformedResponse { reason: "too many interim responses", .. }));
    }
}
