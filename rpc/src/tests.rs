use std::time::Duration;

use serde_json::json;
use terminull_protocol::adapter::{self, Empty, SessionIdParams};
use terminull_protocol::jsonrpc::{RpcError, codes};
use tokio::io::AsyncWriteExt;

use super::*;

/// Answers every request on `rx` with `{"echo": <method>}` (or an error for `fail`).
fn serve_echo(peer: Peer, mut rx: IncomingQueue) -> JoinHandle<Vec<Incoming>> {
    tokio::spawn(async move {
        let mut others = Vec::new();
        while let Some(msg) = rx.recv().await {
            match msg {
                Incoming::Request(r) if r.method == "fail" => {
                    peer.respond(r.id, Err(RpcError::new(codes::AGENT_ERROR, "boom"))).await.unwrap();
                }
                Incoming::Request(r) if r.method == "hang" => {}
                Incoming::Request(r) => peer.respond(r.id, Ok(json!({"echo": r.method}))).await.unwrap(),
                other => others.push(other),
            }
        }
        others
    })
}

#[tokio::test]
async fn request_gets_its_response_and_errors_come_back_typed() {
    let ((a, _a_rx, _at), (b, b_rx, _bt)) = memory_pair();
    let _server = serve_echo(b, b_rx);
    assert_eq!(a.request_raw("ping", Value::Null, None).await.unwrap(), json!({"echo": "ping"}));
    let err = a.request_raw("fail", Value::Null, None).await.unwrap_err();
    assert_eq!(err, CallError::Rpc { method: "fail".into(), error: RpcError::new(codes::AGENT_ERROR, "boom") });
    assert_eq!(a.pending_calls(), 0);
}

#[tokio::test]
async fn typed_result_that_does_not_decode_names_the_method() {
    let ((a, _a_rx, _at), (b, b_rx, _bt)) = memory_pair();
    let _server = serve_echo(b, b_rx);
    // The echo server answers {"echo": ...}, which is not a DetectResult.
    let err = a.request::<adapter::Detect>(&Empty {}, None).await.unwrap_err();
    assert!(matches!(err, CallError::BadResult { ref method, .. } if method == "detect"), "{err:?}");
}

#[tokio::test]
async fn timeout_fails_the_call_and_forgets_it() {
    let ((a, _a_rx, _at), (b, b_rx, _bt)) = memory_pair();
    let _server = serve_echo(b, b_rx);
    let err = a.request_raw("hang", Value::Null, Some(Duration::from_millis(50))).await.unwrap_err();
    assert!(matches!(err, CallError::Timeout { .. }), "{err:?}");
    assert_eq!(a.pending_calls(), 0);
}

#[tokio::test]
async fn pending_calls_fail_as_closed_when_the_other_side_goes_away() {
    let ((a, _a_rx, _at), (b, b_rx, bt)) = memory_pair();
    let call = tokio::spawn(async move { a.request_raw("hang", Value::Null, None).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop((b, b_rx, bt));
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err, CallError::Closed { method: "hang".into() });
}

#[tokio::test]
async fn notifications_arrive_in_the_order_sent_even_in_large_bursts() {
    let ((a, _a_rx, _at), (_b, mut b_rx, _bt)) = memory_pair();
    let sender = tokio::spawn(async move {
        for i in 0..5000 {
            a.notify::<adapter::SessionIdNotification>(&SessionIdParams { agent_session_id: format!("s{i}").into() })
                .await
                .unwrap();
        }
    });
    for i in 0..5000 {
        match b_rx.recv().await.unwrap() {
            Incoming::Notification(n) => {
                let p = n.params_as::<adapter::SessionIdNotification>().unwrap();
                assert_eq!(p.agent_session_id.as_str(), format!("s{i}"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    sender.await.unwrap();
}

#[tokio::test]
async fn garbage_lines_are_reported_and_the_connection_keeps_working() {
    let (ours, theirs) = tokio::io::duplex(4096);
    let (r, w) = tokio::io::split(ours);
    let (peer, mut rx, _tasks) = spawn(r, w, PeerConfig { max_line: 100, ..PeerConfig::named("test") });
    let (mut their_read, mut their_write) = tokio::io::split(theirs);
    their_write.write_all(b"hello from a stray println\n").await.unwrap();
    their_write.write_all(&[b'x'; 300]).await.unwrap();
    their_write.write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":7}\n").await.unwrap();
    their_write.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"start\"}\n").await.unwrap();
    assert!(matches!(rx.recv().await.unwrap(), Incoming::BadLine(LineError::NotJson { line: 1, .. })));
    assert!(matches!(rx.recv().await.unwrap(), Incoming::BadLine(LineError::TooLong { line: 2, .. })));
    assert!(matches!(
        rx.recv().await.unwrap(),
        Incoming::Invalid { error: MessageError::Unclassifiable, id: Some(RequestId::Int(7)) }
    ));
    match rx.recv().await.unwrap() {
        Incoming::Request(r) => {
            assert_eq!(r.method, "start");
            peer.respond(r.id, Ok(json!({}))).await.unwrap();
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(peer.bad_lines(), 2);
    let mut buf = vec![0u8; 64];
    let n = tokio::io::AsyncReadExt::read(&mut their_read, &mut buf).await.unwrap();
    let answer: Value = serde_json::from_slice(&buf[..n]).unwrap();
    assert_eq!(answer, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
}

#[tokio::test]
async fn many_concurrent_calls_each_get_their_own_answer() {
    let ((a, _a_rx, _at), (b, b_rx, _bt)) = memory_pair();
    let _server = serve_echo(b, b_rx);
    let calls: Vec<_> = (0..200)
        .map(|i| {
            let a = a.clone();
            tokio::spawn(async move { (i, a.request_raw(&format!("m{i}"), Value::Null, None).await.unwrap()) })
        })
        .collect();
    for call in calls {
        let (i, v) = call.await.unwrap();
        assert_eq!(v, json!({"echo": format!("m{i}")}));
    }
}

#[tokio::test]
async fn dropping_every_peer_handle_closes_the_stream_for_the_other_side() {
    let ((a, a_rx, at), (_b, mut b_rx, _bt)) = memory_pair();
    drop((a, a_rx));
    // The writer ends when the last sender is gone; the reader of b then sees EOF.
    assert!(b_rx.recv().await.is_none());
    drop(at);
}

#[tokio::test]
async fn flush_returns_once_earlier_messages_are_written() {
    let ((a, _a_rx, _at), (_b, mut b_rx, _bt)) = memory_pair();
    a.notify_raw("first", json!({})).await.unwrap();
    a.flush().await.unwrap();
    // The notification is already on the wire: the other side gets it without more sends.
    match tokio::time::timeout(Duration::from_secs(5), b_rx.recv()).await.unwrap().unwrap() {
        Incoming::Notification(n) => assert_eq!(n.method, "first"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn calls_after_the_other_side_closed_fail_at_once_not_at_the_deadline() {
    let ((a, _a_rx, mut at), (b, b_rx, bt)) = memory_pair();
    drop((b, b_rx, bt));
    at.reader_finished().await;
    // No deadline on the call: without the closed check it would wait forever.
    let outcome = tokio::time::timeout(Duration::from_secs(30), a.request_raw("late", Value::Null, None)).await;
    assert_eq!(outcome.expect("the call hung"), Err(CallError::Closed { method: "late".into() }));
}
