//! Gemini API: `POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent` (`?alt=sse` or a JSON
//! array) and `:countTokens`; `GET /v1beta/models`.

use axum::{
    Json,
    body::Bytes,
    extract::{Path, State},
    http::{Method, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use crate::{
    CallSummary, Shared, answer, logged, parse_body,
    script::{self, Conversation, Outcome, Reply, ToolSpec},
    sse,
};

fn conversation(body: &Value) -> Conversation {
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    let tool_result = contents.last().and_then(|c| {
        let response = c["parts"].as_array()?.iter().rev().find_map(|p| p.get("functionResponse"))?.get("response")?;
        Some(match response.get("output") {
            Some(Value::String(s)) => s.clone(),
            _ => response.to_string(),
        })
    });
    let last_user_text = contents
        .iter()
        .rev()
        .filter(|c| c["role"] == "user")
        .find_map(|c| {
            let texts: Vec<&str> = c["parts"].as_array()?.iter().filter_map(|p| p["text"].as_str()).collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        })
        .unwrap_or_default();
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["functionDeclarations"].as_array().cloned().unwrap_or_default())
        .filter_map(|d| {
            let schema = d.get("parametersJsonSchema").or_else(|| d.get("parameters")).cloned().unwrap_or(Value::Null);
            Some(ToolSpec { name: d["name"].as_str()?.to_owned(), schema })
        })
        .collect();
    let config = &body["generationConfig"];
    let json_schema = (config["responseMimeType"] == "application/json").then(|| {
        config.get("responseJsonSchema").or_else(|| config.get("responseSchema")).cloned().unwrap_or(json!({}))
    });
    Conversation {
        last_user_text,
        tool_result,
        tools,
        history: contents.len(),
        json_schema,
        input_tokens: script::input_tokens(body),
    }
}

/// `GET /v1beta/models`.
pub(crate) async fn models(State(state): State<Shared>, method: Method, uri: Uri) -> Response {
    let models: Vec<Value> = state
        .config
        .models
        .iter()
        .map(|m| {
            json!({"name": format!("models/{m}"), "displayName": m,
                        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"]})
        })
        .collect();
    let summary = CallSummary { api: "gemini", ..CallSummary::default() };
    logged(&state, &method, &uri, None, summary, Json(json!({"models": models})).into_response())
}

/// `POST /v1beta/models/{model}:{method}`.
pub(crate) async fn call(
    State(state): State<Shared>,
    method: Method,
    uri: Uri,
    Path(rest): Path<String>,
    body: Bytes,
) -> Response {
    let body = match parse_body(&state, &method, &uri, "gemini", &body) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let (model, action) = rest.rsplit_once(':').unwrap_or((rest.as_str(), ""));
    let conv = conversation(&body);
    let mut summary = CallSummary {
        api: "gemini",
        model: Some(model.to_owned()),
        stream: action == "streamGenerateContent",
        scenario: None,
        messages: conv.history,
        tools: conv.tools.iter().map(|t| t.name.clone()).collect(),
    };
    let response = match action {
        "countTokens" => Json(json!({"totalTokens": conv.input_tokens})).into_response(),
        "generateContent" | "streamGenerateContent" => {
            let (scenario, outcome) = state.select(&conv);
            summary.scenario = Some(scenario);
            match outcome {
                Outcome::Error => error_response(),
                Outcome::Reply(reply) => {
                    let sse_wanted = uri.query().is_some_and(|q| q.split('&').any(|p| p == "alt=sse"));
                    // `streamGenerateContent` without `alt=sse` answers every chunk at once, as a JSON array.
                    let frames =
                        || chunks(&reply, conv.input_tokens).iter().map(|c| sse::data(&c.to_string())).collect();
                    let body = || {
                        if summary.stream {
                            Value::Array(chunks(&reply, conv.input_tokens))
                        } else {
                            whole(&reply, conv.input_tokens)
                        }
                    };
                    answer(&state, &reply, summary.stream && sse_wanted, frames, body).await
                }
            }
        }
        other => (
            StatusCode::NOT_FOUND,
            Json(
                json!({"error": {"code": 404, "message": format!("unknown method {other:?}"), "status": "NOT_FOUND"}}),
            ),
        )
            .into_response(),
    };
    logged(&state, &method, &uri, Some(body), summary, response)
}

fn error_response() -> Response {
    let body = json!({"error": {"code": 500, "message": "scripted server error (mock:error)", "status": "INTERNAL"}});
    (StatusCode::INTERNAL_SERVER_ERROR, Json(body)).into_response()
}

fn usage(reply: &Reply, input_tokens: u64) -> Value {
    let out = reply.output_tokens();
    json!({"promptTokenCount": input_tokens, "candidatesTokenCount": out, "totalTokenCount": input_tokens + out})
}

fn candidate(parts: Vec<Value>, finish: Option<&str>) -> Value {
    let mut c = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        c["finishReason"] = json!(f);
    }
    c
}

fn function_call_part(reply: &Reply) -> Option<Value> {
    reply.tool_call.as_ref().map(|c| json!({"functionCall": {"name": c.name, "args": c.arguments}}))
}

fn whole(reply: &Reply, input_tokens: u64) -> Value {
    let mut parts = Vec::new();
    if let Some(t) = &reply.thinking {
        parts.push(json!({"text": t, "thought": true}));
    }
    if !reply.text_chunks.is_empty() {
        parts.push(json!({"text": reply.text()}));
    }
    parts.extend(function_call_part(reply));
    json!({"candidates": [candidate(parts, Some("STOP"))], "usageMetadata": usage(reply, input_tokens), "modelVersion": "mock-model"})
}

/// The stream: one response per chunk; the last carries `finishReason` and usage.
fn chunks(reply: &Reply, input_tokens: u64) -> Vec<Value> {
    let mut parts: Vec<Value> = Vec::new();
    if let Some(t) = &reply.thinking {
        parts.extend(script::words(t).into_iter().map(|w| json!({"text": w, "thought": true})));
    }
    parts.extend(reply.text_chunks.iter().map(|t| json!({"text": t})));
    parts.extend(function_call_part(reply));
    let last = parts.len().saturating_sub(1);
    let mut out: Vec<Value> = parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let mut r = json!({"candidates": [candidate(vec![p], (i == last).then_some("STOP"))], "modelVersion": "mock-model"});
            if i == last {
                r["usageMetadata"] = usage(reply, input_tokens);
            }
            r
        })
        .collect();
    if out.is_empty() {
        out.push(json!({"candidates": [candidate(vec![json!({"text": ""})], Some("STOP"))],
                        "usageMetadata": usage(reply, input_tokens), "modelVersion": "mock-model"}));
    }
    out
}
