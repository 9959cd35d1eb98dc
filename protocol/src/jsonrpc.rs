//! JSON-RPC 2.0 envelopes, as used on the adapter's stdio (one message per line).
//!
//! The envelope is classified by hand ([`Message::from_value`]) rather than with an
//! untagged serde enum, so a malformed message gets an error that says what is wrong
//! with it, and a response whose `result` is `null` stays a success. `"jsonrpc":"2.0"`
//! is checked on input and added on output; the rest of the crate never sees it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

use crate::blocks::{json_type_name, strip_position};

/// A request id: an integer or a string. `92` and `"92"` are different ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum RequestId {
    /// A numeric id (the bridge always uses these).
    Int(i64),
    /// A string id (allowed for adapters written in other languages).
    Str(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Int(i) => write!(f, "{i}"),
            // Debug formatting keeps the quotes so that 92 and "92" read differently in logs.
            RequestId::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for RequestId {
    fn from(i: i64) -> Self {
        RequestId::Int(i)
    }
}

impl RequestId {
    fn to_value(&self) -> Value {
        match self {
            RequestId::Int(i) => json!(i),
            RequestId::Str(s) => json!(s),
        }
    }

    /// Accepts integers, whole-number floats (`4.0`, which some JSON encoders emit) and strings.
    pub fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) => Some(RequestId::Str(s.clone())),
            Value::Number(n) => n.as_i64().map(RequestId::Int).or_else(|| {
                n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| RequestId::Int(f as i64))
            }),
            _ => None,
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    /// One of the codes in [`codes`].
    pub code: i64,
    /// A sentence for a person.
    pub message: String,
    /// Machine-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// Error codes: JSON-RPC's own, then the adapter protocol's (ACP-aligned where ACP has one).
pub mod codes {
    /// The line was not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON was not a valid JSON-RPC message.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method, or an optional method the adapter did not declare.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params did not match the method's schema.
    pub const INVALID_PARAMS: i64 = -32602;
    /// A bug on the answering side.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The agent needs the user to log in first (ACP's code).
    pub const AUTH_REQUIRED: i64 = -32000;
    /// The peers speak incompatible protocol versions; `data` = `{supported, requested}`.
    pub const PROTOCOL_VERSION_MISMATCH: i64 = -32001;
    /// The named session, request or resource does not exist (ACP's code).
    pub const NOT_FOUND: i64 = -32002;
    /// The request cannot be taken now (e.g. `send` during a turn without `cap_input_during_turn`).
    pub const BUSY: i64 = -32003;
    /// The agent CLI itself failed (not installed, crashed, refused the arguments).
    pub const AGENT_ERROR: i64 = -32010;
    /// The request was cancelled (ACP / LSP's code).
    pub const CANCELLED: i64 = -32800;
}

impl RpcError {
    /// An error with no `data`.
    #[must_use]
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    /// `method not found`, naming the method.
    #[must_use]
    pub fn method_not_found(method: &str) -> Self {
        Self::new(codes::METHOD_NOT_FOUND, format!("method not found: {method}"))
    }

    /// `invalid params`, naming the method and the problem.
    #[must_use]
    pub fn invalid_params(method: &str, problem: impl std::fmt::Display) -> Self {
        Self::new(codes::INVALID_PARAMS, format!("invalid params for {method}: {problem}"))
    }

    /// An internal error.
    #[must_use]
    pub fn internal(problem: impl std::fmt::Display) -> Self {
        Self::new(codes::INTERNAL_ERROR, problem.to_string())
    }

    /// Attaches machine-readable detail.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// A request: expects exactly one response with the same id.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Chosen by the sender, unique among its outstanding requests.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The params; `Value::Null` when absent.
    pub params: Value,
}

/// A notification: no id, no response.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The params; `Value::Null` when absent.
    pub params: Value,
}

/// A response to a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The request's id; `None` only for an error about an unreadable request.
    pub id: Option<RequestId>,
    /// `result` or `error`.
    pub outcome: Result<Value, RpcError>,
}

/// Any JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Has `id` and `method`.
    Request(Request),
    /// Has `method`, no `id`.
    Notification(Notification),
    /// Has `id` and `result` or `error`.
    Response(Response),
}

/// Why a JSON value is not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// Not an object (batches are not part of this protocol).
    #[error("a JSON-RPC message must be an object, found {found}")]
    NotAnObject {
        /// The JSON type found instead.
        found: &'static str,
    },
    /// `jsonrpc` is missing or not `"2.0"`.
    #[error("`jsonrpc` must be \"2.0\"")]
    BadVersion,
    /// `id` is not an integer or a string.
    #[error("`id` must be an integer or a string, found {found}")]
    BadId {
        /// What was found.
        found: String,
    },
    /// `method` is not a string.
    #[error("`method` must be a string")]
    BadMethod,
    /// Neither `method` nor `result`/`error`.
    #[error("message has neither `method` nor `result`/`error`")]
    Unclassifiable,
    /// A response with both `result` and `error`.
    #[error("response has both `result` and `error`")]
    ResultAndError,
    /// A response whose `error` is not `{code, message, data?}`.
    #[error("malformed `error` object: {problem}")]
    BadError {
        /// What the decoder said.
        problem: String,
    },
}

impl Message {
    /// Classifies a decoded JSON value.
    pub fn from_value(value: Value) -> Result<Self, MessageError> {
        let Value::Object(mut map) = value else {
            return Err(MessageError::NotAnObject { found: json_type_name(&value) });
        };
        if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(MessageError::BadVersion);
        }
        let id = match map.remove("id") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(v) => {
                Some(Some(RequestId::from_value(&v).ok_or_else(|| MessageError::BadId { found: v.to_string() })?))
            }
        };
        let params = map.remove("params").unwrap_or(Value::Null);
        match (map.remove("method"), id) {
            (Some(Value::String(method)), None) => Ok(Message::Notification(Notification { method, params })),
            (Some(Value::String(method)), Some(Some(id))) => Ok(Message::Request(Request { id, method, params })),
            (Some(Value::String(_)), Some(None)) => Err(MessageError::BadId { found: "null".into() }),
            (Some(_), _) => Err(MessageError::BadMethod),
            (None, id) => {
                let id = id.ok_or(MessageError::Unclassifiable)?;
                let outcome = match (map.remove("result"), map.remove("error")) {
                    (Some(_), Some(_)) => return Err(MessageError::ResultAndError),
                    (Some(result), None) => Ok(result),
                    (None, Some(error)) => Err(serde_json::from_value::<RpcError>(error)
                        .map_err(|e| MessageError::BadError { problem: strip_position(&e.to_string()) })?),
                    (None, None) => return Err(MessageError::Unclassifiable),
                };
                Ok(Message::Response(Response { id, outcome }))
            }
        }
    }

    /// The wire form, with `"jsonrpc":"2.0"`.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("jsonrpc".into(), json!("2.0"));
        match self {
            Message::Request(r) => {
                map.insert("id".into(), r.id.to_value());
                map.insert("method".into(), json!(r.method));
                if !r.params.is_null() {
                    map.insert("params".into(), r.params.clone());
                }
            }
            Message::Notification(n) => {
                map.insert("method".into(), json!(n.method));
                if !n.params.is_null() {
                    map.insert("params".into(), n.params.clone());
                }
            }
            Message::Response(r) => {
                map.insert("id".into(), r.id.as_ref().map_or(Value::Null, RequestId::to_value));
                match &r.outcome {
                    Ok(result) => map.insert("result".into(), result.clone()),
                    Err(error) => map.insert("error".into(), json!(error)),
                };
            }
        }
        Value::Object(map)
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Message::from_value(Value::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// Decodes typed params or results; `null` stands for `{}` so that methods whose
/// params are an empty object may omit them.
pub fn decode_params<T: DeserializeOwned>(value: &Value) -> Result<T, ParamsError> {
    let value = if value.is_null() { Value::Object(Map::new()) } else { value.clone() };
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        ParamsError { field: (path != ".").then_some(path), problem: strip_position(&e.inner().to_string()) }
    })
}

/// Why params or a result do not decode as the method's type: the field at fault
/// (a path like `options[0].id`, absent when the whole value is wrong) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{problem}", field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct ParamsError {
    /// The path of the field at fault, when one field is.
    pub field: Option<String>,
    /// What is wrong, as serde words it.
    pub problem: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_classified_by_their_fields() {
        let cases: Vec<(Value, Result<&str, MessageError>)> = vec![
            (json!({"jsonrpc": "2.0", "id": 1, "method": "start", "params": {}}), Ok("request")),
            (json!({"jsonrpc": "2.0", "method": "stream", "params": {}}), Ok("notification")),
            (json!({"jsonrpc": "2.0", "id": 1, "result": null}), Ok("response")),
            (json!({"jsonrpc": "2.0", "id": "a", "error": {"code": -32601, "message": "no"}}), Ok("response")),
            (json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse"}}), Ok("response")),
            (json!([1]), Err(MessageError::NotAnObject { found: "array" })),
            (json!({"id": 1, "method": "x"}), Err(MessageError::BadVersion)),
            (json!({"jsonrpc": "1.0", "id": 1, "method": "x"}), Err(MessageError::BadVersion)),
            (
                json!({"jsonrpc": "2.0", "id": {"x": 1}, "method": "x"}),
                Err(MessageError::BadId { found: "{\"x\":1}".into() }),
            ),
            (json!({"jsonrpc": "2.0", "id": null, "method": "x"}), Err(MessageError::BadId { found: "null".into() })),
            (json!({"jsonrpc": "2.0", "id": 1, "method": 3}), Err(MessageError::BadMethod)),
            (json!({"jsonrpc": "2.0", "id": 1}), Err(MessageError::Unclassifiable)),
            (json!({"jsonrpc": "2.0", "result": 1}), Err(MessageError::Unclassifiable)),
            (
                json!({"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1, "message": ""}}),
                Err(MessageError::ResultAndError),
            ),
        ];
        for (input, want) in cases {
            let got = Message::from_value(input.clone()).map(|m| match m {
                Message::Request(_) => "request",
                Message::Notification(_) => "notification",
                Message::Response(_) => "response",
            });
            assert_eq!(got, want, "input {input}");
        }
    }

    #[test]
    fn null_result_stays_a_success() {
        let m = Message::from_value(json!({"jsonrpc": "2.0", "id": 4, "result": null})).unwrap();
        assert_eq!(m, Message::Response(Response { id: Some(RequestId::Int(4)), outcome: Ok(Value::Null) }));
        assert_eq!(m.to_value(), json!({"jsonrpc": "2.0", "id": 4, "result": null}));
    }

    #[test]
    fn whole_number_float_ids_are_accepted_as_integers() {
        let m = Message::from_value(json!({"jsonrpc": "2.0", "id": 4.0, "result": 1})).unwrap();
        assert!(matches!(m, Message::Response(Response { id: Some(RequestId::Int(4)), .. })));
        let bad = Message::from_value(json!({"jsonrpc": "2.0", "id": 4.5, "result": 1}));
        assert!(matches!(bad, Err(MessageError::BadId { .. })));
    }

    #[test]
    fn string_and_integer_ids_display_differently() {
        assert_eq!(RequestId::Int(92).to_string(), "92");
        assert_eq!(RequestId::Str("92".into()).to_string(), "\"92\"");
    }

    #[test]
    fn malformed_error_object_is_reported() {
        let e = Message::from_value(json!({"jsonrpc": "2.0", "id": 1, "error": {"message": "x"}})).unwrap_err();
        assert_eq!(e, MessageError::BadError { problem: "missing field `code`".into() });
    }

    #[test]
    fn decode_params_treats_null_as_empty_object_and_names_bad_fields() {
        #[derive(Debug, Deserialize, PartialEq)]
        struct P {
            #[serde(default)]
            cwd: Option<String>,
        }
        assert_eq!(decode_params::<P>(&Value::Null), Ok(P { cwd: None }));
        let error = decode_params::<P>(&json!({"cwd": 3})).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("cwd"));
        assert_eq!(error.to_string(), "cwd: invalid type: integer `3`, expected a string");
    }
}
