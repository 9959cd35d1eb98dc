//! Anthropic Messages API: `POST /v1/messages` (JSON and SSE) and `POST /v1/messages/count_tokens`.

use axum::{
    Json,
    body::Bytes,
    extract::State,
    http::{Method, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use crate::{
    CallSummary, ReplyContext, ScriptedApi, Shared, logged, parse_body,
    script::{self, Conversation, Reply, ToolSpec, content_text},
    sse,
};

pub(crate) fn conversation(body: &Value) -> Conversation {
    let empty = Vec::new();
    let messages = body["messages"].as_array().unwrap_or(&empty);
    // Claude Code may put `role: "system"` entries inside `messages`; they are not turns.
    let turns: Vec<&Value> = messages.iter().filter(|m| m["role"] != "system").collect();
    let tool_result = turns.last().filter(|m| m["role"] == "user").and_then(|m| {
        m["content"].as_array()?.iter().rev().find(|b| b["type"] == "tool_result").map(|b| content_text(&b["content"]))
    });
    let tools = ToolSpec::all_in(&body["tools"], |t| t, "input_schema");
    Conversation::of_turns(body, &turns, messages.len(), tool_result, tools)
}

const MESSAGES: ScriptedApi = ScriptedApi {
    name: "anthropic",
    default_model: "mock-claude",
    conversation,
    error: error_response,
    frames: stream_frames,
    whole: message,
};

/// `POST /v1/messages`.
pub(crate) async fn messages(State(state): State<Shared>, method: Method, uri: Uri, body: Bytes) -> Response {
    MESSAGES.serve(&state, &method, &uri, &body).await
}

/// The `error` scenario: HTTP 529 with an `overloaded_error` body.
fn error_response() -> Response {
    let status = StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let body =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded (scripted mock:error)"}});
    (status, Json(body)).into_response()
}

/// `POST /v1/messages/count_tokens`.
pub(crate) async fn count_tokens(State(state): State<Shared>, method: Method, uri: Uri, body: Bytes) -> Response {
    let body = match parse_body(&state, &method, &uri, "anthropic", &body) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let conv = conversation(&body);
    let summary = CallSummary::of("anthropic", &body, &conv);
    let response = Json(json!({"input_tokens": conv.input_tokens})).into_response();
    logged(&state, &method, &uri, Some(body), summary, response)
}

const SIGNATURE: &str = "bW9jay1zaWduYXR1cmU=";

fn stop_reason(reply: &Reply) -> &'static str {
    if reply.tool_call.is_some() { "tool_use" } else { "end_turn" }
}

fn tool_id(id: u64) -> String {
    format!("toolu_mock_{id:06}")
}

fn message(&ReplyContext { reply, model, id, input_tokens, .. }: &ReplyContext<'_>) -> Value {
    let mut content = Vec::new();
    if let Some(thinking) = &reply.thinking {
        content.push(json!({"type": "thinking", "thinking": thinking, "signature": SIGNATURE}));
    }
    if !reply.text_chunks.is_empty() {
        content.push(json!({"type": "text", "text": reply.text()}));
    }
    if let Some(call) = &reply.tool_call {
        content.push(json!({"type": "tool_use", "id": tool_id(id), "name": call.name, "input": call.arguments}));
    }
    json!({
        "id": format!("msg_mock_{id:06}"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason(reply), "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": reply.output_tokens(),
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    })
}

fn stream_frames(&ReplyContext { reply, model, id, input_tokens, .. }: &ReplyContext<'_>) -> Vec<String> {
    let mut frames = vec![sse::named(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": format!("msg_mock_{id:06}"), "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
    )];
    let mut index = 0;
    let mut block = |frames: &mut Vec<String>, start: Value, deltas: Vec<Value>| {
        frames.push(sse::named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for delta in deltas {
            frames.push(sse::named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        frames.push(sse::named("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
        index += 1;
    };
    if let Some(thinking) = &reply.thinking {
        let mut deltas: Vec<Value> =
            script::words(thinking).into_iter().map(|t| json!({"type": "thinking_delta", "thinking": t})).collect();
        deltas.push(json!({"type": "signature_delta", "signature": SIGNATURE}));
        block(&mut frames, json!({"type": "thinking", "thinking": "", "signature": ""}), deltas);
    }
    if !reply.text_chunks.is_empty() {
        let deltas = reply.text_chunks.iter().map(|t| json!({"type": "text_delta", "text": t})).collect();
        block(&mut frames, json!({"type": "text", "text": ""}), deltas);
    }
    if let Some(call) = &reply.tool_call {
        let deltas = script::chunk_chars(&call.arguments.to_string(), 16)
            .into_iter()
            .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
            .collect();
        block(&mut frames, json!({"type": "tool_use", "id": tool_id(id), "name": call.name, "input": {}}), deltas);
    }
    frames.push(sse::named(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
                "usage": {"input_tokens": input_tokens, "output_tokens": reply.output_tokens()}}),
    ));
    frames.push(sse::named("message_stop", &json!({"type": "message_stop"})));
    frames
}
