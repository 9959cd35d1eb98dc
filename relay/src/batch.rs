//! The relay's fast path for a bridge's `batch` frame (docs/relay.md#batch): the frame's
//! text is read into a borrowed view (each block kept as the exact JSON text it came
//! as), the bridge's signature is checked once for the whole batch, and each block's
//! device frame is built by concatenation — `{"type":"block",` followed by the block's
//! own text after its opening brace — so the sealed payload is forwarded byte for byte,
//! never re-serialised.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;
use terminull_protocol::crypto::CryptoError;
use terminull_protocol::crypto::envelope::{BlockFields, verify_batch};
use terminull_protocol::crypto::keys::PublicIdentity;
use terminull_protocol::relay::{MAX_BATCH_BLOCKS, RelayErrorCode};
use terminull_protocol::text::prefix_within;

use crate::refusal::Refusal;

/// What every device frame built from a batched block starts with; the block's own
/// text follows, without its opening `{`.
const BLOCK_FRAME_HEAD: &str = r#"{"type":"block","#;

/// Longest piece of a parse error quoted back to the bridge.
const MAX_DETAIL: usize = 200;

/// A `batch` frame as the relay reads it, borrowing from the message's text.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchView<'a> {
    /// `type`: "batch".
    #[serde(rename = "type", borrow)]
    frame_type: Cow<'a, str>,
    /// `conn`: the relay connection the blocks are for.
    conn: u64,
    /// `blocks`: each block object's exact text (at most [`MAX_BATCH_BLOCKS`] + 1 are
    /// kept: one more is enough to say the batch is too big).
    #[serde(borrow, deserialize_with = "bounded_blocks")]
    blocks: Bounded<'a>,
    /// `sig`: the bridge's signature over the batch, base64.
    #[serde(borrow)]
    sig: Cow<'a, str>,
}

/// The blocks of a batch, as read: the first [`MAX_BATCH_BLOCKS`] + 1 texts and how
/// many the array held in all.
#[derive(Debug, Default)]
struct Bounded<'a> {
    texts: Vec<&'a RawValue>,
    total: usize,
}

/// Reads `blocks` keeping at most one block past the limit, so a hostile array of a
/// million tiny objects costs no memory.
fn bounded_blocks<'de, D: Deserializer<'de>>(d: D) -> Result<Bounded<'de>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Bounded<'de>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of sealed blocks")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Bounded::default();
            while let Some(raw) = seq.next_element::<&'de RawValue>()? {
                if out.texts.len() <= MAX_BATCH_BLOCKS {
                    out.texts.push(raw);
                }
                out.total += 1;
            }
            Ok(out)
        }
    }
    d.deserialize_seq(V)
}

/// One block of a batch, its fields borrowed from the text where no escape forces a
/// copy. It has exactly the fields of a `BlockEnvelope`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockView<'a> {
    /// `session_id`: routing.
    #[serde(borrow)]
    session_id: Cow<'a, str>,
    /// `block_type`: the block's `type` in plaintext.
    #[serde(borrow)]
    block_type: Cow<'a, str>,
    /// `enc`: the sealed block, base64.
    #[serde(borrow)]
    enc: Cow<'a, str>,
    /// `replay`: history sent after `replay_done`.
    replay: bool,
    /// `server_ts`: the block's time.
    server_ts: f64,
}

/// Why a batch is refused. Nothing of a refused batch is forwarded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BatchError {
    /// The text is not a `batch` frame.
    #[error("not a batch frame: {0}")]
    Malformed(String),
    /// `blocks` is empty.
    #[error("batch for conn {conn}: `blocks` is empty; a batch holds 1 to {MAX_BATCH_BLOCKS} blocks")]
    Empty {
        /// The batch's `conn`.
        conn: u64,
    },
    /// `blocks` holds more than [`MAX_BATCH_BLOCKS`].
    #[error("batch for conn {conn}: {count} blocks; a batch holds at most {MAX_BATCH_BLOCKS}")]
    TooMany {
        /// The batch's `conn`.
        conn: u64,
        /// How many blocks it held.
        count: usize,
    },
    /// One block is not a sealed block.
    #[error("batch for conn {conn}: blocks[{index}] {reason}")]
    Block {
        /// The batch's `conn`.
        conn: u64,
        /// The block's place in `blocks`, from 0.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The bridge's signature does not cover these blocks.
    #[error("batch for conn {conn} ({count} blocks): {source}")]
    BadSignature {
        /// The batch's `conn`.
        conn: u64,
        /// How many blocks it held.
        count: usize,
        /// The check that failed.
        source: CryptoError,
    },
}

impl BatchError {
    /// The refusal the bridge gets.
    pub(crate) fn refusal(&self) -> Refusal {
        let code = match self {
            BatchError::BadSignature { .. } => RelayErrorCode::BadSignature,
            _ => RelayErrorCode::BadFrame,
        };
        Refusal::new(code, self.to_string())
    }
}

/// One block of a checked batch, ready for its device.
#[derive(Debug)]
pub(crate) struct Forward<'a> {
    /// The block's session (the hub issues a resume token for a session new to the
    /// connection before its first block).
    pub session_id: Cow<'a, str>,
    /// The `block` frame's text for the device.
    pub frame: String,
}

/// A batch whose signature verified.
#[derive(Debug)]
pub(crate) struct CheckedBatch<'a> {
    /// The relay connection its blocks are for.
    pub conn: u64,
    /// Its blocks, in order.
    pub blocks: Vec<Forward<'a>>,
}

/// Reads `text` as a `batch` from bridge `bridge_id` (whose key is `key`), checks its
/// size and its signature, and builds the device frames.
pub(crate) fn check_batch<'a>(
    text: &'a str,
    key: &PublicIdentity,
    bridge_id: &str,
) -> Result<CheckedBatch<'a>, BatchError> {
    let view = parse(text)?;
    let conn = view.conn;
    let blocks = read_blocks(&view)?;
    let fields: Vec<BlockFields<'_>> = blocks.iter().map(|(_, b)| b.fields()).collect();
    verify_batch(key, bridge_id, conn, &fields, &view.sig).map_err(|source| BatchError::BadSignature {
        conn,
        count: blocks.len(),
        source,
    })?;
    let blocks =
        blocks.into_iter().map(|(raw, b)| Forward { session_id: b.session_id, frame: block_frame(raw) }).collect();
    Ok(CheckedBatch { conn, blocks })
}

/// The borrowed view of a `batch` text.
fn parse(text: &str) -> Result<BatchView<'_>, BatchError> {
    let view: BatchView<'_> = serde_json::from_str(text)
        .map_err(|e| BatchError::Malformed(prefix_within(&e.to_string(), MAX_DETAIL).into()))?;
    if view.frame_type != "batch" {
        return Err(BatchError::Malformed(format!("`type` is `{}`", prefix_within(&view.frame_type, MAX_DETAIL))));
    }
    Ok(view)
}

/// Each block's text with its fields, after the count check.
fn read_blocks<'a>(view: &BatchView<'a>) -> Result<Vec<(&'a str, BlockView<'a>)>, BatchError> {
    let conn = view.conn;
    match view.blocks.total {
        0 => return Err(BatchError::Empty { conn }),
        count if count > MAX_BATCH_BLOCKS => return Err(BatchError::TooMany { conn, count }),
        _ => {}
    }
    let mut out = Vec::with_capacity(view.blocks.texts.len());
    for (index, raw) in view.blocks.texts.iter().enumerate() {
        let raw: &'a str = raw.get();
        let bad = |reason: String| BatchError::Block { conn, index, reason };
        if !raw.starts_with('{') {
            return Err(bad("is not a JSON object".into()));
        }
        let block: BlockView<'a> = serde_json::from_str(raw)
            .map_err(|e| bad(format!("is not a sealed block: {}", prefix_within(&e.to_string(), MAX_DETAIL))))?;
        out.push((raw, block));
    }
    Ok(out)
}

impl BlockView<'_> {
    fn fields(&self) -> BlockFields<'_> {
        BlockFields {
            session_id: &self.session_id,
            block_type: &self.block_type,
            replay: self.replay,
            server_ts: self.server_ts,
            enc: &self.enc,
        }
    }
}

/// The device's `block` frame for a block whose exact text is `raw` (a JSON object
/// with at least one field, so `raw[1..]` starts with a field or whitespace).
fn block_frame(raw: &str) -> String {
    let mut frame = String::with_capacity(BLOCK_FRAME_HEAD.len() + raw.len());
    frame.push_str(BLOCK_FRAME_HEAD);
    frame.push_str(&raw[1..]);
    frame
}

#[cfg(test)]
mod profile;
#[cfg(test)]
mod tests;
