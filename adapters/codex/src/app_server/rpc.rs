//! JSON-RPC over `codex app-server`'s stdio, as codex speaks it: one JSON message per
//! line, and codex leaves out the `"jsonrpc": "2.0"` member in what it sends (0.171.0),
//! so the project's strict peer (`terminull_rpc`) cannot read it. The adapter sends
//! `"jsonrpc": "2.0"` (codex accepts it) and reads messages by their members:
//! `method` and `id` → a request, `method` alone → a notification, `id` with `result` or
//! `error` → a response.
//!
//! Request ids are a counter per process (1, 2, 3, …), so a recorded run can be
//! replayed by a fake CLI.

use serde_json::{Value, json};

/// A message from codex.
#[derive(Debug, Clone, PartialEq)]
pub enum Msg {
    /// A request codex wants answered (approvals).
    Request {
        /// Its id, echoed in the answer (codex uses numbers from 0).
        id: Value,
        /// The method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// A notification.
    Notification {
        /// The method.
        method: String,
        /// Its params (`null` when absent).
        params: Value,
    },
    /// The answer to one of the adapter's requests.
    Response {
        /// The request's id (the adapter's ids are numbers).
        id: Option<i64>,
        /// The result, or the error's code and message.
        outcome: Result<Value, RpcFailure>,
    },
    /// Something that is none of these; what is wrong.
    Bad(String),
}

/// An error codex answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct RpcFailure {
    /// The JSON-RPC error code (`-32601`: method not found).
    pub code: i64,
    /// Its message.
    pub message: String,
}

/// Why a call of the adapter got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFailure {
    /// Codex answered an error.
    #[error("{method}: {error}")]
    Rpc {
        /// The method called.
        method: String,
        /// What codex answered.
        error: RpcFailure,
    },
    /// No answer in time.
    #[error("{method}: no answer within {seconds} s")]
    Timeout {
        /// The method called.
        method: String,
        /// The deadline.
        seconds: u64,
    },
    /// The process closed its stdout (or its stdin could not be written).
    #[error("{method}: codex app-server closed the connection")]
    Closed {
        /// The method called.
        method: String,
    },
}

impl Msg {
    /// Classifies one decoded line.
    pub fn classify(value: Value) -> Msg {
        let Value::Object(mut map) = value else {
            return Msg::Bad(format!("not a JSON object: {}", preview(&value)));
        };
        let method = map.get("method").and_then(Value::as_str).map(str::to_owned);
        let params = map.remove("params").unwrap_or(Value::Null);
        match (method, map.remove("id")) {
            (Some(method), Some(id)) if !id.is_null() => Msg::Request { id, method, params },
            (Some(method), _) => Msg::Notification { method, params },
            (None, Some(id)) => {
                let outcome = match (map.remove("result"), map.remove("error")) {
                    (Some(result), None) => Ok(result),
                    (_, Some(error)) => Err(RpcFailure {
                        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: error.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_owned(),
                    }),
                    (None, None) => return Msg::Bad("a response with neither result nor error".to_owned()),
                };
                Msg::Response { id: id.as_i64(), outcome }
            }
            (None, None) => Msg::Bad(format!("neither a method nor an id: {}", preview(&Value::Object(map)))),
        }
    }
}

fn preview(value: &Value) -> String {
    let text = value.to_string();
    terminull_adapter_sdk::bounds::bounded_chars(&text, 120)
}

/// A request line.
pub fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A notification line.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// The answer to codex's request `id`: a result, or an error.
pub fn response(id: &Value, outcome: Result<Value, RpcFailure>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_classified_by_their_members_without_a_jsonrpc_member() {
        assert_eq!(
            Msg::classify(json!({"id": 1, "result": {"userAgent": "x"}})),
            Msg::Response { id: Some(1), outcome: Ok(json!({"userAgent": "x"})) }
        );
        assert_eq!(
            Msg::classify(json!({"id": 2, "error": {"code": -32601, "message": "nope"}})),
            Msg::Response { id: Some(2), outcome: Err(RpcFailure { code: -32601, message: "nope".into() }) }
        );
        assert_eq!(
            Msg::classify(json!({"method": "item/commandExecution/requestApproval", "id": 0, "params": {"a": 1}})),
            Msg::Request {
                id: json!(0),
                method: "item/commandExecution/requestApproval".into(),
                params: json!({"a": 1})
            }
        );
        assert_eq!(
            Msg::classify(json!({"method": "turn/started", "params": {}, "emittedAtMs": 1})),
            Msg::Notification { method: "turn/started".into(), params: json!({}) }
        );
    }

    #[test]
    fn hostile_messages_are_bad_not_a_panic() {
        for value in [json!([1, 2]), json!("x"), json!({"id": 3}), json!({"params": {}}), json!(null)] {
            assert!(matches!(Msg::classify(value.clone()), Msg::Bad(_)), "{value}");
        }
        let huge = json!({"weird": "x".repeat(100_000)});
        let Msg::Bad(why) = Msg::classify(huge) else { panic!("bad") };
        assert!(why.len() < 400, "{}", why.len());
    }

    #[test]
    fn lines_the_adapter_writes() {
        assert_eq!(
            request(3, "turn/start", json!({})),
            json!({"jsonrpc": "2.0", "id": 3, "method": "turn/start", "params": {}})
        );
        assert_eq!(
            response(&json!(0), Ok(json!({"decision": "accept"}))),
            json!({"jsonrpc": "2.0", "id": 0, "result": {"decision": "accept"}})
        );
        let refused = response(&json!(5), Err(RpcFailure { code: -32601, message: "no".into() }));
        assert_eq!(refused["error"], json!({"code": -32601, "message": "no"}));
        assert_eq!(notification("initialized", json!({}))["method"], "initialized");
    }
}
