//! The SDK's serve loop, driven in memory by a bridge-side peer: what an adapter
//! author gets for free (acknowledgement, closing what is left open, routing of
//! interrupt, permission answers and input during a turn, init-param filtering).

use std::time::Duration;

use serde_json::json;
use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::testing::{OnPermission, TestBridge, serve_in_memory};
use terminull_protocol::adapter::{self as proto, Empty, PermissionResponseParams};
use terminull_protocol::blocks::{PermissionOption, PermissionOptionKind, StreamedText};
use terminull_protocol::jsonrpc::{RpcError, codes};
use terminull_rpc::{CallError, Incoming};

/// A test adapter whose behaviour is chosen by the message text.
struct Scripted {
    init: StartParams,
}

impl Adapter for Scripted {
    const AGENT_ID: &'static str = "scripted";
    const DISPLAY_NAME: &'static str = "Scripted";
    const CLI_BINARY: Option<&'static str> = None;
    const CAPS: Caps = caps! {
        supported: [thinking, permissions, interrupt, input_during_turn],
        unsupported: [images, documents, subagents, terminal],
    };
    const LEASE: LeaseKind = LeaseKind::Persistent;
    const INIT_PARAMS: &'static [InitParam] = &[InitParam::Cwd];
    type Models = Provided;
    type Usage = NotProvided;

    async fn start(init: StartParams, _: &Session) -> Result<(Self, StartInfo), AdapterError> {
        Ok((Scripted { init }, StartInfo::default()))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        match message.text.as_str() {
            "init" => {
                let seen = serde_json::to_string(&self.init).unwrap();
                turn.emit(TextStreamer::new_text("m").replace(seen).unwrap()).await.unwrap();
                Ok(EndReason::Completed)
            }
            "leave-open" => {
                let mut tools = ToolCallTracker::new();
                turn.emit(tools.start("t1", "Bash", json!({"command": "ls"}), None, None).unwrap()).await.unwrap();
                turn.emit(TextStreamer::new_text("m").push("half")).await.unwrap();
                Ok(EndReason::Completed)
            }
            "fail" => Err(AdapterError::agent("the agent CLI crashed")),
            "burst" => {
                // A thousand tiny deltas at once, as an agent that prints word by word
                // faster than anyone reads.
                let mut t = TextStreamer::new_text("m");
                for i in 0..1000 {
                    turn.emit(t.push(&format!("{i} "))).await.unwrap();
                }
                turn.emit(t.finish().unwrap()).await.unwrap();
                Ok(EndReason::Completed)
            }
            "wait-interrupt" => {
                turn.emit(TextStreamer::new_thinking("r").push("thinking")).await.unwrap();
                turn.interrupted().await;
                Ok(EndReason::Interrupted)
            }
            "ask" => {
                let options = vec![PermissionOption {
                    id: "yes".into(),
                    label: "Yes".into(),
                    kind: PermissionOptionKind::AllowOnce,
                }];
                let choice = turn.ask_permission("Write", json!({"path": "a"}), options, None).await;
                let mut t = TextStreamer::new_text("m");
                turn.emit(t.replace(format!("choice: {choice:?}")).unwrap()).await.unwrap();
                turn.emit(t.finish().unwrap()).await.unwrap();
                Ok(EndReason::Completed)
            }
            "collect" => {
                let extra = turn.next_input().await.map(|m| m.text).unwrap_or_default();
                let mut t = TextStreamer::new_text("m");
                turn.emit(t.replace(format!("extra: {extra}")).unwrap()).await.unwrap();
                turn.emit(t.finish().unwrap()).await.unwrap();
                Ok(EndReason::Completed)
            }
            "break-contract" => {
                let mut t = TextStreamer::new_text("m");
                turn.emit(t.replace("a").unwrap()).await.unwrap();
                turn.emit(t.finish().unwrap()).await.unwrap();
                let late = BlockKind::Text(StreamedText::snapshot("m", "late", false));
                assert!(matches!(turn.emit(late).await, Err(TurnError::Contract(_))));
                Ok(EndReason::Completed)
            }
            _ => Ok(EndReason::Completed),
        }
    }
}

impl ListModels for Scripted {
    async fn list_models() -> Result<Vec<ModelInfo>, AdapterError> {
        Ok(vec![ModelInfo { id: "m1".into(), name: "Model 1".into(), description: None, is_default: true }])
    }
}

const T: Option<Duration> = Some(Duration::from_secs(5));

fn start_params(session: &str) -> proto::StartParams {
    proto::StartParams {
        session_id: session.into(),
        cwd: Some("/tmp/x".into()),
        model: Some("not-accepted".into()),
        binary: None,
        resume_session_id: None,
        effort: Some("high".into()),
        permission_mode: Some("not-accepted-either".into()),
    }
}

/// `Scripted` served in memory, its session started. Its turns are collected with
/// [`TestBridge::turn`], which also checks them against the turn contract.
async fn started() -> TestBridge {
    let b = serve_in_memory::<Scripted>();
    b.start(&start_params("s1")).await.unwrap();
    b
}

/// Collects a turn the bridge lets run (no permission asked, no interrupt).
async fn turn(b: &mut TestBridge) -> Vec<BlockKind> {
    b.turn(OnPermission::Interrupt, false).await
}

/// Sends `text` and collects its turn as [`turn`] does.
async fn say(b: &mut TestBridge, text: &str) -> Vec<BlockKind> {
    b.send_turn(text, OnPermission::Interrupt, false).await
}

fn end_reason(blocks: &[BlockKind]) -> EndReason {
    match blocks.last() {
        Some(BlockKind::SessionEnd(e)) => e.reason,
        other => panic!("turn did not end with session_end: {other:?}"),
    }
}

#[tokio::test]
async fn start_receives_only_the_accepted_init_params() {
    let mut b = started().await;
    let blocks = say(&mut b, "init").await;
    let BlockKind::Text(t) = &blocks[0] else { panic!("{blocks:?}") };
    let seen: serde_json::Value = serde_json::from_str(&t.text).unwrap();
    assert_eq!(seen, json!({"session_id": "s1", "cwd": "/tmp/x"}));
}

#[tokio::test]
async fn what_a_turn_leaves_open_is_closed_by_the_sdk() {
    let mut b = started().await;
    let blocks = say(&mut b, "leave-open").await;
    assert!(blocks.iter().any(|k| matches!(k, BlockKind::ToolResult(r) if r.is_error)), "{blocks:?}");
    assert_eq!(end_reason(&blocks), EndReason::Completed);
}

#[tokio::test]
async fn an_adapter_error_becomes_an_error_block_and_session_end_error() {
    let mut b = started().await;
    let blocks = say(&mut b, "fail").await;
    assert!(matches!(&blocks[0], BlockKind::Error(e) if e.message == "the agent CLI crashed"), "{blocks:?}");
    assert_eq!(end_reason(&blocks), EndReason::Error);
    // The session goes on.
    assert_eq!(end_reason(&say(&mut b, "plain").await), EndReason::Completed);
}

#[tokio::test]
async fn interrupt_reaches_the_running_turn() {
    let mut b = started().await;
    b.send("wait-interrupt").await.unwrap();
    b.interrupt().await;
    let blocks = turn(&mut b).await;
    assert_eq!(end_reason(&blocks), EndReason::Interrupted);
}

#[tokio::test]
async fn permission_answer_is_routed_to_the_waiting_turn() {
    let mut b = started().await;
    b.send("ask").await.unwrap();
    let request_id = loop {
        if let Some(Incoming::Notification(n)) = b.incoming.recv().await
            && let Ok(p) = n.params_as::<proto::Stream>()
            && let BlockKind::PermissionRequest(r) = p.block.kind
        {
            break r.request_id;
        }
    };
    let wrong = PermissionResponseParams { request_id: "nope".into(), option_id: "yes".into() };
    let err = b.peer.request::<proto::PermissionResponse>(&wrong, T).await.unwrap_err();
    assert!(matches!(err, CallError::Rpc { ref error, .. } if error.code == codes::NOT_FOUND), "{err:?}");
    let answer = PermissionResponseParams { request_id, option_id: "yes".into() };
    b.peer.request::<proto::PermissionResponse>(&answer, T).await.unwrap();
    let blocks = turn(&mut b).await;
    assert!(matches!(&blocks[0], BlockKind::Text(t) if t.text == "choice: Ok(\"yes\")"), "{blocks:?}");
}

#[tokio::test]
async fn input_during_a_turn_reaches_it_when_the_adapter_takes_it() {
    let mut b = started().await;
    b.send("collect").await.unwrap();
    let blocks = say(&mut b, "more").await;
    assert!(matches!(&blocks[0], BlockKind::Text(t) if t.text == "extra: more"), "{blocks:?}");
}

#[tokio::test]
async fn a_burst_of_deltas_goes_out_as_a_few_appends_that_rebuild_the_text() {
    let mut b = started().await;
    let blocks = say(&mut b, "burst").await;
    let texts: Vec<_> = blocks.iter().filter(|k| matches!(k, BlockKind::Text(_))).collect();
    assert!(texts.len() <= 5, "{} text chunks for 1000 deltas", texts.len());
    let whole: String = (0..1000).map(|i| format!("{i} ")).collect();
    assert_eq!(terminull_adapter_sdk::testing::final_texts(&blocks), [whole]);
}

#[tokio::test]
async fn a_block_that_breaks_the_contract_is_refused_and_not_sent() {
    let mut b = started().await;
    let blocks = say(&mut b, "break-contract").await; // which checks the turn contract
    assert_eq!(blocks.len(), 3, "{blocks:?}");
}

#[tokio::test]
async fn class_level_calls_and_undeclared_methods() {
    let b = started().await;
    let models = b.peer.request::<proto::ListModels>(&Empty {}, T).await.unwrap();
    assert_eq!(models.models[0].id, "m1");
    // get_usage is NotProvided, and no hooks are declared.
    for method in ["get_usage", "mirror", "release", "teleport"] {
        let err = b.peer.request_raw(method, serde_json::Value::Null, T).await.unwrap_err();
        assert!(
            matches!(err, CallError::Rpc { ref error, .. } if error.code == codes::METHOD_NOT_FOUND),
            "{method}: {err:?}"
        );
    }
    let err = b.peer.request::<proto::Start>(&start_params("again"), T).await.unwrap_err();
    assert!(matches!(err, CallError::Rpc { ref error, .. } if error.code == codes::BUSY), "{err:?}");
}

#[tokio::test]
async fn stop_answers_then_the_loop_ends() {
    let b = started().await;
    b.peer.request::<proto::Stop>(&Empty {}, T).await.unwrap();
    b.wait_for_serve_end().await;
}

/// `initialize` with `versions` (the bridge's `protocol_version` and, when given, its
/// `newest_protocol_version`): the declaration, or the error it was refused with.
async fn initialize(b: &TestBridge, versions: (u32, Option<u32>)) -> Result<serde_json::Value, RpcError> {
    let mut params =
        json!({"protocol_version": versions.0, "bridge": {"name": "x", "version": "0"}, "offered_init_params": []});
    if let Some(newest) = versions.1 {
        params["newest_protocol_version"] = json!(newest);
    }
    match b.peer.request_raw("initialize", params, T).await {
        Ok(declaration) => Ok(declaration),
        Err(CallError::Rpc { error, .. }) => Err(error),
        Err(other) => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn wrong_protocol_version_is_refused_with_data() {
    let b = started().await;
    let error = initialize(&b, (9, None)).await.unwrap_err();
    assert_eq!(error.code, codes::PROTOCOL_VERSION_MISMATCH);
    assert_eq!(error.data, Some(json!({"supported": [2], "requested": 9})));
}

#[tokio::test]
async fn a_bridge_of_version_1_only_is_refused_naming_both_versions() {
    let b = started().await;
    let error = initialize(&b, (1, None)).await.unwrap_err();
    assert_eq!(error.code, codes::PROTOCOL_VERSION_MISMATCH);
    assert_eq!(error.message, "this adapter speaks adapter protocol 2, the bridge 1");
    let declaration = initialize(&b, (1, Some(2))).await.unwrap();
    assert_eq!(declaration["protocol_version"], 2);
}
