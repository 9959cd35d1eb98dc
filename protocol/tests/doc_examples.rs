//! Every JSON example in docs/*.md is parsed and checked against the Rust types.
//!
//! Convention (documented in docs/README.md): a fenced block whose info string
//! starts with `json` names what it holds in its second word:
//! - ```` ```json block ````: one block; `blocks::validate` accepts it.
//! - ```` ```json control ````: one control message.
//! - ```` ```json relay ````: one relay frame.
//! - ```` ```json bridge ````: one bridge → client message (local socket).
//! - ```` ```json declaration ````: one adapter declaration; `check_declaration` accepts it.
//! - ```` ```json declaration-invalid ````: a declaration `check_declaration` refuses.
//! - ```` ```json value ````: any JSON (only parsed).
//! - ```` ```jsonl rpc ````: an exchange of JSON-RPC messages, one per line; each
//!   request's params, each response's result and each notification's params are
//!   decoded as the method's typed params/result.
//!
//! Typed examples must be canonical: re-encoding the decoded value gives back
//! exactly the example's JSON, so the docs never show a shape the code would not send.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use terminull_protocol::adapter::{self, check_declaration};
use terminull_protocol::jsonrpc::{Message, RequestId, RpcError, decode_params};
use terminull_protocol::{blocks, control, relay};

fn docs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

#[derive(Debug)]
struct Example {
    file: String,
    line: usize,
    kind: String,
    text: String,
}

impl Example {
    fn at(&self) -> String {
        format!("{}:{} (```{})", self.file, self.line, self.kind)
    }
}

fn examples() -> Vec<Example> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(docs_dir())
        .expect("docs/ exists")
        .map(|e| e.expect("readable docs entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).expect("readable doc");
        let mut current: Option<Example> = None;
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            match current.as_mut() {
                None => {
                    if let Some(info) = trimmed.strip_prefix("```")
                        && info.starts_with("json")
                    {
                        current = Some(Example {
                            file: file.clone(),
                            line: i + 1,
                            kind: info.trim().to_owned(),
                            text: String::new(),
                        });
                    }
                }
                Some(ex) => {
                    if trimmed.starts_with("```") {
                        out.push(current.take().unwrap());
                    } else {
                        ex.text.push_str(line);
                        ex.text.push('\n');
                    }
                }
            }
        }
        assert!(current.is_none(), "{file}: unclosed code fence");
    }
    out
}

fn parse_json(ex: &Example, text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", ex.at()))
}

fn assert_canonical<T: serde::Serialize>(ex: &Example, original: &Value, typed: &T) {
    let again = serde_json::to_value(typed).expect("serializes");
    assert_eq!(&again, original, "{}: re-encoding the decoded value changed it", ex.at());
}

/// Checks one example; returns the block / control / relay type or method names it covers.
fn check(ex: &Example) -> Vec<String> {
    match ex.kind.as_str() {
        "json block" => {
            let v = parse_json(ex, &ex.text);
            let block = blocks::validate(v.clone()).unwrap_or_else(|e| panic!("{}: {e}", ex.at()));
            assert_canonical(ex, &v, &block);
            vec![format!("block:{}", block.block_type())]
        }
        "json control" => {
            let v = parse_json(ex, &ex.text);
            let c = control::parse(v.clone()).unwrap_or_else(|e| panic!("{}: {e}", ex.at()));
            assert_canonical(ex, &v, &c);
            vec![format!("control:{}", c.message.message_type())]
        }
        "json bridge" => {
            let v = parse_json(ex, &ex.text);
            let m: control::BridgeMessage =
                serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{}: {e}", ex.at()));
            assert_canonical(ex, &v, &m);
            if let control::BridgeMessage::Block { block, .. } = &m {
                blocks::validate(serde_json::to_value(block).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", ex.at()));
            }
            vec![]
        }
        "json relay" => {
            let v = parse_json(ex, &ex.text);
            let f: relay::RelayFrame = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{}: {e}", ex.at()));
            assert_canonical(ex, &v, &f);
            vec![format!("relay:{}", f.frame_type())]
        }
        "json declaration" => {
            let v = parse_json(ex, &ex.text);
            let d = check_declaration(&v).unwrap_or_else(|e| panic!("{}: {e:?}", ex.at()));
            assert_canonical(ex, &v, &d);
            vec!["declaration".into()]
        }
        "json declaration-invalid" => {
            let v = parse_json(ex, &ex.text);
            assert!(check_declaration(&v).is_err(), "{}: expected the contract check to refuse this", ex.at());
            vec![]
        }
        "json value" => {
            parse_json(ex, &ex.text);
            vec![]
        }
        "jsonl rpc" => check_exchange(ex),
        other => panic!("{}: unknown example kind `{other}` (see protocol/tests/doc_examples.rs)", ex.file),
    }
}

fn check_exchange(ex: &Example) -> Vec<String> {
    let mut pending: HashMap<RequestId, String> = HashMap::new();
    let mut covered = Vec::new();
    for line in ex.text.lines().filter(|l| !l.trim().is_empty()) {
        let v = parse_json(ex, line);
        let msg = Message::from_value(v.clone()).unwrap_or_else(|e| panic!("{}: {e}: {line}", ex.at()));
        assert_eq!(msg.to_value(), v, "{}: JSON-RPC envelope is not canonical: {line}", ex.at());
        match &msg {
            Message::Request(r) => {
                check_method_payload(ex, &r.method, "params", &r.params);
                assert!(pending.insert(r.id.clone(), r.method.clone()).is_none(), "{}: id {} reused", ex.at(), r.id);
                covered.push(format!("method:{}", r.method));
            }
            Message::Notification(n) => {
                check_method_payload(ex, &n.method, "params", &n.params);
                covered.push(format!("method:{}", n.method));
            }
            Message::Response(r) => {
                let id = r.id.as_ref().unwrap_or_else(|| panic!("{}: response without id", ex.at()));
                let method = pending.remove(id).unwrap_or_else(|| panic!("{}: response to unknown id {id}", ex.at()));
                match &r.outcome {
                    Ok(result) => check_method_payload(ex, &method, "result", result),
                    Err(RpcError { code, .. }) => assert!(*code < 0, "{}: error codes are negative", ex.at()),
                }
            }
        }
    }
    assert!(pending.is_empty(), "{}: requests without a response: {pending:?}", ex.at());
    covered
}

fn roundtrip<T: serde::de::DeserializeOwned + serde::Serialize>(ex: &Example, what: &str, v: &Value) {
    let typed: T = decode_params(v).unwrap_or_else(|e| panic!("{}: {what}: {e}", ex.at()));
    let again = serde_json::to_value(&typed).unwrap();
    // Absent params stand for `{}`.
    let original = if v.is_null() { Value::Object(Default::default()) } else { v.clone() };
    assert_eq!(again, original, "{}: {what} is not canonical", ex.at());
}

fn check_method_payload(ex: &Example, method: &str, part: &str, v: &Value) {
    macro_rules! dispatch {
        (requests: $($r:ty),* ; notifications: $($n:ty),*) => {
            $(
                if method == <$r>::METHOD {
                    let what = format!("{method} {part}");
                    if part == "params" {
                        roundtrip::<<$r as AdapterRequest>::Params>(ex, &what, v);
                    } else {
                        roundtrip::<<$r as AdapterRequest>::Result>(ex, &what, v);
                    }
                    return;
                }
            )*
            $(
                if method == <$n>::METHOD {
                    roundtrip::<<$n as AdapterNotification>::Params>(ex, &format!("{method} {part}"), v);
                    if method == adapter::Stream::METHOD {
                        blocks::validate(v["block"].clone()).unwrap_or_else(|e| panic!("{}: streamed block: {e}", ex.at()));
                    }
                    return;
                }
            )*
        };
    }
    use adapter::*;
    dispatch!(
        requests: Initialize, Detect, Start, Send, Interrupt, PermissionResponse, ListModels, GetUsage, Stop,
            ScanExternalSessions, IsCwdExternallyOwned, Mirror, LatestSidForCwd, TerminalResumeCommand, Release;
        notifications: Stream, SessionIdNotification
    );
    // Methods outside the protocol may appear only in examples of what the bridge refuses.
    assert!(ex.text.contains("\"error\""), "{}: method `{method}` is not part of the adapter protocol", ex.at());
}

#[test]
fn every_json_example_in_the_docs_decodes_to_the_documented_type() {
    let all = examples();
    assert!(!all.is_empty(), "no examples found in docs/");
    for ex in &all {
        check(ex);
    }
}

fn covered_in(file: &str) -> Vec<String> {
    examples().iter().filter(|e| e.file == file).flat_map(check).collect()
}

#[test]
fn block_protocol_doc_shows_every_block_type() {
    let covered = covered_in("block-protocol.md");
    for t in blocks::BLOCK_TYPES {
        assert!(
            covered.contains(&format!("block:{t}")),
            "docs/block-protocol.md has no ```json block example of `{t}`"
        );
    }
}

#[test]
fn adapter_protocol_doc_shows_every_method_in_an_exchange() {
    let covered = covered_in("adapter-protocol.md");
    for m in adapter::METHODS {
        assert!(
            covered.contains(&format!("method:{}", m.name)),
            "docs/adapter-protocol.md has no exchange using `{}`",
            m.name
        );
    }
    assert!(covered.contains(&"declaration".to_owned()), "docs/adapter-protocol.md shows no declaration");
}

#[test]
fn control_doc_shows_every_control_message() {
    let covered = covered_in("control-messages.md");
    for t in control::CONTROL_TYPES {
        assert!(covered.contains(&format!("control:{t}")), "docs/control-messages.md has no example of `{t}`");
    }
}

#[test]
fn relay_doc_shows_every_frame() {
    let covered = covered_in("relay.md");
    for t in relay::FRAME_TYPES {
        assert!(covered.contains(&format!("relay:{t}")), "docs/relay.md has no example of the `{t}` frame");
    }
}

#[test]
fn block_protocol_doc_lists_the_universal_slash_commands_as_the_code_does() {
    let doc = std::fs::read_to_string(docs_dir().join("block-protocol.md")).unwrap();
    let rows: Vec<String> = terminull_protocol::commands::UNIVERSAL_SLASH_COMMANDS
        .iter()
        .map(|(name, description)| format!("| `{name}` | {description} |"))
        .collect();
    let table: Vec<&str> = doc.lines().filter(|l| rows.iter().any(|r| r == l)).collect();
    assert_eq!(
        table,
        rows.iter().map(String::as_str).collect::<Vec<_>>(),
        "docs/block-protocol.md's table of universal commands differs from protocol/src/commands.rs"
    );
}
