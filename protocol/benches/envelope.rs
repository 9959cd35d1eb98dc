//! The cost of the end-to-end envelope on one core: sealing a block as the bridge does,
//! signing a batch of them and the relay's check of it, the device's open, a control message's
//! seal and open, and a link's key agreement. A bench binary (`harness = false`): it
//! prints a table and exits; tests never assert on time.
//!
//! `cargo bench -p terminull-protocol --bench envelope` (add `-- --quick` for a short run).

// A bench binary's output is its table.
#![allow(clippy::print_stdout)]

mod timing;

use std::hint::black_box;
use std::time::{Duration, Instant};

use terminull_protocol::crypto::channel::{Opener, Sealer, session_keys};
use terminull_protocol::crypto::envelope::{
    BlockFields, open_block, open_control, seal_block, seal_control, sign_batch, verify_batch, verify_control,
};
use terminull_protocol::crypto::handshake::{DeviceHandshake, accept_hello};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::ids::SessionId;

/// Runs `f` for about `budget`; returns (iterations, elapsed).
fn measure(budget: Duration, f: impl FnMut()) -> (u64, Duration) {
    timing::measure(budget, 50, f)
}

/// Times one pass of `f` over `n` prepared inputs (each may be used once).
fn measure_each(n: usize, mut f: impl FnMut(usize)) -> (u64, Duration) {
    let start = Instant::now();
    for i in 0..n {
        f(i);
    }
    (n as u64, start.elapsed())
}

fn row(name: &str, (n, elapsed): (u64, Duration)) {
    let per = elapsed.as_secs_f64() / n as f64;
    println!("{name:<48} {:>10.2} µs {:>12.0} /s", per * 1e6, 1.0 / per);
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let budget = Duration::from_millis(if quick { 200 } else { 1500 });
    let bridge = Identity::from_bytes([1; 32], [2; 32]);
    let device = Identity::from_bytes([3; 32], [4; 32]);
    let session = SessionId("s-0192f0c5a1b27c3d8e9f00112233aabb".into());
    let keys = session_keys(&[5; 32], session.as_str(), &[6; 32], &[7; 16]);
    // A 1 KiB text block, as the bridge serialises it.
    let text = "x".repeat(1024 - 80);
    let block = format!(r#"{{"seq":42,"ts":1767225611.25,"type":"text","id":"msg-1","text":"{text}","done":false}}"#);
    println!("{:<48} {:>13} {:>15}", "operation (1 KiB block, one core)", "per op", "throughput");

    let mut sealer = Sealer::new(keys.bridge_to_app, "block");
    row(
        "bridge: seal a block envelope",
        measure(budget, || {
            black_box(seal_block(&mut sealer, &session, "text", false, 1.0, block.as_bytes()).unwrap());
        }),
    );
    // A batch of 64 blocks: one signature, one check.
    let mut sealer = Sealer::new(keys.bridge_to_app, "block");
    let blocks: Vec<_> =
        (0..64).map(|_| seal_block(&mut sealer, &session, "text", false, 1.0, block.as_bytes()).unwrap()).collect();
    row(
        "bridge: sign a batch of 64 blocks",
        measure(budget, || {
            black_box(sign_batch(&bridge, 7, blocks.clone()));
        }),
    );
    let signed = sign_batch(&bridge, 7, blocks);
    let bridge_public = bridge.public();
    let bridge_id = bridge_public.bridge_id();
    row(
        "relay: verify a batch of 64 blocks",
        measure(budget, || {
            let fields: Vec<BlockFields<'_>> = signed.blocks.iter().map(|b| b.fields()).collect();
            verify_batch(&bridge_public, bridge_id.as_str(), 7, black_box(&fields), &signed.sig).unwrap()
        }),
    );
    // Opening needs a fresh counter each time: pre-seal a batch.
    let mut sealer = Sealer::new(keys.bridge_to_app, "block");
    let batch: Vec<_> = (0..if quick { 2_000 } else { 20_000 })
        .map(|_| seal_block(&mut sealer, &session, "text", false, 1.0, block.as_bytes()).unwrap())
        .collect();
    let mut opener = Opener::new(keys.bridge_to_app, "block");
    row(
        "device: open a block envelope",
        measure_each(batch.len(), |i| {
            black_box(open_block(&mut opener, &batch[i]).unwrap());
        }),
    );
    let mut csealer = Sealer::new(keys.app_to_bridge, "control");
    let control = br#"{"id":"c9","type":"user_message","session_id":"s-0192f0c5a1b27c3d8e9f00112233aabb","text":"run the tests"}"#;
    row(
        "device: seal + sign a control message",
        measure(budget, || {
            black_box(seal_control(&mut csealer, &device, "brg_x", Some(session.clone()), None, control).unwrap());
        }),
    );
    let mut csealer = Sealer::new(keys.app_to_bridge, "control");
    let controls: Vec<_> = (0..if quick { 2_000 } else { 20_000 })
        .map(|_| seal_control(&mut csealer, &device, "brg_x", Some(session.clone()), None, control).unwrap())
        .collect();
    let mut copener = Opener::new(keys.app_to_bridge, "control");
    let device_public = device.public();
    let (hello, _) = DeviceHandshake::start(&device, bridge.public().bridge_id().as_str());
    row(
        "bridge: verify + open a control message",
        measure_each(controls.len(), |j| {
            verify_control(&device_public, "brg_x", &controls[j]).unwrap();
            black_box(open_control(&mut copener, "brg_x", &controls[j]).unwrap());
        }),
    );
    row(
        "link handshake, bridge side (verify + 3 X25519 + keygen + sign + HKDF)",
        measure(budget, || {
            black_box(accept_hello(&bridge, &device_public, &hello).unwrap());
        }),
    );
    row(
        "Ed25519 sign (64 B)",
        measure(budget, || {
            black_box(bridge.sign(&[9; 64]));
        }),
    );
    let sig = bridge.sign(&[9; 64]);
    row("Ed25519 verify (64 B)", measure(budget, || bridge_public.verify(&[9; 64], &sig, "bench").unwrap()));
    let mut raw = Sealer::new([8; 32], "raw");
    row(
        "AES-256-GCM seal 1 KiB (counter nonce)",
        measure(budget, || drop(black_box(raw.seal(b"", block.as_bytes()).unwrap()))),
    );
}
