//! Relay protocol 2 on loopback: blocks reach the relay in signed `batch`es, the relay
//! checks each batch once and forwards its blocks byte for byte as `block` frames, a
//! batch it cannot verify reaches nobody, and peers of another version are told so.

mod support;

use std::time::Duration;

use support::*;
use terminull_protocol::SessionId;
use terminull_protocol::crypto::b64;
use terminull_protocol::crypto::keys::Identity;
use terminull_protocol::relay::{BlockBatch, PROTOCOL_VERSION, RelayErrorCode, RelayFrame, ReplayDoneFrame};

/// The `batch` inside a frame.
fn batch_of(frame: RelayFrame) -> BlockBatch {
    match frame {
        RelayFrame::Batch(b) => b,
        other => panic!("expected a batch, got {other:?}"),
    }
}

/// The frame's text as the bridge sends it.
fn text_of(batch: &BlockBatch) -> String {
    serde_json::to_string(&RelayFrame::Batch(batch.clone())).unwrap()
}

#[tokio::test]
async fn a_batch_of_three_reaches_the_device_as_three_block_frames_byte_identical_to_the_batched_blocks_in_order() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &["s1"], |_| {}).await;
    let (mut phone, _) = connect_device(&relay, &bridge.id(), &device).await;
    send(&mut phone, &link_hello(&device)).await;
    let conn = bridge.expect_link_hello().await;

    let blocks = vec![bridge.block("s1", 10), bridge.block("s1", 2000), bridge.block("s1", 0)];
    let batch = batch_of(bridge.batch(conn, blocks.clone()));
    let text = text_of(&batch);
    send_text(&mut bridge.ws, text.clone()).await;
    for (i, block) in blocks.iter().enumerate() {
        let block_json = serde_json::to_string(block).unwrap();
        assert!(text.contains(&block_json), "the batch carries block {i} as its JSON");
        let got = recv_text(&mut phone).await;
        assert_eq!(got, block_frame_text(&block_json), "block {i} arrives as it was batched, in order");
        let frame: RelayFrame = serde_json::from_str(&got).unwrap();
        assert_eq!(frame, RelayFrame::Block(block.clone()), "and reads as the block the bridge sealed");
        let raw: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert!(raw.get("sig").is_none() && raw.get("conn").is_none(), "no signature or conn reaches a device");
    }
    expect_silence(&mut phone, Duration::from_millis(100)).await;
    expect_silence(&mut bridge.ws, Duration::from_millis(10)).await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_forged_or_altered_batch_is_refused_and_none_of_its_blocks_reaches_the_device() {
    let Paired { dir: _dir, relay, mut bridge, devices: [a, b] } = Paired::start(["a", "b"], &["s1"], |_| {}).await;
    let (mut phone_a, _) = connect_device(&relay, &bridge.id(), &a).await;
    let (mut phone_b, _) = connect_device(&relay, &bridge.id(), &b).await;
    send(&mut phone_a, &link_hello(&a)).await;
    let conn_a = bridge.expect_link_hello().await;
    send(&mut phone_b, &link_hello(&b)).await;
    let conn_b = bridge.expect_link_hello().await;

    let blocks = vec![bridge.block("s1", 10), bridge.block("s1", 20), bridge.block("s1", 30)];
    let genuine = batch_of(bridge.batch(conn_a, blocks.clone()));
    let impostor = Identity::generate();
    let mut cases: Vec<(&str, BlockBatch)> = Vec::new();
    let mut forged = genuine.clone();
    forged.sig = b64(&impostor.sign(b"anything"));
    cases.push(("signed by another key", forged));
    let mut altered = genuine.clone();
    altered.blocks[1].enc = altered.blocks[0].enc.clone();
    cases.push(("one block's enc replaced", altered));
    let mut dropped = genuine.clone();
    dropped.blocks.remove(1);
    cases.push(("one block dropped", dropped));
    let mut reordered = genuine.clone();
    reordered.blocks.swap(0, 2);
    cases.push(("two blocks swapped", reordered));
    let mut redirected = genuine.clone();
    redirected.conn = conn_b;
    cases.push(("sent to another connection", redirected));
    let mut relabelled = genuine.clone();
    relabelled.blocks[2].replay = true;
    cases.push(("a block's replay flag flipped", relabelled));
    let mut extended = genuine.clone();
    extended.blocks.push(bridge.block("s1", 5));
    cases.push(("a block appended", extended));

    for (name, batch) in cases {
        send_text(&mut bridge.ws, text_of(&batch)).await;
        let message = expect_error(&mut bridge.ws, RelayErrorCode::BadSignature).await;
        assert!(message.contains(&format!("batch for conn {}", batch.conn)), "{name}: {message}");
        assert!(message.contains("does not verify"), "{name}: {message}");
    }
    // The genuine batch is the first thing either device gets.
    send_text(&mut bridge.ws, text_of(&genuine)).await;
    for block in &blocks {
        let expected = block_frame_text(&serde_json::to_string(block).unwrap());
        assert_eq!(recv_text(&mut phone_a).await, expected);
    }
    expect_silence(&mut phone_a, Duration::from_millis(100)).await;
    expect_silence(&mut phone_b, Duration::from_millis(10)).await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_block_frame_or_a_malformed_batch_from_a_bridge_is_refused_saying_why() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &["s1"], |_| {}).await;
    let (mut phone, _) = connect_device(&relay, &bridge.id(), &device).await;
    send(&mut phone, &link_hello(&device)).await;
    let conn = bridge.expect_link_hello().await;

    let block = bridge.block("s1", 10);
    bridge.send(&RelayFrame::Block(block.clone())).await;
    let message = expect_error(&mut bridge.ws, RelayErrorCode::BadFrame).await;
    assert!(message.contains("`batch`"), "{message}");

    let empty = format!(r#"{{"type":"batch","conn":{conn},"blocks":[],"sig":"{}"}}"#, b64(&[0; 64]));
    send_text(&mut bridge.ws, empty).await;
    let message = expect_error(&mut bridge.ws, RelayErrorCode::BadFrame).await;
    assert!(message.contains("`blocks` is empty"), "{message}");

    let mut text = text_of(&batch_of(bridge.batch(conn, vec![block])));
    text = text.replacen(r#""replay":false"#, r#""replay":false,"note":"x""#, 1);
    send_text(&mut bridge.ws, text).await;
    let message = expect_error(&mut bridge.ws, RelayErrorCode::BadFrame).await;
    assert!(message.contains("blocks[0]") && message.contains("unknown field `note`"), "{message}");

    // `type` last: the relay still reads it as a batch.
    let block = bridge.block("s1", 3);
    let batch = batch_of(bridge.batch(conn, vec![block.clone()]));
    let mut value = serde_json::to_value(RelayFrame::Batch(batch)).unwrap();
    let tag = value.as_object_mut().unwrap().remove("type").unwrap();
    value.as_object_mut().unwrap().insert("type".into(), tag);
    let text = serde_json::to_string(&value).unwrap();
    assert!(text.ends_with(r#""type":"batch"}"#), "{text}");
    send_text(&mut bridge.ws, text).await;
    assert_eq!(recv(&mut phone).await, RelayFrame::Block(block));
    expect_silence(&mut phone, Duration::from_millis(100)).await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_batch_for_another_bridges_client_or_for_no_connection_reaches_nobody() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &["s1"], |_| {}).await;
    let other_device = Identity::generate();
    let mut other =
        FakeBridge::connect(&relay, &Identity::generate(), vec![device_record(&other_device, "other", false)], vec![])
            .await;
    let (mut phone, _) = connect_device(&relay, &bridge.id(), &device).await;
    send(&mut phone, &link_hello(&device)).await;
    bridge.expect_link_hello().await;
    let (mut foreign_phone, _) = connect_device(&relay, &other.id(), &other_device).await;
    send(&mut foreign_phone, &link_hello(&other_device)).await;
    let foreign_conn = other.expect_link_hello().await;

    // Well signed by this bridge, for the other bridge's client: dropped quietly.
    let frame = bridge.one_block("s1", foreign_conn, 10);
    bridge.send(&frame).await;
    let frame = bridge.one_block("s1", 999_999, 10);
    bridge.send(&frame).await;
    expect_silence(&mut foreign_phone, Duration::from_millis(300)).await;
    expect_silence(&mut phone, Duration::from_millis(10)).await;
    expect_silence(&mut bridge.ws, Duration::from_millis(10)).await;
    relay.shutdown().await;
}

#[tokio::test]
async fn the_first_block_of_a_session_brings_a_resume_token_before_the_block() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &[], |_| {}).await;
    let (mut phone, status) = connect_device(&relay, &bridge.id(), &device).await;
    assert!(status.resume_tokens.is_empty());
    send(&mut phone, &link_hello(&device)).await;
    let conn = bridge.expect_link_hello().await;

    let first = bridge.one_block("fresh", conn, 5);
    bridge.send(&first).await;
    let token = match recv(&mut phone).await {
        RelayFrame::RelayStatus(s) => s.resume_tokens.get(&SessionId("fresh".into())).cloned().expect("a token"),
        other => panic!("expected relay_status before the block, got {other:?}"),
    };
    assert!(matches!(recv(&mut phone).await, RelayFrame::Block(_)));
    let second = bridge.one_block("fresh", conn, 5);
    bridge.send(&second).await;
    assert!(matches!(recv(&mut phone).await, RelayFrame::Block(_)), "no second relay_status");

    // One batch with a known session, then a new one: the token comes before the new
    // session's first block, after the blocks ahead of it.
    let blocks = vec![bridge.block("fresh", 1), bridge.block("newer", 1), bridge.block("newer", 1)];
    let batch = bridge.batch(conn, blocks);
    bridge.send(&batch).await;
    assert!(matches!(recv(&mut phone).await, RelayFrame::Block(b) if b.session_id.as_str() == "fresh"));
    match recv(&mut phone).await {
        RelayFrame::RelayStatus(s) => assert!(s.resume_tokens.contains_key(&SessionId("newer".into()))),
        other => panic!("expected relay_status before the new session's block, got {other:?}"),
    }
    assert!(matches!(recv(&mut phone).await, RelayFrame::Block(b) if b.session_id.as_str() == "newer"));
    assert!(matches!(recv(&mut phone).await, RelayFrame::Block(b) if b.session_id.as_str() == "newer"));

    // The token drives the session, and the session stays resumable for later connections.
    let c = control(&device, &bridge.id(), Some("fresh"), Some(token), "{}");
    send(&mut phone, &RelayFrame::Control(c)).await;
    assert!(matches!(bridge.recv().await, RelayFrame::Control(_)));
    let (_, status) = connect_device(&relay, &bridge.id(), &device).await;
    assert!(status.resume_tokens.contains_key(&SessionId("fresh".into())));
    assert!(status.resume_tokens.contains_key(&SessionId("newer".into())));
    relay.shutdown().await;
}

#[tokio::test]
async fn a_v1_bridge_and_a_v1_device_are_told_both_versions_in_one_sentence_and_closed() {
    let Paired { dir: _dir, relay, bridge, devices: [device] } = Paired::start(["phone"], &[], |_| {}).await;

    // A version 1 bridge: its register says 1.
    let old_bridge = Identity::generate();
    let mut ws = open(&relay, "/v1/bridge").await;
    let nonce = challenge(&mut ws).await;
    let mut reg = register(&old_bridge, &nonce, vec![], vec![]);
    reg.protocol_version = 1;
    send(&mut ws, &RelayFrame::Register(reg)).await;
    let sentence = "this bridge speaks relay protocol 1 and the relay speaks 3: update this bridge";
    assert_eq!(expect_error(&mut ws, RelayErrorCode::UnsupportedVersion).await, sentence);
    match next_event(&mut ws).await {
        Event::Closed(Some((code, reason))) => assert_eq!((code, reason.as_str()), (1008, sentence)),
        other => panic!("expected a close 1008, got {other:?}"),
    }

    // A version 1 device: its auth has no protocol_version at all.
    let mut ws = open(&relay, "/v1/client").await;
    let nonce = challenge(&mut ws).await;
    let mut v1_auth = serde_json::to_value(RelayFrame::Auth(auth(&device, &bridge.id(), &nonce))).unwrap();
    v1_auth.as_object_mut().unwrap().remove("protocol_version");
    send_text(&mut ws, v1_auth.to_string()).await;
    let sentence = "this device speaks relay protocol 1 and the relay speaks 3: update this device";
    assert_eq!(expect_error(&mut ws, RelayErrorCode::UnsupportedVersion).await, sentence);
    match next_event(&mut ws).await {
        Event::Closed(Some((code, reason))) => assert_eq!((code, reason.as_str()), (1008, sentence)),
        other => panic!("expected a close 1008, got {other:?}"),
    }

    // A version 2 device is welcome, and told the relay's version.
    let (_phone, status) = connect_device(&relay, &bridge.id(), &device).await;
    assert_eq!(status.protocol_version, PROTOCOL_VERSION);
    relay.shutdown().await;
}

#[tokio::test]
async fn a_batch_counts_as_its_blocks_against_the_bridges_rate() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &["s1"], |c| {
        c.bridge_frames_per_sec = 1;
        c.bridge_frames_burst = 12;
    })
    .await;
    let (mut phone, _) = connect_device(&relay, &bridge.id(), &device).await;
    send(&mut phone, &link_hello(&device)).await;
    let conn = bridge.expect_link_hello().await;
    // `register` took one token: 11 left, a batch of 10 fits and leaves 1 for a batch of
    // 5 that puts the bucket 4 in debt.
    let blocks: Vec<_> = (0..10).map(|_| bridge.block("s1", 1)).collect();
    let frame = bridge.batch(conn, blocks);
    bridge.send(&frame).await;
    let blocks: Vec<_> = (0..5).map(|_| bridge.block("s1", 1)).collect();
    let frame = bridge.batch(conn, blocks);
    bridge.send(&frame).await;
    for _ in 0..15 {
        assert!(matches!(recv(&mut phone).await, RelayFrame::Block(_)));
    }
    let frame = bridge.one_block("s1", conn, 1);
    bridge.send(&frame).await;
    let message = expect_error(&mut bridge.ws, RelayErrorCode::RateLimited).await;
    assert!(message.contains("dropped"), "{message}");
    expect_silence(&mut phone, Duration::from_millis(100)).await;
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_large_and_small_reach_the_device_in_the_order_sent_before_later_frames() {
    let Paired { dir: _dir, relay, mut bridge, devices: [device] } = Paired::start(["phone"], &["s1"], |_| {}).await;
    let (mut phone, _) = connect_device(&relay, &bridge.id(), &device).await;
    send(&mut phone, &link_hello(&device)).await;
    let conn = bridge.expect_link_hello().await;

    // Large batches and small ones, a forged one in the middle, then a `replay_done`.
    let mut expected = Vec::new();
    for round in 0..6 {
        let n = if round % 2 == 0 { 24 } else { 1 };
        let blocks: Vec<_> = (0..n).map(|_| bridge.block("s1", 1024)).collect();
        let mut batch = batch_of(bridge.batch(conn, blocks.clone()));
        if round == 4 {
            batch.sig = b64(&Identity::generate().sign(b"forged"));
        } else {
            expected.extend(blocks.iter().map(|b| block_frame_text(&serde_json::to_string(b).unwrap())));
        }
        send_text(&mut bridge.ws, text_of(&batch)).await;
    }
    let done = ReplayDoneFrame { session_id: SessionId("s1".into()), last_seq: Some(9), enc: None, conn: Some(conn) };
    bridge.send(&RelayFrame::ReplayDone(done)).await;
    for (i, text) in expected.iter().enumerate() {
        assert_eq!(&recv_text(&mut phone).await, text, "block {i} of {}", expected.len());
    }
    match recv(&mut phone).await {
        RelayFrame::ReplayDone(d) => assert_eq!((d.last_seq, d.conn), (Some(9), None)),
        other => panic!("expected replay_done after every block, got {other:?}"),
    }
    let message = expect_error(&mut bridge.ws, RelayErrorCode::BadSignature).await;
    assert!(message.contains("24 blocks"), "{message}");
    relay.shutdown().await;
}
