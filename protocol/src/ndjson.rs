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

/// The NDJSON codec. Decodes to `Result<Value, LineError>`; encodes any `Serialize`.
#[derive(Debug, Clone)]
pub struct NdjsonCodec {
    max_line: usize,
    /// Where to resume the newline search in the buffer.
    scanned: usize,
    /// Bytes of an over-long line dropped so far, while discarding it.
    discarding: Option<usize>,
    /// Lines completed so far.
    line_no: u64,
}

impl Default for NdjsonCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_LINE_BYTES)
    }
}

impl NdjsonCodec {
    /// A codec with the given line cap in bytes.
    pub fn new(max_line: usize) -> Self {
        Self { max_line, scanned: 0, discarding: None, line_no: 0 }
    }

    /// The line cap in bytes.
    pub fn max_line(&self) -> usize {
        self.max_line
    }

    /// Lines seen so far, including blank and bad ones.
    pub fn lines_seen(&self) -> u64 {
        self.line_no
    }

    fn finish_line(&mut self, line: &[u8]) -> Option<Result<Value, LineError>> {
        self.line_no += 1;
        if let Some(dropped) = self.discarding.take() {
            return Some(Err(LineError::TooLong { line: self.line_no, length: dropped + line.len(), max: self.max_line }));
        }
        if line.len() > self.max_line {
            return Some(Err(LineError::TooLong { line: self.line_no, length: line.len(), max: self.max_line }));
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        Some(serde_json::from_slice(line).map_err(|e| LineError::NotJson {
            line: self.line_no,
            problem: e.to_string(),
            preview: String::from_utf8_lossy(&line[..line.len().min(PREVIEW_BYTES)]).into_owned(),
        }))
    }
}

impl Decoder for NdjsonCodec {
    type Item = Result<Value, LineError>;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        loop {
            match buf[self.scanned..].iter().position(|b| *b == b'\n') {
                Some(offset) => {
                    let end = self.scanned + offset;
                    let line = buf.split_to(end + 1);
                    self.scanned = 0;
                    match self.finish_line(&line[..end]) {
                        Some(item) => return Ok(Some(item)),
                        None => continue,
                    }
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
                    return Ok(None);
                }
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
        let line = buf.split();
        self.scanned = 0;
        Ok(self.finish_line(&line))
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
