//! Newline-delimited JSON framing: the one codec every stdio and socket reader in
//! the project uses.
//!
//! One JSON value per `\n`-terminated line (`\r\n` accepted; blank lines skipped).
//! A line longer than the cap or a line that is not JSON does not end the stream:
//! the decoder yields `Some(Err(LineError))` for it and goes on with the next line,
//! so a peer that prints one stray log line to stdout is logged, not dropped.
//! An over-long line is discarded as it arrives; memory stays bounded by the cap.

use bytes::{BufMut, BytesMut};
use serde::Serialize;
use serde_json::Value;
use tokio_util::codec::{Decoder, Encoder};

/// Default cap on one line: 8 MiB (a large diff or file read fits; a runaway does not).
pub const DEFAULT_MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// Bytes of a bad line kept in its error, for the log.
const PREVIEW_BYTES: usize = 120;

/// A line that could not be decoded. The stream goes on after it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// The line exceeded the cap; it was discarded.
    #[error("line {line} is too long: {length} bytes, the limit is {max}")]
    TooLong {
        /// 1-based line number in the stream.
        line: u64,
        /// The line's length in bytes (without the newline).
        length: usize,
        /// The cap.
        max: usize,
    },
    /// The line is not valid JSON.
    #[error("line {line} is not JSON ({problem}): {preview:?}")]
    NotJson {
        /// 1-based line number in the stream.
        line: u64,
        /// The parser's complaint.
        problem: String,
        /// The start of the line, lossily decoded.
        preview: String,
    },
}

/// Splits a byte stream into lines under a length cap: the part every line reader in
/// the project shares. Yields each line without its `\n` (and a trailing `\r`), or
/// [`LineError::TooLong`] for a line over the cap, which is discarded as it arrives.
#[derive(Debug, Clone)]
pub struct LineCodec {
    max_line: usize,
    /// Where to resume the newline search in the buffer.
    scanned: usize,
    /// Bytes of an over-long line dropped so far, while discarding it.
    discarding: Option<usize>,
    /// Lines completed so far.
    line_no: u64,
}

/// One line from a [`LineCodec`]: its 1-based number and its bytes.
pub type NumberedLine = (u64, BytesMut);

impl LineCodec {
    /// A splitter with the given line cap in bytes.
    pub fn new(max_line: usize) -> Self {
        Self { max_line, scanned: 0, discarding: None, line_no: 0 }
    }

    fn finish_line(&mut self, mut line: BytesMut) -> Result<NumberedLine, LineError> {
        self.line_no += 1;
        if let Some(dropped) = self.discarding.take() {
            return Err(LineError::TooLong { line: self.line_no, length: dropped + line.len(), max: self.max_line });
        }
        if line.len() > self.max_line {
            return Err(LineError::TooLong { line: self.line_no, length: line.len(), max: self.max_line });
        }
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        Ok((self.line_no, line))
    }
}

impl Decoder for LineCodec {
    type Item = Result<NumberedLine, LineError>;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        match buf[self.scanned..].iter().position(|b| *b == b'\n') {
            Some(offset) => {
                let end = self.scanned + offset;
                let mut line = buf.split_to(end + 1);
                line.truncate(end);
                self.scanned = 0;
                Ok(Some(self.finish_line(line)))
            }
            None => {
                if let Some(dropped) = self.discarding.as_mut() {
                    *dropped += buf.len();
                    buf.clear();
                    self.scanned = 0;
                } else if buf.len() > self.max_line {
                    self.discarding = Some(buf.len());
                    buf.clear();
                    self.scanned = 0;
                } else {
                    self.scanned = buf.len();
                }
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        if let Some(item) = self.decode(buf)? {
            return Ok(Some(item));
        }
        // A last line without its newline still counts.
        if buf.is_empty() && self.discarding.is_none() {
            return Ok(None);
        }
        self.scanned = 0;
        Ok(Some(self.finish_line(buf.split())))
    }
}

/// The NDJSON codec. Decodes to `Result<Value, LineError>`; encodes any `Serialize`.
#[derive(Debug, Clone)]
pub struct NdjsonCodec {
    lines: LineCodec,
    /// The length of the last line decoded, for readers that budget in bytes.
    last_line_bytes: usize,
}

impl Default for NdjsonCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_LINE_BYTES)
    }
}

impl NdjsonCodec {
    /// A codec with the given line cap in bytes.
    pub fn new(max_line: usize) -> Self {
        Self { lines: LineCodec::new(max_line), last_line_bytes: 0 }
    }

    /// The line cap in bytes.
    pub fn max_line(&self) -> usize {
        self.lines.max_line
    }

    /// The length in bytes of the line the last decoded item came from (0 for a line
    /// too long, which was dropped as it arrived).
    pub fn last_line_bytes(&self) -> usize {
        self.last_line_bytes
    }

    /// Lines seen so far, including blank and bad ones.
    pub fn lines_seen(&self) -> u64 {
        self.lines.line_no
    }

    /// Parses one line from a [`LineCodec`]; `None` for a blank line, which is skipped.
    /// For readers that need the raw line too (a recording tap) and so split lines
    /// themselves.
    pub fn parse_line(item: Result<NumberedLine, LineError>) -> Option<Result<Value, LineError>> {
        let (line_no, line) = match item {
            Ok(numbered) => numbered,
            Err(e) => return Some(Err(e)),
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        Some(serde_json::from_slice(&line).map_err(|e| LineError::NotJson {
            line: line_no,
            problem: e.to_string(),
            preview: String::from_utf8_lossy(&line[..line.len().min(PREVIEW_BYTES)]).into_owned(),
        }))
    }
}

impl Decoder for NdjsonCodec {
    type Item = Result<Value, LineError>;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        while let Some(item) = self.lines.decode(buf)? {
            self.last_line_bytes = item.as_ref().map_or(0, |(_, line)| line.len());
            if let Some(parsed) = Self::parse_line(item) {
                return Ok(Some(parsed));
            }
        }
        Ok(None)
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        while let Some(item) = self.lines.decode_eof(buf)? {
            self.last_line_bytes = item.as_ref().map_or(0, |(_, line)| line.len());
            if let Some(parsed) = Self::parse_line(item) {
                return Ok(Some(parsed));
            }
        }
        Ok(None)
    }
}

impl<T: Serialize> Encoder<T> for NdjsonCodec {
    type Error = std::io::Error;

    fn encode(&mut self, item: T, dst: &mut BytesMut) -> Result<(), Self::Error> {
        // Serialize first so a failure leaves `dst` untouched. Compact serde_json output
        // never contains a raw newline, so one value is one line.
        let json = serde_json::to_vec(&item)?;
        dst.reserve(json.len() + 1);
        dst.extend_from_slice(&json);
        dst.put_u8(b'\n');
        Ok(())
    }
}

/// One value as one NDJSON line (with its newline), for writers without a codec.
pub fn to_line<T: Serialize>(item: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut line = serde_json::to_vec(item)?;
    line.push(b'\n');
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use serde_json::json;
    use tokio::io::AsyncWriteExt;
    use tokio_util::codec::FramedRead;

    fn decode_all(codec: &mut NdjsonCodec, bytes: &[u8]) -> Vec<Result<Value, LineError>> {
        let mut buf = BytesMut::from(bytes);
        let mut out = Vec::new();
        while let Some(item) = codec.decode_eof(&mut buf).unwrap() {
            out.push(item);
        }
        out
    }

    #[test]
    fn nine_mib_line_is_too_long_and_the_next_line_still_decodes() {
        let mut input = vec![b'x'; 9 * 1024 * 1024];
        input.push(b'\n');
        input.extend_from_slice(b"{\"ok\":1}\n");
        let out = decode_all(&mut NdjsonCodec::default(), &input);
        assert_eq!(
            out,
            vec![
                Err(LineError::TooLong { line: 1, length: 9 * 1024 * 1024, max: DEFAULT_MAX_LINE_BYTES }),
                Ok(json!({"ok": 1})),
            ]
        );
    }

    #[test]
    fn non_json_line_is_an_error_and_the_next_line_still_decodes() {
        let out = decode_all(&mut NdjsonCodec::default(), b"npm WARN deprecated\n{\"ok\":2}\n");
        match &out[0] {
            Err(LineError::NotJson { line: 1, preview, .. }) => assert_eq!(preview, "npm WARN deprecated"),
            other => panic!("expected NotJson, got {other:?}"),
        }
        assert_eq!(out[1], Ok(json!({"ok": 2})));
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn over_long_line_arriving_in_pieces_is_discarded_without_buffering_it() {
        let mut codec = NdjsonCodec::new(16);
        let mut buf = BytesMut::new();
        for _ in 0..10 {
            buf.extend_from_slice(&[b'a'; 10]);
            assert!(codec.decode(&mut buf).unwrap().is_none());
            assert!(buf.len() <= 16 + 10, "buffer grew to {}", buf.len());
        }
        buf.extend_from_slice(b"aaaa\n[1]\n");
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(Err(LineError::TooLong { line: 1, length: 104, max: 16 })));
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(Ok(json!([1]))));
    }

    #[test]
    fn line_exactly_at_the_cap_is_accepted() {
        let line = format!("\"{}\"", "a".repeat(14));
        assert_eq!(line.len(), 16);
        let out = decode_all(&mut NdjsonCodec::new(16), format!("{line}\n").as_bytes());
        assert_eq!(out, vec![Ok(json!("a".repeat(14)))]);
    }

    #[test]
    fn crlf_and_blank_lines_are_tolerated_and_counted() {
        let mut codec = NdjsonCodec::default();
        let out = decode_all(&mut codec, b"\n  \r\n{\"a\":1}\r\n\n2");
        assert_eq!(out, vec![Ok(json!({"a": 1})), Ok(json!(2))]);
        assert_eq!(codec.lines_seen(), 5);
    }

    #[test]
    fn error_reports_the_line_number_it_happened_on() {
        let out = decode_all(&mut NdjsonCodec::default(), b"1\n2\n{oops\n3\n");
        assert!(matches!(out[2], Err(LineError::NotJson { line: 3, .. })), "{:?}", out[2]);
        assert_eq!(out[3], Ok(json!(3)));
    }

    #[test]
    fn truncated_last_line_at_eof_is_reported() {
        let out = decode_all(&mut NdjsonCodec::default(), b"{\"a\":1}\n{\"b\":");
        assert_eq!(out[0], Ok(json!({"a": 1})));
        assert!(matches!(out[1], Err(LineError::NotJson { line: 2, .. })));
    }

    #[test]
    fn encoder_writes_one_line_per_value_even_with_newlines_inside_strings() {
        let mut codec = NdjsonCodec::default();
        let mut buf = BytesMut::new();
        codec.encode(json!({"text": "a\nb"}), &mut buf).unwrap();
        codec.encode(json!([1, 2]), &mut buf).unwrap();
        assert_eq!(&buf[..], b"{\"text\":\"a\\nb\"}\n[1,2]\n");
        assert_eq!(to_line(&json!(null)).unwrap(), b"null\n");
    }

    #[tokio::test]
    async fn framed_reader_over_a_pipe_keeps_going_after_bad_lines() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            tx.write_all(b"{\"n\":1}\ngarbage from a child\n").await.unwrap();
            tx.write_all(&vec![b'z'; 300]).await.unwrap();
            tx.write_all(b"\n{\"n\":2}\n").await.unwrap();
        });
        let items: Vec<_> = FramedRead::new(rx, NdjsonCodec::new(256)).collect().await;
        writer.await.unwrap();
        let items: Vec<_> = items.into_iter().map(|r| r.expect("no I/O error")).collect();
        assert_eq!(items.len(), 4, "{items:?}");
        assert_eq!(items[0], Ok(json!({"n": 1})));
        assert!(matches!(items[1], Err(LineError::NotJson { line: 2, .. })));
        assert_eq!(items[2], Err(LineError::TooLong { line: 3, length: 300, max: 256 }));
        assert_eq!(items[3], Ok(json!({"n": 2})));
    }
}
