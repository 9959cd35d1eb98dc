//! Wire-path throughput: the NDJSON codec, block validation and the JSON-RPC envelope,
//! on the blocks a real turn produces. A bench binary (`harness = false`): it prints a
//! table and exits; tests never assert on time.
//!
//! `cargo bench -p terminull-protocol --bench wire` (add `-- --quick` for a short run).

// A bench binary's output is its table.
#![allow(clippy::print_stdout)]

mod timing;

use std::hint::black_box;
use std::time::Duration;

use bytes::BytesMut;
use serde_json::Value;
use terminull_protocol::blocks::{self, Block, BlockKind, StreamedText};
use terminull_protocol::jsonrpc::{Message, Notification};
use terminull_protocol::ndjson::NdjsonCodec;
use terminull_protocol::samples;
use tokio_util::codec::{Decoder, Encoder};

/// Runs `f` for about `budget`; returns (iterations, elapsed).
fn measure(budget: Duration, f: impl FnMut()) -> (u64, Duration) {
    timing::measure(budget, 100, f)
}

/// Times `f`, one pass over `items` things, and prints the time and rate per thing.
fn per_item_row(name: &str, budget: Duration, items: usize, f: impl FnMut()) {
    let (n, t) = measure(budget, f);
    let per = t / (n as u32 * items as u32);
    println!("{:<44} {:>14} {:>10.0} k/s", name, format!("{per:.2?}"), 1e-3 / per.as_secs_f64());
}

fn stream_line(block: &Block) -> Vec<u8> {
    let note =
        Message::Notification(Notification { method: "stream".into(), params: serde_json::json!({ "block": block }) });
    terminull_protocol::ndjson::to_line(&note.to_value()).expect("encodes")
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let budget = if quick { Duration::from_millis(300) } else { Duration::from_secs(2) };

    // A realistic turn: one of every block type plus a 4 KiB streamed text chunk.
    let mut turn = samples::one_of_each_block(1_767_225_600.25);
    turn.push(Block::now(BlockKind::Text(StreamedText::snapshot("m9", "x".repeat(4096), false))));
    let lines: Vec<Vec<u8>> = turn.iter().map(stream_line).collect();
    let wire: Vec<u8> = lines.concat();
    let values: Vec<Value> = turn.iter().map(|b| serde_json::to_value(b).unwrap()).collect();

    println!("{:<44} {:>14} {:>14}", "operation", "per op", "throughput");

    let (n, t) = measure(budget, || {
        let mut codec = NdjsonCodec::default();
        let mut buf = BytesMut::from(&wire[..]);
        while let Some(item) = codec.decode(&mut buf).unwrap() {
            black_box(item.unwrap());
        }
    });
    let per = t / n as u32;
    let mb_s = (wire.len() as f64 * n as f64) / t.as_secs_f64() / 1e6;
    println!(
        "{:<44} {:>14} {:>11.1} MB/s",
        format!("ndjson decode, {} lines ({} B)", lines.len(), wire.len()),
        format!("{per:.2?}"),
        mb_s
    );

    per_item_row("blocks::validate, per block (mixed types)", budget, values.len(), || {
        for v in &values {
            black_box(blocks::validate(v.clone()).unwrap());
        }
    });

    per_item_row("ndjson encode, per block", budget, turn.len(), || {
        let mut codec = NdjsonCodec::default();
        let mut out = BytesMut::new();
        for b in &turn {
            codec.encode(b, &mut out).unwrap();
        }
        black_box(out);
    });

    // A block as the bridge stores and seals it: `Block` to JSON bytes and back (typed,
    // no JSON-RPC envelope, no validation).
    per_item_row("Block serialise (to_vec), per block (mixed)", budget, turn.len(), || {
        for b in &turn {
            black_box(serde_json::to_vec(b).unwrap());
        }
    });
    let encoded: Vec<Vec<u8>> = turn.iter().map(|b| serde_json::to_vec(b).unwrap()).collect();
    per_item_row("Block deserialise (from_slice), per block", budget, encoded.len(), || {
        for e in &encoded {
            black_box(serde_json::from_slice::<Block>(e).unwrap());
        }
    });
    let kib = Block::now(BlockKind::Text(StreamedText::snapshot("m1", "x".repeat(1024 - 80), true)));
    let kib_json = serde_json::to_vec(&kib).unwrap();
    let (n, t) = measure(budget, || {
        black_box(serde_json::to_vec(&kib).unwrap());
    });
    println!(
        "{:<44} {:>14}",
        format!("Block serialise, 1 KiB text ({} B)", kib_json.len()),
        format!("{:.2?}", t / n as u32)
    );
    let (n, t) = measure(budget, || {
        black_box(serde_json::from_slice::<Block>(&kib_json).unwrap());
    });
    println!("{:<44} {:>14}", "Block deserialise, 1 KiB text", format!("{:.2?}", t / n as u32));

    let text_line = stream_line(&turn[turn.len() - 1]);
    let (n, t) = measure(budget, || {
        let v: Value = serde_json::from_slice(&text_line).unwrap();
        let m = Message::from_value(v).unwrap();
        if let Message::Notification(n) = m {
            black_box(blocks::validate(n.params["block"].clone()).unwrap());
        }
    });
    let per = t / n as u32;
    println!(
        "{:<44} {:>14} {:>11.1} MB/s",
        format!("stream line → validated block ({} B)", text_line.len()),
        format!("{per:.2?}"),
        text_line.len() as f64 / per.as_secs_f64() / 1e6
    );
}
