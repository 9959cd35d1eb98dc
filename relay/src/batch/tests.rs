use terminull_protocol::SessionId;
use terminull_protocol::crypto::channel::Sealer;
use terminull_protocol::crypto::envelope::{seal_block, sign_batch};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::relay::{BlockEnvelope, RelayFrame};

use super::*;

/// `n` sealed blocks of session `s1`.
fn blocks(n: usize) -> Vec<BlockEnvelope> {
    let mut sealer = Sealer::new([9; 32], "block");
    (0..n)
        .map(|i| {
            let json = format!(r#"{{"type":"text","text":"block {i}"}}"#);
            seal_block(
                &mut sealer,
                &SessionId("s1".into()),
                "text",
                false,
                1_767_225_611.25 + i as f64,
                json.as_bytes(),
            )
            .unwrap()
        })
        .collect()
}

/// The text of a batch of `n` blocks for `conn`, signed by `bridge`.
fn batch_text(bridge: &Identity, conn: u64, n: usize) -> String {
    serde_json::to_string(&RelayFrame::Batch(sign_batch(bridge, conn, blocks(n)))).unwrap()
}

/// What a test expects of [`check_batch`].
#[derive(Debug)]
enum Expect {
    /// Verified, with this many blocks.
    Ok(usize),
    /// Refused with this code and a message containing this.
    Refused(RelayErrorCode, &'static str),
}

#[test]
fn batches_are_checked_as_a_whole_before_any_block_is_forwarded() {
    let bridge = Identity::generate();
    let other = Identity::generate();
    let bridge_id = bridge.public().bridge_id();
    let good = batch_text(&bridge, 7, 3);
    let cases: Vec<(&str, String, Expect)> = vec![
        ("a valid batch of 3", good.clone(), Expect::Ok(3)),
        ("a valid batch of 1", batch_text(&bridge, 7, 1), Expect::Ok(1)),
        ("the most blocks a batch holds", batch_text(&bridge, 7, MAX_BATCH_BLOCKS), Expect::Ok(MAX_BATCH_BLOCKS)),
        (
            "one enc altered",
            good.replacen(r#""enc":""#, r#""enc":"A"#, 1),
            Expect::Refused(RelayErrorCode::BadSignature, "batch for conn 7 (3 blocks)"),
        ),
        (
            "conn altered",
            good.replacen(r#""conn":7"#, r#""conn":8"#, 1),
            Expect::Refused(RelayErrorCode::BadSignature, "the signature over the batch"),
        ),
        (
            "replay flipped",
            good.replacen(r#""replay":false"#, r#""replay":true"#, 1),
            Expect::Refused(RelayErrorCode::BadSignature, "batch"),
        ),
        (
            "signed by another bridge (its own client's conn)",
            batch_text(&other, 7, 3),
            Expect::Refused(RelayErrorCode::BadSignature, "batch for conn 7"),
        ),
        ("sig not base64", with_sig(&good, "!!"), Expect::Refused(RelayErrorCode::BadSignature, "`sig`")),
        ("empty", with_blocks(&good, "[]"), Expect::Refused(RelayErrorCode::BadFrame, "`blocks` is empty")),
        (
            "too many",
            batch_text(&bridge, 7, MAX_BATCH_BLOCKS + 1),
            Expect::Refused(RelayErrorCode::BadFrame, "257 blocks; a batch holds at most 256"),
        ),
        (
            "far too many tiny ones",
            with_blocks(&good, &format!("[{}{{}}]", "{},".repeat(100_000))),
            Expect::Refused(RelayErrorCode::BadFrame, "100001 blocks"),
        ),
        (
            "an unknown field in a block",
            good.replacen(r#""replay":false"#, r#""replay":false,"sig":"x""#, 1),
            Expect::Refused(RelayErrorCode::BadFrame, "blocks[0] is not a sealed block: unknown field `sig`"),
        ),
        (
            "a `type` inside a block",
            good.replacen(r#""replay":false"#, r#""replay":false,"type":"x""#, 1),
            Expect::Refused(RelayErrorCode::BadFrame, "unknown field `type`"),
        ),
        (
            "a block that is not an object",
            with_blocks(&good, r#"["block"]"#),
            Expect::Refused(RelayErrorCode::BadFrame, "blocks[0] is not a JSON object"),
        ),
        (
            "a block missing a field",
            with_blocks(&good, r#"[{"session_id":"s1"}]"#),
            Expect::Refused(RelayErrorCode::BadFrame, "blocks[0] is not a sealed block: missing field"),
        ),
        (
            "an unknown top-level field",
            good.replacen(r#""conn":7"#, r#""conn":7,"extra":1"#, 1),
            Expect::Refused(RelayErrorCode::BadFrame, "not a batch frame: unknown field `extra`"),
        ),
        (
            "no conn",
            good.replacen(r#""conn":7,"#, "", 1),
            Expect::Refused(RelayErrorCode::BadFrame, "missing field `conn`"),
        ),
        ("not JSON", "{\"type\":\"batch\",".to_owned(), Expect::Refused(RelayErrorCode::BadFrame, "not a batch frame")),
    ];
    for (name, text, expect) in cases {
        let got = check_batch(&text, &bridge.public(), bridge_id.as_str());
        match (expect, got) {
            (Expect::Ok(n), Ok(batch)) => {
                assert_eq!(batch.conn, 7, "{name}");
                assert_eq!(batch.blocks.len(), n, "{name}");
            }
            (Expect::Refused(code, needle), Err(e)) => {
                let refusal = e.refusal();
                assert_eq!(refusal.code, code, "{name}: {refusal:?}");
                assert!(refusal.message.contains(needle), "{name}: `{}` lacks `{needle}`", refusal.message);
                assert!(refusal.message.len() < 400, "{name}: the message is bounded");
            }
            (expect, got) => panic!("{name}: expected {expect:?}, got {got:?}"),
        }
    }
}

#[test]
fn each_device_frame_is_the_blocks_own_text_behind_the_block_tag() {
    let bridge = Identity::generate();
    let envelopes = blocks(3);
    let text = serde_json::to_string(&RelayFrame::Batch(sign_batch(&bridge, 7, envelopes.clone()))).unwrap();
    let batch = check_batch(&text, &bridge.public(), bridge.public().bridge_id().as_str()).unwrap();
    for (forward, envelope) in batch.blocks.iter().zip(&envelopes) {
        let block_json = serde_json::to_string(envelope).unwrap();
        assert!(text.contains(&block_json));
        assert_eq!(forward.frame, format!(r#"{{"type":"block",{}"#, &block_json[1..]));
        assert_eq!(forward.session_id, "s1");
        let parsed: RelayFrame = serde_json::from_str(&forward.frame).unwrap();
        assert_eq!(parsed, RelayFrame::Block(envelope.clone()), "the device reads the block the bridge sealed");
    }
}

#[test]
fn escaped_fields_are_read_and_forwarded_as_they_came() {
    let bridge = Identity::generate();
    let mut sealer = Sealer::new([9; 32], "block");
    let session = SessionId("s\"1\\é".into());
    let block = seal_block(&mut sealer, &session, "text", true, 0.1, b"{}").unwrap();
    let text = serde_json::to_string(&RelayFrame::Batch(sign_batch(&bridge, 1, vec![block.clone()]))).unwrap();
    let batch = check_batch(&text, &bridge.public(), bridge.public().bridge_id().as_str()).unwrap();
    assert_eq!(batch.blocks[0].session_id, session.as_str());
    assert_eq!(serde_json::from_str::<RelayFrame>(&batch.blocks[0].frame).unwrap(), RelayFrame::Block(block));
}

/// `text` with its `sig` replaced.
fn with_sig(text: &str, sig: &str) -> String {
    let at = text.find(r#""sig":""#).unwrap();
    format!(r#"{}"sig":"{sig}"}}"#, &text[..at])
}

/// `text` with its `blocks` array replaced (the array is the batch's only one).
fn with_blocks(text: &str, blocks: &str) -> String {
    let start = text.find(r#""blocks":"#).unwrap() + r#""blocks":"#.len();
    let end = text.rfind(']').unwrap() + 1;
    format!("{}{blocks}{}", &text[..start], &text[end..])
}
