//! The LAN fast path of the web app: a WebRTC data channel from the page to the
//! bridge (docs/web-client.md, "The LAN as a data channel").
//!
//! The page sends its SDP offer as the `rtc_offer` control message — sealed inside
//! the device's link, so only a paired device can offer and the bridge's DTLS
//! fingerprint in the answer reaches only that device. The bridge answers with its
//! SDP (`rtc_answer`), whose candidates are its current LAN addresses: a device
//! re-learns them on every offer, over the encrypted channel, never from an
//! unauthenticated source.
//!
//! Only host candidates on private, loopback or link-local addresses are accepted
//! (no STUN, no TURN: the path is the local network or nothing); the page's mDNS
//! (`….local`) host candidates are dropped, as the bridge is ICE-lite and learns the
//! page's address from its connectivity checks. [`check_offer`] bounds the rest.

use std::net::IpAddr;

/// The largest SDP offer (or answer) accepted, in bytes.
pub const MAX_SDP_BYTES: usize = 16 * 1024;

/// The most `a=candidate` lines an offer may carry.
pub const MAX_CANDIDATES: usize = 16;

/// The label of the one data channel the page opens.
pub const DATA_CHANNEL_LABEL: &str = "terminull";

/// The largest data channel message: one piece of a frame with its flag byte (peers
/// may accept no more than 64 KiB in one message).
pub const PIECE: usize = 32 * 1024;

/// Splits a frame into data channel messages: pieces of at most [`PIECE`] bytes, each
/// behind its flag byte.
pub fn pieces(frame: &[u8]) -> Vec<Vec<u8>> {
    let body = PIECE - 1;
    let count = frame.len().div_ceil(body).max(1);
    (0..count)
        .map(|i| {
            let part = &frame[(i * body).min(frame.len())..((i + 1) * body).min(frame.len())];
            let mut piece = Vec::with_capacity(part.len() + 1);
            piece.push(u8::from(i + 1 == count));
            piece.extend_from_slice(part);
            piece
        })
        .collect()
}

/// Joins pieces back into frames, bounded.
#[derive(Debug, Default)]
pub struct Reassembly {
    partial: Vec<u8>,
}

/// Why a piece was refused: the peer is dropped.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PieceError {
    /// A message without its flag byte.
    #[error("an empty data channel message (no flag byte)")]
    Empty,
    /// A flag byte other than 0 or 1.
    #[error("a flag byte of {0} (0: more pieces follow, 1: the last piece)")]
    Flag(u8),
    /// The frame grew past the limit.
    #[error("a frame longer than {0} bytes")]
    TooLong(usize),
    /// The joined frame is not UTF-8 (frames are JSON text).
    #[error("a frame that is not UTF-8")]
    NotText,
}

impl Reassembly {
    /// Adds one piece; the frame when it was the last.
    pub fn push(&mut self, piece: &[u8], max: usize) -> Result<Option<String>, PieceError> {
        let (&flag, body) = piece.split_first().ok_or(PieceError::Empty)?;
        if flag > 1 {
            return Err(PieceError::Flag(flag));
        }
        if self.partial.len() + body.len() > max {
            return Err(PieceError::TooLong(max));
        }
        self.partial.extend_from_slice(body);
        if flag == 0 {
            return Ok(None);
        }
        let frame = std::mem::take(&mut self.partial);
        String::from_utf8(frame).map(Some).map_err(|_| PieceError::NotText)
    }
}

/// Why an SDP offer is refused; the text names what and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SdpError {
    /// Longer than [`MAX_SDP_BYTES`].
    #[error("the SDP is {len} bytes; at most {MAX_SDP_BYTES} are accepted")]
    TooLarge {
        /// Its length.
        len: usize,
    },
    /// More than [`MAX_CANDIDATES`] candidate lines.
    #[error("the SDP has {count} candidates; at most {MAX_CANDIDATES} are accepted")]
    TooManyCandidates {
        /// How many.
        count: usize,
    },
    /// A candidate line that does not parse.
    #[error("SDP line {line}: not a candidate (`{text}`)")]
    BadCandidate {
        /// The 1-based line number.
        line: usize,
        /// The line, cut to 80 characters.
        text: String,
    },
    /// A server-reflexive, relayed or peer-reflexive candidate: only host candidates
    /// are accepted.
    #[error("SDP line {line}: a `{kind}` candidate; only host candidates are accepted (no STUN or TURN)")]
    NotHost {
        /// The 1-based line number.
        line: usize,
        /// Its `typ`.
        kind: String,
    },
    /// A host candidate on a public address.
    #[error("SDP line {line}: {address} is not a private, loopback or link-local address")]
    NotLocal {
        /// The 1-based line number.
        line: usize,
        /// The address.
        address: String,
    },
    /// A control character other than CR or LF.
    #[error("SDP line {line}: a control character")]
    ControlCharacter {
        /// The 1-based line number.
        line: usize,
    },
}

/// True for the addresses a LAN path may use: private (RFC 1918, IPv6 unique local),
/// loopback and link-local.
pub fn is_local_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_private() || v4.is_loopback() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80
        }
    }
}

fn cut(text: &str) -> String {
    text.chars().take(80).collect()
}

/// Checks an SDP offer (or answer) from the other end: its size, its candidate count,
/// that every candidate is a host candidate on a local address (or an mDNS `.local`
/// name, which is dropped). Returns the SDP without the dropped lines.
pub fn check_offer(sdp: &str) -> Result<String, SdpError> {
    if sdp.len() > MAX_SDP_BYTES {
        return Err(SdpError::TooLarge { len: sdp.len() });
    }
    let mut kept = String::with_capacity(sdp.len());
    let mut count = 0usize;
    for (n, raw) in sdp.split('\n').enumerate() {
        let line = n + 1;
        let text = raw.strip_suffix('\r').unwrap_or(raw);
        if text.chars().any(char::is_control) {
            return Err(SdpError::ControlCharacter { line });
        }
        if let Some(candidate) = text.strip_prefix("a=candidate:") {
            count += 1;
            if count > MAX_CANDIDATES {
                return Err(SdpError::TooManyCandidates { count });
            }
            // foundation component transport priority address port "typ" type …
            let fields: Vec<&str> = candidate.split(' ').collect();
            let (Some(address), Some("typ"), Some(kind)) =
                (fields.get(4).copied(), fields.get(6).copied(), fields.get(7).copied())
            else {
                return Err(SdpError::BadCandidate { line, text: cut(text) });
            };
            if kind != "host" {
                return Err(SdpError::NotHost { line, kind: cut(kind) });
            }
            if address.ends_with(".local") {
                continue;
            }
            let ip: IpAddr = address.parse().map_err(|_| SdpError::BadCandidate { line, text: cut(text) })?;
            if !is_local_address(ip) {
                return Err(SdpError::NotLocal { line, address: ip.to_string() });
            }
        }
        if !text.is_empty() {
            kept.push_str(text);
            kept.push_str("\r\n");
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(candidates: &[&str]) -> String {
        let mut sdp = String::from("v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n");
        for c in candidates {
            sdp.push_str(&format!("a=candidate:{c}\r\n"));
        }
        sdp
    }

    #[test]
    fn host_candidates_on_local_addresses_pass_and_mdns_names_are_dropped() {
        let sdp = offer(&[
            "1 1 udp 2122260223 192.168.1.20 50000 typ host generation 0",
            "2 1 udp 2122260223 127.0.0.1 50001 typ host",
            "3 1 udp 2122260223 fe80::1 50002 typ host",
            "4 1 udp 2122260223 1b6e0c9a-7f3e-4b1c-9a7e-0c6a2f7e3f1d.local 50003 typ host",
        ]);
        let kept = check_offer(&sdp).unwrap();
        assert!(kept.contains("192.168.1.20") && kept.contains("127.0.0.1") && kept.contains("fe80::1"));
        assert!(!kept.contains(".local"));
    }

    #[test]
    fn server_reflexive_and_relayed_candidates_are_refused() {
        let sdp = offer(&["1 1 udp 1686052607 10.0.0.2 50000 typ srflx raddr 0.0.0.0 rport 0"]);
        assert!(matches!(check_offer(&sdp), Err(SdpError::NotHost { line: 5, .. })));
        let sdp = offer(&["1 1 udp 41885439 10.0.0.2 50000 typ relay"]);
        assert!(matches!(check_offer(&sdp), Err(SdpError::NotHost { .. })));
    }

    #[test]
    fn public_addresses_are_refused() {
        let sdp = offer(&["1 1 udp 2122260223 8.8.8.8 50000 typ host"]);
        let err = check_offer(&sdp).unwrap_err();
        assert_eq!(err.to_string(), "SDP line 5: 8.8.8.8 is not a private, loopback or link-local address");
        assert!(check_offer(&offer(&["1 1 udp 2122260223 2001:db8::1 50000 typ host"])).is_err());
    }

    #[test]
    fn size_count_and_shape_are_bounded() {
        let big = "a".repeat(MAX_SDP_BYTES + 1);
        assert_eq!(check_offer(&big), Err(SdpError::TooLarge { len: MAX_SDP_BYTES + 1 }));
        let many: Vec<String> = (0..=MAX_CANDIDATES).map(|i| format!("{i} 1 udp 1 10.0.0.{i} 5000 typ host")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(matches!(check_offer(&offer(&many)), Err(SdpError::TooManyCandidates { .. })));
        assert!(matches!(check_offer(&offer(&["garbage"])), Err(SdpError::BadCandidate { .. })));
        assert!(matches!(check_offer("v=0\u{0}\r\n"), Err(SdpError::ControlCharacter { line: 1 })));
    }

    #[test]
    fn a_frame_is_split_into_flagged_pieces_and_joined_back() {
        let frame = "x".repeat(PIECE * 2 + 5);
        let parts = pieces(frame.as_bytes());
        assert_eq!(parts.len(), 3);
        assert!(parts.iter().all(|p| p.len() <= PIECE));
        assert_eq!(parts.iter().map(|p| p[0]).collect::<Vec<_>>(), [0, 0, 1]);
        let mut joined = Reassembly::default();
        assert_eq!(joined.push(&parts[0], 1 << 20), Ok(None));
        assert_eq!(joined.push(&parts[1], 1 << 20), Ok(None));
        assert_eq!(joined.push(&parts[2], 1 << 20), Ok(Some(frame)));
        assert_eq!(pieces(b""), vec![vec![1u8]]);
    }

    #[test]
    fn a_frame_over_the_limit_or_a_bad_flag_is_refused() {
        let mut joined = Reassembly::default();
        assert_eq!(joined.push(&[0, b'a', b'b'], 3), Ok(None));
        assert_eq!(joined.push(&[1, b'c', b'd'], 3), Err(PieceError::TooLong(3)));
        assert_eq!(Reassembly::default().push(&[7, b'a'], 3), Err(PieceError::Flag(7)));
        assert_eq!(Reassembly::default().push(&[], 3), Err(PieceError::Empty));
        assert_eq!(Reassembly::default().push(&[1, 0xff], 3), Err(PieceError::NotText));
    }
}
