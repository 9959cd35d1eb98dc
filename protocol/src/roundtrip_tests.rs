//! Property tests: every wire type survives JSON → type → JSON unchanged, for
//! arbitrary values, and the NDJSON codec frames any sequence of values however
//! the bytes are split.

use bytes::BytesMut;
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::codec::{Decoder, Encoder};

use crate::adapter::{self, AdapterNotification, AdapterRequest, Declaration};
use crate::blocks::{self, Block};
use crate::control::{self, Control};
use crate::jsonrpc::{Message, Notification, Request, RequestId, Response, RpcError};
use crate::ndjson::NdjsonCodec;
use crate::relay::RelayFrame;

/// Encodes, decodes from the JSON text, and checks value and JSON both survive.
fn assert_roundtrip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T) {
    let text = serde_json::to_string(value).expect("serializes");
    let back: T = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(&back, value, "value changed through {text}");
    assert_eq!(serde_json::to_string(&back).unwrap(), text, "JSON changed");
}

fn message() -> impl Strategy<Value = Message> {
    let id = prop_oneof![any::<i64>().prop_map(RequestId::Int), ".{0,10}".prop_map(RequestId::Str)];
    let params =
        prop_oneof![Just(Value::Null), crate::arb::json_value().prop_filter("params are not null", |v| !v.is_null())];
    let error = (
        any::<i64>(),
        ".{0,20}",
        proptest::option::of(crate::arb::json_value().prop_filter("data is not null", |v| !v.is_null())),
    )
        .prop_map(|(code, message, data)| RpcError { code, message, data });
    prop_oneof![
        (id.clone(), "[a-z_/]{1,20}", params.clone()).prop_map(|(id, method, params)| Message::Request(Request {
            id,
            method,
            params
        })),
        ("[a-z_/]{1,20}", params).prop_map(|(method, params)| Message::Notification(Notification { method, params })),
        (id.clone(), crate::arb::json_value())
            .prop_map(|(id, v)| Message::Response(Response { id: Some(id), outcome: Ok(v) })),
        (proptest::option::of(id), error).prop_map(|(id, e)| Message::Response(Response { id, outcome: Err(e) })),
    ]
}

macro_rules! method_roundtrips {
    (requests: $($r:ident),* ; notifications: $($n:ident),*) => {
        proptest! {
            $(
                #[test]
                #[allow(non_snake_case)]
                fn $r(params in any::<<adapter::$r as AdapterRequest>::Params>(),
                      result in any::<<adapter::$r as AdapterRequest>::Result>()) {
                    assert_roundtrip(&params);
                    assert_roundtrip(&result);
                    // And through a typed request envelope.
                    let req = Request::typed::<adapter::$r>(RequestId::Int(7), &params);
                    prop_assert_eq!(req.params_as::<adapter::$r>().unwrap(), params);
                }
            )*
            $(
                #[test]
                #[allow(non_snake_case)]
                fn $n(params in any::<<adapter::$n as AdapterNotification>::Params>()) {
                    assert_roundtrip(&params);
                    let note = Notification::typed::<adapter::$n>(&params);
                    prop_assert_eq!(note.params_as::<adapter::$n>().unwrap(), params);
                }
            )*
        }
    };
}

mod adapter_methods {
    use super::*;
    method_roundtrips!(
        requests: Initialize, Detect, Start, Send, Interrupt, PermissionResponse, ListModels, GetUsage, Stop,
            ScanExternalSessions, IsCwdExternallyOwned, Mirror, LatestSidForCwd, TerminalResumeCommand, Release;
        notifications: Stream, SessionIdNotification
    );

    #[test]
    fn every_method_of_the_table_has_a_roundtrip_test() {
        // The macro call above lists the methods by type; this pins it to METHODS.
        let tested = [
            "initialize",
            "detect",
            "start",
            "send",
            "interrupt",
            "permission_response",
            "list_models",
            "get_usage",
            "stop",
            "scan_external_sessions",
            "is_cwd_externally_owned",
            "mirror",
            "latest_sid_for_cwd",
            "terminal_resume_command",
            "release",
            "stream",
            "session_id",
        ];
        let table: Vec<_> = adapter::METHODS.iter().map(|m| m.name).collect();
        assert_eq!(table, tested);
    }
}

proptest! {
    #[test]
    fn blocks_roundtrip(block in any::<Block>()) {
        assert_roundtrip(&block);
    }

    #[test]
    fn validate_accepts_every_block_the_bridge_can_emit(block in any::<Block>()) {
        let v = serde_json::to_value(&block).unwrap();
        prop_assert_eq!(blocks::validate(v).unwrap(), block);
    }

    #[test]
    fn control_messages_roundtrip(c in any::<Control>()) {
        assert_roundtrip(&c);
        prop_assert_eq!(control::parse(serde_json::to_value(&c).unwrap()).unwrap(), c);
    }

    #[test]
    fn bridge_messages_roundtrip(m in any::<crate::control::BridgeMessage>()) {
        assert_roundtrip(&m);
    }

    #[test]
    fn relay_frames_roundtrip(f in any::<RelayFrame>()) {
        assert_roundtrip(&f);
        let value = serde_json::to_value(&f).unwrap();
        prop_assert_eq!(value["type"].as_str(), Some(f.frame_type()));
        prop_assert!(crate::relay::FRAME_TYPES.contains(&f.frame_type()));
    }

    #[test]
    fn declarations_roundtrip(d in any::<Declaration>()) {
        assert_roundtrip(&d);
    }

    #[test]
    fn jsonrpc_messages_roundtrip(m in message()) {
        let v = m.to_value();
        prop_assert_eq!(Message::from_value(v.clone()).unwrap(), m);
        let text = serde_json::to_string(&v).unwrap();
        prop_assert_eq!(serde_json::from_str::<Message>(&text).unwrap().to_value(), v);
    }

    #[test]
    fn ndjson_frames_any_values_split_anywhere(
        values in proptest::collection::vec(crate::arb::json_value(), 0..12),
        cuts in proptest::collection::vec(1usize..40, 0..30),
    ) {
        let mut codec = NdjsonCodec::default();
        let mut wire = BytesMut::new();
        for v in &values {
            codec.encode(v, &mut wire).unwrap();
        }
        let mut decoder = NdjsonCodec::default();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut rest = &wire[..];
        let mut cuts = cuts.into_iter();
        while !rest.is_empty() {
            let n = cuts.next().unwrap_or(rest.len()).min(rest.len());
            buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            while let Some(item) = decoder.decode(&mut buf).unwrap() {
                out.push(item.unwrap());
            }
        }
        while let Some(item) = decoder.decode_eof(&mut buf).unwrap() {
            out.push(item.unwrap());
        }
        prop_assert_eq!(out, values);
    }
}
