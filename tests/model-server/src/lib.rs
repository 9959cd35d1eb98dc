//! A scripted, stateless model server for running agent CLIs (Claude Code, Codex, Gemini, OpenCode, …) offline.
//!
//! It speaks the Anthropic Messages API, the OpenAI Responses and Chat Completions APIs and the Gemini
//! `generateContent` API, streaming and not. What it answers is chosen from the request alone (see
//! [`Scenario`]): a keyword such as `mock:long` in the last user message, or — without a keyword — a shell
//! tool call when the client offers a shell tool, and a text quoting the tool output once the conversation
//! ends with a tool result. Every request is logged via `tracing` and kept in memory (`GET /__requests`).
//!
//! See `docs/model-server.md` for the scenarios and how to point each CLI at the server.

mod anthropic;
mod gemini;
mod openai;
mod script;
mod sse;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::{Method, StatusCode, Uri},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use script::{PATCH_FILE, PATCH_LINE, PLAIN_TEXT, Scenario, TOOL_PREAMBLE};

/// The longest a `held` answer waits for `POST /__release`.
pub const HOLD_LIMIT: Duration = Duration::from_secs(120);

/// Settings of the scripted server.
#[derive(Debug, Clone)]
pub struct Config {
    /// The command the `tool` scenario asks to run.
    pub shell_command: String,
    /// The path the `write` scenario asks to write (Claude's `Write` wants an absolute path).
    pub write_path: String,
    /// The content the `write` scenario asks to write.
    pub write_content: String,
    /// Delay between stream events in the `slow` scenario.
    pub slow_delay: Duration,
    /// Number of text chunks in the `slow` scenario.
    pub slow_chunks: usize,
    /// Minimum size in bytes of the `long` answer.
    pub long_bytes: usize,
    /// Model ids listed by `GET /v1/models`.
    pub models: Vec<String>,
    /// How many calls of the `flaky` scenario fail before the model answers.
    pub flaky_failures: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            shell_command: "echo hello".into(),
            write_path: "made_by_agent.txt".into(),
            write_content: "created by the terminull model server\n".into(),
            slow_delay: Duration::from_millis(250),
            slow_chunks: 20,
            long_bytes: 64 * 1024,
            models: vec!["mock-model".into(), "mock-claude".into()],
            flaky_failures: 2,
        }
    }
}

/// One request as kept in memory and served by `GET /__requests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Sequence number, starting at 1.
    pub seq: u64,
    /// HTTP method.
    pub method: String,
    /// Request path (without the query).
    pub path: String,
    /// Query string, if any.
    pub query: Option<String>,
    /// Which API answered: `anthropic`, `responses`, `chat`, `gemini`, `meta` or `unknown`.
    pub api: String,
    /// The model the request named.
    pub model: Option<String>,
    /// Whether a stream was requested.
    pub stream: bool,
    /// The scenario played, for model calls.
    pub scenario: Option<String>,
    /// Number of messages / input items / contents in the request.
    pub messages: usize,
    /// Names of the tools offered.
    pub tools: Vec<String>,
    /// Response status code.
    pub status: u16,
    /// The request body, when it was JSON.
    pub body: Option<Value>,
}

/// Errors of [`serve`].
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The HTTP server failed.
    #[error("model server i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// Shared server state.
#[derive(Debug)]
pub(crate) struct AppState {
    pub config: Config,
    log: Mutex<Vec<RequestRecord>>,
    ids: AtomicU64,
    /// Calls of the `flaky` scenario so far.
    flaky_calls: AtomicU64,
    /// Turns true at `POST /__release`; held answers wait for it.
    released: tokio::sync::watch::Sender<bool>,
}

impl AppState {
    /// A fresh id suffix, unique within this server.
    pub fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The scenario and outcome of a model call: [`script::select`], except that the
    /// first [`Config::flaky_failures`] `flaky` calls of this server that offer tools fail.
    pub(crate) fn select(&self, conv: &script::Conversation) -> (Scenario, script::Outcome) {
        let (scenario, outcome) = script::select(conv, &self.config);
        // Only the main calls (those that offer tools) fail: a title or other side call
        // made with the same prompt would otherwise take the failures the test is after.
        if scenario == Scenario::Flaky
            && !conv.tools.is_empty()
            && self.flaky_calls.fetch_add(1, Ordering::Relaxed) < self.config.flaky_failures
        {
            return (scenario, script::Outcome::Error);
        }
        (scenario, outcome)
    }

    fn record(&self, mut record: RequestRecord) {
        tracing::info!(
            method = %record.method, path = %record.path, api = %record.api, model = ?record.model, stream = record.stream,
            scenario = ?record.scenario, messages = record.messages, tools = record.tools.len(), status = record.status,
            "request"
        );
        let mut log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        record.seq = log.len() as u64 + 1;
        log.push(record);
    }

    /// How `reply`'s events are spaced.
    pub(crate) fn pace(&self, reply: &script::Reply) -> sse::Pace {
        sse::Pace::new(reply.delay, reply.held.then(|| self.released.subscribe()))
    }

    fn records(&self) -> Vec<RequestRecord> {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

pub(crate) type Shared = Arc<AppState>;

/// What an API module reports about a model call, for the request log.
#[derive(Debug, Default)]
pub(crate) struct CallSummary {
    pub api: &'static str,
    pub model: Option<String>,
    pub stream: bool,
    pub scenario: Option<Scenario>,
    pub messages: usize,
    pub tools: Vec<String>,
}

impl CallSummary {
    /// A model call to `api`: the model and `stream` as the body asks, the size of the
    /// conversation and the tools it offers.
    pub(crate) fn of(api: &'static str, body: &Value, conv: &script::Conversation) -> Self {
        Self {
            api,
            model: body["model"].as_str().map(str::to_owned),
            stream: body["stream"].as_bool().unwrap_or(false),
            scenario: None,
            messages: conv.history,
            tools: conv.tools.iter().map(|t| t.name.clone()).collect(),
        }
    }
}

/// A model call as every API handler starts it: the parsed body, the API-neutral
/// conversation, what the script answers and the summary that logs it.
pub(crate) struct ScriptedCall {
    pub body: Value,
    pub conv: script::Conversation,
    pub outcome: script::Outcome,
    pub summary: CallSummary,
}

impl ScriptedCall {
    /// Parses `body` (an unparsable one is answered, and logged, as the `Err`), reads its
    /// conversation with `conversation` and picks the scenario.
    pub(crate) fn read(
        state: &AppState,
        method: &Method,
        uri: &Uri,
        api: &'static str,
        body: &Bytes,
        conversation: fn(&Value) -> script::Conversation,
    ) -> Result<Self, Box<Response>> {
        let body = parse_body(state, method, uri, api, body)?;
        let conv = conversation(&body);
        let (scenario, outcome) = state.select(&conv);
        let mut summary = CallSummary::of(api, &body, &conv);
        summary.scenario = Some(scenario);
        Ok(Self { body, conv, outcome, summary })
    }
}

/// A scripted reply with what an API needs to render it.
pub(crate) struct ReplyContext<'a> {
    pub reply: &'a script::Reply,
    /// The model the request named, or the API's default.
    pub model: &'a str,
    /// This answer's id suffix, unique within the server.
    pub id: u64,
    /// The tokens the request counts as input.
    pub input_tokens: u64,
    /// The request body (for options such as `stream_options`).
    pub request: &'a Value,
}

/// An API whose model calls go the same way: read the call ([`ScriptedCall::read`]),
/// answer the `error` scenario with its error response and a reply as SSE frames or one
/// JSON body, and log it. (Gemini names the model in the path and is served apart.)
pub(crate) struct ScriptedApi {
    /// The API's name in the request log.
    pub name: &'static str,
    /// The model answered when the request names none.
    pub default_model: &'static str,
    pub conversation: fn(&Value) -> script::Conversation,
    /// The answer to the `error` scenario.
    pub error: fn() -> Response,
    /// The reply as a stream.
    pub frames: fn(&ReplyContext<'_>) -> Vec<String>,
    /// The reply as one JSON body.
    pub whole: fn(&ReplyContext<'_>) -> Value,
}

impl ScriptedApi {
    /// Answers one model call.
    pub(crate) async fn serve(&self, state: &AppState, method: &Method, uri: &Uri, body: &Bytes) -> Response {
        let ScriptedCall { body, conv, outcome, summary } =
            match ScriptedCall::read(state, method, uri, self.name, body, self.conversation) {
                Ok(call) => call,
                Err(response) => return *response,
            };
        let model = summary.model.clone().unwrap_or_else(|| self.default_model.into());
        let response = match outcome {
            script::Outcome::Error => (self.error)(),
            script::Outcome::Reply(reply) => {
                let context = ReplyContext {
                    reply: &reply,
                    model: &model,
                    id: state.next_id(),
                    input_tokens: conv.input_tokens,
                    request: &body,
                };
                answer(state, &reply, summary.stream, || (self.frames)(&context), || (self.whole)(&context)).await
            }
        };
        logged(state, method, uri, Some(body), summary, response)
    }
}

/// Sends a scripted reply the way every API does: as the SSE `frames` when `stream`,
/// else as one JSON body once the reply's pace allows.
pub(crate) async fn answer(
    state: &AppState,
    reply: &script::Reply,
    stream: bool,
    frames: impl FnOnce() -> Vec<String>,
    whole: impl FnOnce() -> Value,
) -> Response {
    if stream {
        sse::response(frames(), state.pace(reply))
    } else {
        state.pace(reply).before_answer().await;
        Json(whole()).into_response()
    }
}

/// Records a request and passes its response through.
pub(crate) fn logged(
    state: &AppState,
    method: &Method,
    uri: &Uri,
    body: Option<Value>,
    summary: CallSummary,
    response: Response,
) -> Response {
    state.record(RequestRecord {
        seq: 0,
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        api: summary.api.to_owned(),
        model: summary.model,
        stream: summary.stream,
        scenario: summary.scenario.map(|s| s.name().to_owned()),
        messages: summary.messages,
        tools: summary.tools,
        status: response.status().as_u16(),
        body,
    });
    response
}

/// Parses a JSON request body, or answers 400.
pub(crate) fn parse_body(
    state: &AppState,
    method: &Method,
    uri: &Uri,
    api: &'static str,
    body: &Bytes,
) -> Result<Value, Box<Response>> {
    serde_json::from_slice(body).map_err(|e| {
        let response = (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {"type": "invalid_request_error", "message": e.to_string()}})),
        )
            .into_response();
        Box::new(logged(state, method, uri, None, CallSummary { api, ..CallSummary::default() }, response))
    })
}

/// Builds the router (exposed for embedding; [`serve`] is the usual entry point).
pub fn router(config: Config) -> Router {
    let state: Shared = Arc::new(AppState {
        config,
        log: Mutex::new(Vec::new()),
        ids: AtomicU64::new(0),
        flaky_calls: AtomicU64::new(0),
        released: tokio::sync::watch::Sender::new(false),
    });
    Router::new()
        .route("/", get(root))
        .route("/__requests", get(requests))
        .route("/__release", post(release))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/v1/messages", post(anthropic::messages))
        .route("/v1/messages/count_tokens", post(anthropic::count_tokens))
        .route("/v1/responses", post(openai::responses))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1beta/models", get(gemini::models))
        .route("/v1beta/models/{*rest}", post(gemini::call))
        .fallback(fallback)
        .with_state(state)
}

/// Serves the scripted API on `listener` until the task is dropped or the server fails.
pub async fn serve(listener: tokio::net::TcpListener, config: Config) -> Result<(), ServeError> {
    axum::serve(listener, router(config)).await?;
    Ok(())
}

fn meta(api: &'static str) -> CallSummary {
    CallSummary { api, ..CallSummary::default() }
}

async fn root(State(state): State<Shared>, method: Method, uri: Uri) -> Response {
    logged(&state, &method, &uri, None, meta("meta"), "terminull model server\n".into_response())
}

/// Lets every `held` answer, waiting or to come, go on.
async fn release(State(state): State<Shared>) -> Response {
    state.released.send_replace(true);
    "released\n".into_response()
}

async fn requests(State(state): State<Shared>) -> Response {
    Json(state.records()).into_response()
}

fn model_object(id: &str) -> Value {
    json!({"id": id, "object": "model", "type": "model", "created": 0, "owned_by": "terminull",
           "display_name": id, "created_at": "2026-01-01T00:00:00Z"})
}

async fn models(State(state): State<Shared>, method: Method, uri: Uri) -> Response {
    let data: Vec<Value> = state.config.models.iter().map(|m| model_object(m)).collect();
    let body = json!({"object": "list", "data": data, "has_more": false,
        "first_id": state.config.models.first(), "last_id": state.config.models.last()});
    logged(&state, &method, &uri, None, meta("meta"), Json(body).into_response())
}

async fn model(
    State(state): State<Shared>,
    method: Method,
    uri: Uri,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    logged(&state, &method, &uri, None, meta("meta"), Json(model_object(&id)).into_response())
}

async fn fallback(State(state): State<Shared>, method: Method, uri: Uri, body: Bytes) -> Response {
    let body = serde_json::from_slice(&body).ok();
    let response = (
        StatusCode::NOT_FOUND,
        Json(json!({"error": {"type": "not_found_error", "message": format!("no scripted route for {method} {}", uri.path())}})),
    )
        .into_response();
    logged(&state, &method, &uri, body, meta("unknown"), response)
}
