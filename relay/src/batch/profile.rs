//! Where the relay's time per forwarded block goes, step by step, on 1 KiB sealed
//! blocks in batches of 64 (a loaded bridge's flush) and of 1 (an idle bridge's).
//! Not a test: run it on a release build, on an otherwise idle machine:
//!
//! ```sh
//! cargo test --release -p terminull-relay --lib -- --ignored --nocapture forwarding_profile
//! ```

#![allow(clippy::print_stdout)]

use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::Digest as _;
use terminull_protocol::SessionId;
use terminull_protocol::crypto::channel::Sealer;
use terminull_protocol::crypto::envelope::{batch_sig_bytes, seal_block, sign_batch};
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::relay::RelayFrame;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::*;

/// The text of a signed batch of `n` sealed 1 KiB blocks (the bench's block).
fn batch_text(bridge: &Identity, n: usize) -> String {
    let mut sealer = Sealer::new([5; 32], "block");
    let session = SessionId("s-0192f0c5a1b27c3d8e9f00112233aabb".into());
    let text = "x".repeat(1024 - 80);
    let blocks = (0..n)
        .map(|i| {
            let json =
                format!(r#"{{"type":"text","seq":{i},"ts":1767225611.25,"id":"msg-{i}","text":"{text}","done":true}}"#);
            seal_block(&mut sealer, &session, "text", false, 1_767_225_611.25, json.as_bytes()).unwrap()
        })
        .collect();
    serde_json::to_string(&RelayFrame::Batch(sign_batch(bridge, 7, blocks))).unwrap()
}

/// The best of five rounds of `rounds` calls of `f`, in µs per block.
fn per_block(blocks: usize, rounds: usize, mut f: impl FnMut()) -> f64 {
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..rounds {
            f();
        }
        best = best.min(start.elapsed());
    }
    best.as_secs_f64() * 1e6 / (rounds * blocks) as f64
}

#[test]
#[ignore = "a profile, not a test: run it on a release build"]
fn forwarding_profile() {
    let bridge = Identity::generate();
    let key = bridge.public();
    let bridge_id = key.bridge_id();
    let id = bridge_id.as_str();
    for n in [64usize, 1] {
        let text = batch_text(&bridge, n);
        let rounds = 20_000 / n;
        println!("\nbatch of {n} ({} B of JSON, {} B per block)", text.len(), text.len() / n);
        let mut rows: Vec<(&str, f64)> = Vec::new();
        rows.push((
            "parse the batch (borrowed view, raw blocks)",
            per_block(n, rounds, || drop(black_box(parse(&text).unwrap()))),
        ));
        let view = parse(&text).unwrap();
        rows.push((
            "parse each block's fields (borrowed)",
            per_block(n, rounds, || drop(black_box(read_blocks(&view).unwrap()))),
        ));
        let blocks = read_blocks(&view).unwrap();
        let fields: Vec<BlockFields<'_>> = blocks.iter().map(|(_, b)| b.fields()).collect();
        rows.push((
            "  build the signed bytes (transcript)",
            per_block(n, rounds, || drop(black_box(batch_sig_bytes(id, 7, &fields)))),
        ));
        let signed = batch_sig_bytes(id, 7, &fields);
        rows.push((
            "  SHA-512 of the signed bytes (inside Ed25519)",
            per_block(n, rounds, || {
                black_box(sha2::Sha512::digest(&signed));
            }),
        ));
        rows.push((
            "verify the signature (all of it)",
            per_block(n, rounds, || verify_batch(&key, id, 7, &fields, &view.sig).unwrap()),
        ));
        rows.push((
            "build the device frames (concatenation)",
            per_block(n, rounds, || {
                for (raw, _) in &blocks {
                    black_box(block_frame(raw));
                }
            }),
        ));
        rows.push((
            "check_batch, end to end",
            per_block(n, rounds, || drop(black_box(check_batch(&text, &key, id).unwrap()))),
        ));
        rows.push(("hub: one lock, token check, queue each frame (model)", hub_model(&text, &key, id, n, rounds)));
        rows.push((
            "  for comparison: SHA-256 of the signed bytes",
            per_block(n, rounds, || {
                black_box(sha2::Sha256::digest(&signed));
            }),
        ));
        let (read_us, write_us) = websocket_cpu(&text, n);
        rows.push(("WebSocket read of the batch (frame, unmask, UTF-8)", read_us));
        rows.push(("WebSocket write of the device frames (frame, copy)", write_us));
        let (read_us, write_us) = loopback_tcp(text.len(), n);
        rows.push(("kernel: read the batch's bytes off loopback TCP", read_us));
        rows.push(("kernel: write the frames' bytes to loopback TCP", write_us));
        for (what, us) in rows {
            println!("  {what:<62} {us:>7.3} µs/block");
        }
    }
}

/// A client as the hub model holds it: the sessions it has tokens for, its queue.
type ModelClient = (HashSet<SessionId>, mpsc::Sender<String>);

/// The hub's part modelled with its data structures: one lock per batch, the client's
/// lookup, a token check per run of one session, a `try_send` per frame into a bounded
/// queue (drained outside the timing).
fn hub_model(text: &str, key: &PublicIdentity, id: &str, n: usize, rounds: usize) -> f64 {
    let (tx, mut rx) = mpsc::channel::<String>(8192);
    let mut issued = HashSet::new();
    issued.insert(SessionId("s-0192f0c5a1b27c3d8e9f00112233aabb".into()));
    let clients: Mutex<HashMap<u64, ModelClient>> = Mutex::new(HashMap::from([(7, (issued, tx))]));
    let mut total = Duration::ZERO;
    for _ in 0..rounds {
        let batch = check_batch(text, key, id).unwrap();
        let start = Instant::now();
        {
            let guard = clients.lock().unwrap();
            let (issued, tx) = guard.get(&batch.conn).unwrap();
            let mut known: Option<usize> = None;
            for (i, block) in batch.blocks.iter().enumerate() {
                if known.is_none_or(|k| batch.blocks[k].session_id != block.session_id) {
                    assert!(issued.contains(&SessionId(block.session_id.to_string())));
                    known = Some(i);
                }
            }
            for block in batch.blocks {
                tx.try_send(block.frame).unwrap();
            }
        }
        total += start.elapsed();
        while rx.try_recv().is_ok() {}
    }
    total.as_secs_f64() * 1e6 / (rounds * n) as f64
}

/// An in-memory socket: writes append, reads consume from the front.
#[derive(Debug, Default)]
struct Memory {
    data: Vec<u8>,
    at: usize,
}

impl std::io::Read for Memory {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        if n == 0 {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }
}

impl std::io::Write for Memory {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.data.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The relay's WebSocket costs per block, apart from the kernel: reading a batch as a
/// server reads a client's message (frame parse, unmask, UTF-8 check), and writing the
/// device frames (frame header, copy into the write buffer), in memory.
fn websocket_cpu(batch: &str, n: usize) -> (f64, f64) {
    use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket};
    let messages = 20_000 / n;
    let mut client = WebSocket::from_raw_socket(Memory::default(), Role::Client, None);
    for _ in 0..messages {
        client.send(Message::text(batch.to_owned())).unwrap();
    }
    let wire = std::mem::take(&mut client.get_mut().data);
    let mut best_read = Duration::MAX;
    for _ in 0..5 {
        let mut server = WebSocket::from_raw_socket(Memory { data: wire.clone(), at: 0 }, Role::Server, None);
        let start = Instant::now();
        for _ in 0..messages {
            black_box(server.read().unwrap());
        }
        best_read = best_read.min(start.elapsed());
    }
    let frame =
        format!(r#"{{"type":"block",{}"#, &batch[batch.find(r#""blocks":[{"#).unwrap() + 11..][..1500].to_owned());
    let mut best_write = Duration::MAX;
    for _ in 0..5 {
        let mut server = WebSocket::from_raw_socket(Memory::default(), Role::Server, None);
        let start = Instant::now();
        for i in 0..messages * n {
            server.write(Message::text(frame.clone())).unwrap();
            if i % 64 == 63 {
                server.flush().unwrap();
                server.get_mut().data.clear();
            }
        }
        best_write = best_write.min(start.elapsed());
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / (messages * n) as f64;
    (per(best_read), per(best_write))
}

/// The kernel's part on loopback, per block: the relay reading the batch's bytes off
/// its bridge socket, and writing 64 device frames' bytes per `write` to a device
/// socket (a reader thread drains both).
fn loopback_tcp(batch_len: usize, n: usize) -> (f64, f64) {
    use std::io::{Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let rounds = 20_000 / n;
    // Read: a writer thread sends `rounds` batches' bytes; this thread reads them.
    let writer = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let chunk = vec![b'x'; batch_len];
        for _ in 0..rounds {
            s.write_all(&chunk).unwrap();
        }
    });
    let (mut s, _) = listener.accept().unwrap();
    let mut buf = vec![0u8; 128 * 1024];
    let mut left = batch_len * rounds;
    let start = Instant::now();
    while left > 0 {
        left -= s.read(&mut buf).unwrap();
    }
    let read = start.elapsed();
    writer.join().unwrap();
    // Write: 64 device frames of ~1.5 KiB per write.
    drop(s);
    let mut w = std::net::TcpStream::connect(addr).unwrap();
    let (mut s, _) = listener.accept().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 * 1024];
        while s.read(&mut buf).unwrap_or(0) > 0 {}
    });
    let frames = vec![b'y'; 64 * 1540];
    let total = rounds * n;
    let start = Instant::now();
    for _ in 0..total.div_ceil(64) {
        w.write_all(&frames).unwrap();
    }
    let write = start.elapsed();
    drop(w);
    reader.join().unwrap();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / total as f64;
    (per(read), per(write))
}
