//! OpenAI APIs: Responses (`POST /v1/responses`) and Chat Completions (`POST /v1/chat/completions`).

use axum::{
    Json,
    body::Bytes,
    extract::State,
    http::{Method, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use crate::{
    ReplyContext, ScriptedApi, Shared,
    script::{self, Conversation, Reply, ToolSpec, content_text},
    sse,
};

fn error_response() -> Response {
    let body = json!({"error": {"message": "scripted server error (mock:error)", "type": "server_error", "param": null, "code": "server_error"}});
    (StatusCode::INTERNAL_SERVER_ERROR, Json(body)).into_response()
}

// ---------------------------------------------------------------------------------------------------------------
// Responses

fn responses_conversation(body: &Value) -> Conversation {
    let items: Vec<Value> = match &body["input"] {
        Value::String(s) => vec![json!({"type": "message", "role": "user", "content": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    };
    let turns: Vec<&Value> =
        items.iter().filter(|i| !matches!(i["role"].as_str(), Some("developer" | "system"))).collect();
    let tool_result = turns
        .last()
        .filter(|i| {
            matches!(
                i["type"].as_str(),
                Some("function_call_output" | "custom_tool_call_output" | "local_shell_call_output")
            )
        })
        .map(|i| content_text(&i["output"]));
    let tools = ToolSpec::all_in(&body["tools"], |t| t, "parameters");
    Conversation::of_turns(body, &turns, items.len(), tool_result, tools)
}

const RESPONSES: ScriptedApi = ScriptedApi {
    name: "responses",
    default_model: "mock-model",
    conversation: responses_conversation,
    error: error_response,
    frames: |c| ResponsesRender::of(c).frames(),
    whole: |c| {
        let r = ResponsesRender::of(c);
        r.response("completed", r.items())
    },
};

/// `POST /v1/responses`.
pub(crate) async fn responses(State(state): State<Shared>, method: Method, uri: Uri, body: Bytes) -> Response {
    RESPONSES.serve(&state, &method, &uri, &body).await
}

struct ResponsesRender<'a> {
    reply: &'a Reply,
    model: &'a str,
    id: u64,
    input_tokens: u64,
}

impl<'a> ResponsesRender<'a> {
    fn of(c: &ReplyContext<'a>) -> Self {
        Self { reply: c.reply, model: c.model, id: c.id, input_tokens: c.input_tokens }
    }

    fn rs_id(&self) -> String {
        format!("rs_mock_{:06}", self.id)
    }
    fn msg_id(&self) -> String {
        format!("msg_mock_{:06}", self.id)
    }
    fn fc_id(&self) -> String {
        format!("fc_mock_{:06}", self.id)
    }

    fn reasoning_item(&self, text: &str) -> Value {
        json!({"type": "reasoning", "id": self.rs_id(), "summary": [{"type": "summary_text", "text": text}], "encrypted_content": null})
    }

    fn message_item(&self, text: &str, status: &str) -> Value {
        let content = if status == "completed" {
            json!([{"type": "output_text", "text": text, "annotations": []}])
        } else {
            json!([])
        };
        json!({"type": "message", "id": self.msg_id(), "role": "assistant", "status": status, "content": content})
    }

    fn call_item(&self, arguments: &str, status: &str) -> Option<Value> {
        let call = self.reply.tool_call.as_ref()?;
        Some(json!({"type": "function_call", "id": self.fc_id(), "call_id": format!("call_mock_{:06}", self.id),
                    "name": call.name, "arguments": arguments, "status": status}))
    }

    /// The completed output items.
    fn items(&self) -> Vec<Value> {
        let mut items = Vec::new();
        if let Some(t) = &self.reply.thinking {
            items.push(self.reasoning_item(t));
        }
        if !self.reply.text_chunks.is_empty() {
            items.push(self.message_item(&self.reply.text(), "completed"));
        }
        if let Some(args) = self.reply.tool_call.as_ref().map(|c| c.arguments.to_string()) {
            items.extend(self.call_item(&args, "completed"));
        }
        items
    }

    fn response(&self, status: &str, output: Vec<Value>) -> Value {
        let usage = (status == "completed").then(|| {
            let out = self.reply.output_tokens();
            json!({"input_tokens": self.input_tokens, "input_tokens_details": {"cached_tokens": 0},
                   "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
                   "total_tokens": self.input_tokens + out})
        });
        json!({"id": format!("resp_mock_{:06}", self.id), "object": "response", "created_at": 1_700_000_000,
               "status": status, "model": self.model, "output": output, "usage": usage, "error": null})
    }

    fn frames(&self) -> Vec<String> {
        let mut events: Vec<Value> =
            vec![json!({"type": "response.created", "response": self.response("in_progress", vec![])})];
        let mut index = 0;
        if let Some(t) = &self.reply.thinking {
            events.push(json!({"type": "response.output_item.added", "output_index": index,
                               "item": {"type": "reasoning", "id": self.rs_id(), "summary": []}}));
            events.push(
                json!({"type": "response.reasoning_summary_part.added", "item_id": self.rs_id(), "output_index": index,
                               "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
            );
            for delta in script::words(t) {
                events.push(json!({"type": "response.reasoning_summary_text.delta", "item_id": self.rs_id(),
                                   "output_index": index, "summary_index": 0, "delta": delta}));
            }
            events.push(
                json!({"type": "response.reasoning_summary_text.done", "item_id": self.rs_id(), "output_index": index,
                               "summary_index": 0, "text": t}),
            );
            events.push(
                json!({"type": "response.output_item.done", "output_index": index, "item": self.reasoning_item(t)}),
            );
            index += 1;
        }
        if !self.reply.text_chunks.is_empty() {
            let text = self.reply.text();
            events.push(json!({"type": "response.output_item.added", "output_index": index, "item": self.message_item("", "in_progress")}));
            events.push(json!({"type": "response.content_part.added", "item_id": self.msg_id(), "output_index": index,
                               "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}));
            for delta in &self.reply.text_chunks {
                events.push(
                    json!({"type": "response.output_text.delta", "item_id": self.msg_id(), "output_index": index,
                                   "content_index": 0, "delta": delta}),
                );
            }
            events.push(json!({"type": "response.output_text.done", "item_id": self.msg_id(), "output_index": index,
                               "content_index": 0, "text": text}));
            events.push(json!({"type": "response.content_part.done", "item_id": self.msg_id(), "output_index": index,
                               "content_index": 0, "part": {"type": "output_text", "text": text, "annotations": []}}));
            events.push(json!({"type": "response.output_item.done", "output_index": index, "item": self.message_item(&text, "completed")}));
            index += 1;
        }
        if let Some(args) = self.reply.tool_call.as_ref().map(|c| c.arguments.to_string()) {
            events.extend(
                self.call_item("", "in_progress")
                    .map(|item| json!({"type": "response.output_item.added", "output_index": index, "item": item})),
            );
            for delta in script::chunk_chars(&args, 16) {
                events.push(json!({"type": "response.function_call_arguments.delta", "item_id": self.fc_id(),
                                   "output_index": index, "delta": delta}));
            }
            events.push(json!({"type": "response.function_call_arguments.done", "item_id": self.fc_id(),
                               "output_index": index, "arguments": args}));
            events.extend(
                self.call_item(&args, "completed")
                    .map(|item| json!({"type": "response.output_item.done", "output_index": index, "item": item})),
            );
        }
        events.push(json!({"type": "response.completed", "response": self.response("completed", self.items())}));
        events
            .into_iter()
            .enumerate()
            .map(|(seq, mut e)| {
                e["sequence_number"] = json!(seq);
                let name = e["type"].as_str().unwrap_or_default().to_owned();
                sse::named(&name, &e)
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Chat Completions

fn chat_conversation(body: &Value) -> Conversation {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let turns: Vec<&Value> =
        messages.iter().filter(|m| !matches!(m["role"].as_str(), Some("developer" | "system"))).collect();
    let tool_result = turns.last().filter(|m| m["role"] == "tool").map(|m| content_text(&m["content"]));
    let tools = ToolSpec::all_in(&body["tools"], |t| &t["function"], "parameters");
    Conversation::of_turns(body, &turns, messages.len(), tool_result, tools)
}

const CHAT_COMPLETIONS: ScriptedApi = ScriptedApi {
    name: "chat",
    default_model: "mock-model",
    conversation: chat_conversation,
    error: error_response,
    frames: chat_frames,
    whole: chat_message,
};

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(State(state): State<Shared>, method: Method, uri: Uri, body: Bytes) -> Response {
    CHAT_COMPLETIONS.serve(&state, &method, &uri, &body).await
}

fn chat_usage(reply: &Reply, input_tokens: u64) -> Value {
    let out = reply.output_tokens();
    json!({"prompt_tokens": input_tokens, "completion_tokens": out, "total_tokens": input_tokens + out})
}

fn finish_reason(reply: &Reply) -> &'static str {
    if reply.tool_call.is_some() { "tool_calls" } else { "stop" }
}

fn chat_message(&ReplyContext { reply, model, id, input_tokens, .. }: &ReplyContext<'_>) -> Value {
    let mut message = json!({"role": "assistant", "content": (!reply.text_chunks.is_empty()).then(|| reply.text())});
    if let Some(t) = &reply.thinking {
        message["reasoning_content"] = json!(t);
    }
    if let Some(call) = &reply.tool_call {
        message["tool_calls"] = json!([{"id": format!("call_mock_{id:06}"), "type": "function",
            "function": {"name": call.name, "arguments": call.arguments.to_string()}}]);
    }
    json!({"id": format!("chatcmpl-mock-{id:06}"), "object": "chat.completion", "created": 1_700_000_000, "model": model,
           "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply)}],
           "usage": chat_usage(reply, input_tokens)})
}

fn chat_frames(&ReplyContext { reply, model, id, input_tokens, request }: &ReplyContext<'_>) -> Vec<String> {
    let include_usage = request["stream_options"]["include_usage"].as_bool().unwrap_or(false);
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": format!("chatcmpl-mock-{id:06}"), "object": "chat.completion.chunk", "created": 1_700_000_000,
               "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if let Some(t) = &reply.thinking {
        chunks.extend(script::words(t).into_iter().map(|w| chunk(json!({"reasoning_content": w}), None)));
    }
    chunks.extend(reply.text_chunks.iter().map(|t| chunk(json!({"content": t}), None)));
    if let Some(call) = &reply.tool_call {
        chunks.push(chunk(
            json!({"tool_calls": [{"index": 0, "id": format!("call_mock_{id:06}"), "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            None,
        ));
        for part in script::chunk_chars(&call.arguments.to_string(), 16) {
            chunks.push(chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}), None));
        }
    }
    chunks.push(chunk(json!({}), Some(finish_reason(reply))));
    if include_usage {
        chunks.push(
            json!({"id": format!("chatcmpl-mock-{id:06}"), "object": "chat.completion.chunk", "created": 1_700_000_000,
                           "model": model, "choices": [], "usage": chat_usage(reply, input_tokens)}),
        );
    }
    let mut frames: Vec<String> = chunks.iter().map(|c| sse::data(&c.to_string())).collect();
    frames.push(sse::data("[DONE]"));
    frames
}
