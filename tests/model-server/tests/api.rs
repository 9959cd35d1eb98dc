//! End-to-end tests over real sockets on 127.0.0.1:0 with a minimal HTTP/1.1 client.

use std::net::SocketAddr;

use serde_json::{Value, json};
use terminull_model_server::{Config, PATCH_FILE, PATCH_LINE, PLAIN_TEXT, RequestRecord, TOOL_PREAMBLE, serve};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

async fn start() -> SocketAddr {
    start_with(Config::default()).await
}

async fn start_with(config: Config) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(serve(listener, config));
    addr
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("json body")
    }
    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("utf8")
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    /// SSE frames as (event name, data).
    fn sse(&self) -> Vec<(Option<String>, String)> {
        assert_eq!(self.header("content-type"), Some("text/event-stream"));
        self.text()
            .split("\n\n")
            .filter(|f| !f.trim().is_empty())
            .map(|frame| {
                let mut event = None;
                let mut data = String::new();
                for line in frame.lines() {
                    if let Some(e) = line.strip_prefix("event: ") {
                        event = Some(e.to_owned());
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data.push_str(d);
                    }
                }
                (event, data)
            })
            .collect()
    }
    /// SSE data payloads parsed as JSON (skipping `[DONE]`).
    fn sse_json(&self) -> Vec<Value> {
        self.sse()
            .into_iter()
            .filter(|(_, d)| d != "[DONE]")
            .map(|(_, d)| serde_json::from_str(&d).expect("event json"))
            .collect()
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let size_str = std::str::from_utf8(&raw[..line_end]).expect("size utf8");
        let size = usize::from_str_radix(size_str.split(';').next().unwrap_or("").trim(), 16).expect("chunk size");
        raw = &raw[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

async fn request(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let body = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(body.as_bytes()).await.expect("write body");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("header end");
    let head = String::from_utf8(raw[..split].to_vec()).expect("head utf8");
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).expect("status");
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))).collect();
    let rest = &raw[split + 4..];
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_vec() };
    Resp { status, headers, body }
}

async fn post(addr: SocketAddr, path: &str, body: Value) -> Resp {
    request(addr, "POST", path, Some(&body)).await
}

async fn records(addr: SocketAddr) -> Vec<RequestRecord> {
    serde_json::from_value(request(addr, "GET", "/__requests", None).await.json()).expect("records")
}

// --- tool schemas of the CLIs ------------------------------------------------------------------------------------

fn claude_bash() -> (String, Value) {
    (
        "Bash".into(),
        json!({"type":"object","required":["command"],"properties":{"command":{"type":"string"},"description":{"type":"string"},"timeout":{"type":"number"}}}),
    )
}
fn codex_exec() -> (String, Value) {
    (
        "exec_command".into(),
        json!({"type":"object","required":["cmd"],"properties":{"cmd":{"type":"string"},"justification":{"type":"string"},"max_output_tokens":{"type":"number"}}}),
    )
}
fn codex_shell() -> (String, Value) {
    (
        "shell".into(),
        json!({"type":"object","required":["command"],"properties":{"command":{"type":"array","items":{"type":"string"}},"workdir":{"type":"string"}}}),
    )
}
fn gemini_shell() -> (String, Value) {
    (
        "run_shell_command".into(),
        json!({"type":"object","required":["command"],"properties":{"command":{"type":"string"},"description":{"type":"string"}}}),
    )
}
fn unknown_shell() -> (String, Value) {
    ("do_it".into(), json!({"type":"object","properties":{"cmd":{"type":"string"}}}))
}
fn claude_write() -> (String, Value) {
    (
        "Write".into(),
        json!({"type":"object","required":["file_path","content"],"properties":{"file_path":{"type":"string"},"content":{"type":"string"}}}),
    )
}
fn read_tool() -> (String, Value) {
    ("Read".into(), json!({"type":"object","properties":{"file_path":{"type":"string"}}}))
}

/// The command argument a shell-tool flavour should receive.
fn expected_command(name: &str) -> (&'static str, Value) {
    match name {
        "exec_command" | "do_it" => ("cmd", json!("echo hello")),
        "shell" => ("command", json!(["bash", "-lc", "echo hello"])),
        _ => ("command", json!("echo hello")),
    }
}

const OUTPUT: &str = "hello-from-the-tool-42";

// --- Anthropic ---------------------------------------------------------------------------------------------------

fn anthropic_tools(tools: &[(String, Value)]) -> Value {
    tools.iter().map(|(n, s)| json!({"name": n, "description": "d", "input_schema": s})).collect()
}

fn anthropic_body(text: &str, tools: &[(String, Value)], stream: bool) -> Value {
    json!({"model": "claude-opus-4-8", "max_tokens": 1000, "stream": stream, "tools": anthropic_tools(tools),
           "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]})
}

#[tokio::test]
async fn anthropic_side_requests() {
    let addr = start().await;
    assert_eq!(request(addr, "HEAD", "/", None).await.status, 200);
    assert_eq!(request(addr, "GET", "/", None).await.status, 200);
    let models = request(addr, "GET", "/v1/models", None).await;
    assert_eq!(models.status, 200);
    assert_eq!(models.json()["data"][0]["id"], "mock-model");
    let count = post(addr, "/v1/messages/count_tokens", anthropic_body("hi", &[], false)).await;
    assert_eq!(count.status, 200);
    assert!(count.json()["input_tokens"].as_u64().is_some_and(|n| n > 0));
    let recs = records(addr).await;
    let seen: Vec<(&str, &str)> = recs.iter().map(|r| (r.method.as_str(), r.path.as_str())).collect();
    assert_eq!(seen, [("HEAD", "/"), ("GET", "/"), ("GET", "/v1/models"), ("POST", "/v1/messages/count_tokens")]);
}

#[tokio::test]
async fn the_keyword_that_appears_last_wins() {
    // Claude Code, after a failed turn, resends its prompt with the next one in one message.
    let addr = start().await;
    let body = json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "mock:error boom\n"}, {"type": "text", "text": "mock:plain after"}]}]});
    let r = post(addr, "/v1/messages", body).await;
    assert_eq!(r.status, 200, "the newer prompt (plain) is answered, not the failed one (error)");
    let r = post(addr, "/v1/messages", anthropic_body("mock:plain first, then mock:error", &[], false)).await;
    assert_eq!(r.status, 529);
}

#[tokio::test]
async fn anthropic_plain_non_streaming() {
    let addr = start().await;
    let r = post(addr, "/v1/messages?beta=true", anthropic_body("Say hi", &[read_tool()], false)).await;
    assert_eq!(r.status, 200);
    let m = r.json();
    assert_eq!(m["type"], "message");
    assert_eq!(m["stop_reason"], "end_turn");
    assert_eq!(m["content"], json!([{"type": "text", "text": PLAIN_TEXT}]));
    let recs = records(addr).await;
    assert_eq!(recs[0].query.as_deref(), Some("beta=true"));
    assert_eq!(recs[0].scenario.as_deref(), Some("plain"));
    assert_eq!(recs[0].tools, ["Read"]);
}

/// Checks an Anthropic stream's event order and returns (thinking, text, tool name, tool input, stop reason).
fn parse_anthropic_stream(r: &Resp) -> (String, String, Option<String>, Option<Value>, String) {
    let frames = r.sse();
    let names: Vec<&str> = frames.iter().map(|(e, _)| e.as_deref().expect("named event")).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    let (mut thinking, mut text, mut json_parts, mut tool, mut signature, mut stop) =
        (String::new(), String::new(), String::new(), None, false, String::new());
    let mut open: Option<u64> = None;
    for (name, data) in &frames {
        let e: Value = serde_json::from_str(data).expect("json");
        assert_eq!(Some(e["type"].as_str().expect("type")), name.as_deref());
        match name.as_deref().unwrap_or_default() {
            "content_block_start" => {
                assert!(open.is_none(), "blocks must not overlap");
                open = e["index"].as_u64();
                if e["content_block"]["type"] == "tool_use" {
                    tool = e["content_block"]["name"].as_str().map(str::to_owned);
                }
            }
            "content_block_delta" => {
                assert_eq!(e["index"].as_u64(), open);
                let d = &e["delta"];
                match d["type"].as_str().unwrap_or_default() {
                    "thinking_delta" => thinking.push_str(d["thinking"].as_str().expect("thinking")),
                    "signature_delta" => signature = true,
                    "text_delta" => text.push_str(d["text"].as_str().expect("text")),
                    "input_json_delta" => json_parts.push_str(d["partial_json"].as_str().expect("partial")),
                    other => panic!("unexpected delta {other}"),
                }
            }
            "content_block_stop" => {
                assert_eq!(e["index"].as_u64(), open);
                open = None;
            }
            "message_delta" => {
                stop = e["delta"]["stop_reason"].as_str().expect("stop").to_owned();
                assert!(e["usage"]["output_tokens"].as_u64().is_some());
            }
            _ => {}
        }
    }
    assert_eq!(signature, !thinking.is_empty(), "a thinking block ends with a signature_delta");
    let input = tool.as_ref().map(|_| serde_json::from_str(&json_parts).expect("tool input json"));
    (thinking, text, tool, input, stop)
}

#[tokio::test]
async fn anthropic_plain_streaming() {
    let addr = start().await;
    let r = post(addr, "/v1/messages", anthropic_body("mock:plain please", &[claude_bash()], true)).await;
    assert_eq!(r.status, 200);
    let (thinking, text, tool, _, stop) = parse_anthropic_stream(&r);
    assert_eq!((thinking.as_str(), text.as_str(), tool, stop.as_str()), ("", PLAIN_TEXT, None, "end_turn"));
}

#[tokio::test]
async fn anthropic_tool_round_trip_for_each_shell_flavour() {
    let addr = start().await;
    for flavour in [claude_bash(), codex_exec(), codex_shell(), gemini_shell(), unknown_shell()] {
        let tools = [read_tool(), flavour.clone()];
        let r = post(addr, "/v1/messages", anthropic_body("Please run echo hello", &tools, true)).await;
        let (thinking, text, tool, input, stop) = parse_anthropic_stream(&r);
        assert!(!thinking.is_empty());
        assert_eq!(text, TOOL_PREAMBLE);
        assert_eq!(tool.as_deref(), Some(flavour.0.as_str()));
        assert_eq!(stop, "tool_use");
        let (key, value) = expected_command(&flavour.0);
        let input = input.expect("input");
        assert_eq!(input[key], value, "{flavour:?}");

        // the follow-up with the tool result
        let mut body = anthropic_body("Please run echo hello", &tools, false);
        let messages = body["messages"].as_array_mut().expect("messages");
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": flavour.0, "input": input}]}));
        messages.push(json!({"role": "system", "content": "mid-conversation system entry"}));
        messages.insert(
            2,
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": OUTPUT}]}]}),
        );
        let done = post(addr, "/v1/messages", body).await.json();
        assert_eq!(done["stop_reason"], "end_turn");
        let text = done["content"]
            .as_array()
            .expect("content")
            .iter()
            .find(|b| b["type"] == "text")
            .expect("text block")["text"]
            .as_str()
            .expect("text")
            .to_owned();
        assert!(text.contains(OUTPUT), "{text}");
    }
}

#[tokio::test]
async fn anthropic_write_scenario_uses_write_tool() {
    let addr = start().await;
    let body = anthropic_body("mock:write a file", &[claude_bash(), claude_write()], false);
    let m = post(addr, "/v1/messages", body).await.json();
    let call =
        m["content"].as_array().expect("content").iter().find(|b| b["type"] == "tool_use").expect("tool_use").clone();
    assert_eq!(call["name"], "Write");
    assert_eq!(call["input"]["file_path"], "made_by_agent.txt");
    assert!(call["input"]["content"].as_str().is_some_and(|c| !c.is_empty()));
}

#[tokio::test]
async fn anthropic_long_stream() {
    let addr = start().await;
    let r = post(addr, "/v1/messages", anthropic_body("mock:long", &[], true)).await;
    let deltas = r.sse().iter().filter(|(e, _)| e.as_deref() == Some("content_block_delta")).count();
    let (_, text, _, _, _) = parse_anthropic_stream(&r);
    assert!(text.len() >= 50 * 1024, "{}", text.len());
    assert!(deltas >= 100, "{deltas}");
}

#[tokio::test]
async fn anthropic_error_is_overloaded_529() {
    let addr = start().await;
    let r = post(addr, "/v1/messages", anthropic_body("mock:error", &[], true)).await;
    assert_eq!(r.status, 529);
    assert_eq!(r.json()["error"]["type"], "overloaded_error");
    assert_eq!(r.json()["type"], "error");
    assert_eq!(records(addr).await[0].status, 529);
}

#[tokio::test]
async fn slow_stream_still_completes() {
    let addr =
        start_with(Config { slow_delay: std::time::Duration::from_millis(1), slow_chunks: 5, ..Config::default() })
            .await;
    let r = post(addr, "/v1/messages", anthropic_body("mock:slow", &[], true)).await;
    let (_, text, _, _, _) = parse_anthropic_stream(&r);
    assert_eq!(text, "Slow chunk 1. Slow chunk 2. Slow chunk 3. Slow chunk 4. Slow chunk 5. ");
    assert_eq!(records(addr).await[0].scenario.as_deref(), Some("slow"));
}

#[tokio::test]
async fn a_held_stream_waits_after_its_first_event_until_the_test_releases_it() {
    let addr = start().await;
    let streamed = tokio::spawn(post(addr, "/v1/messages", anthropic_body("mock:held", &[], true)));
    let whole = tokio::spawn(post(addr, "/v1/responses", responses_body("mock:held", &[], false)));
    // A stream is logged when it begins; a whole answer only once it is sent.
    while !records(addr).await.iter().any(|r| r.scenario.as_deref() == Some("held")) {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!streamed.is_finished(), "the held stream ended before the release");
    assert!(!whole.is_finished(), "the held whole answer came before the release");
    assert_eq!(request(addr, "POST", "/__release", None).await.status, 200);
    let (_, text, _, _, _) = parse_anthropic_stream(&streamed.await.unwrap());
    assert_eq!(text, "Held chunk 1. Held chunk 2. Held chunk 3. Held chunk 4. Held chunk 5. ");
    assert_eq!(whole.await.unwrap().status, 200);
    // Released for good: a later held answer goes at once.
    let r = post(addr, "/v1/messages", anthropic_body("mock:held", &[], true)).await;
    assert_eq!(parse_anthropic_stream(&r).1, "Held chunk 1. Held chunk 2. Held chunk 3. Held chunk 4. Held chunk 5. ");
}

#[tokio::test]
async fn unknown_route_is_404_and_recorded() {
    let addr = start().await;
    assert_eq!(request(addr, "GET", "/api/v1/models", None).await.status, 404);
    let bad = request(addr, "POST", "/v1/messages", None).await;
    assert_eq!(bad.status, 400);
    let recs = records(addr).await;
    assert_eq!((recs[0].api.as_str(), recs[0].status), ("unknown", 404));
    assert_eq!((recs[1].api.as_str(), recs[1].status), ("anthropic", 400));
}

// --- OpenAI Responses --------------------------------------------------------------------------------------------

fn responses_body(text: &str, tools: &[(String, Value)], stream: bool) -> Value {
    let tools: Vec<Value> =
        tools.iter().map(|(n, s)| json!({"type": "function", "name": n, "parameters": s})).collect();
    json!({"model": "mock-model", "stream": stream, "tools": tools, "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "system prompt"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]})
}

/// Returns (event types, reasoning text, output text, function call item, completed response).
fn parse_responses_stream(r: &Resp) -> (Vec<String>, String, String, Option<Value>, Value) {
    let frames = r.sse();
    let mut types = Vec::new();
    let (mut reasoning, mut text, mut call, mut completed, mut args) =
        (String::new(), String::new(), None, Value::Null, String::new());
    for (i, (name, data)) in frames.iter().enumerate() {
        let e: Value = serde_json::from_str(data).expect("json");
        assert_eq!(e["type"].as_str(), name.as_deref());
        assert_eq!(e["sequence_number"], json!(i));
        let t = e["type"].as_str().expect("type").to_owned();
        match t.as_str() {
            "response.reasoning_summary_text.delta" => reasoning.push_str(e["delta"].as_str().expect("delta")),
            "response.output_text.delta" => text.push_str(e["delta"].as_str().expect("delta")),
            "response.function_call_arguments.delta" => args.push_str(e["delta"].as_str().expect("delta")),
            "response.output_item.done" if e["item"]["type"] == "function_call" => {
                assert_eq!(e["item"]["arguments"].as_str(), Some(args.as_str()));
                call = Some(e["item"].clone());
            }
            "response.completed" => completed = e["response"].clone(),
            _ => {}
        }
        types.push(t);
    }
    assert_eq!(types.first().map(String::as_str), Some("response.created"));
    assert_eq!(types.last().map(String::as_str), Some("response.completed"));
    assert!(completed["usage"]["total_tokens"].as_u64().is_some());
    (types, reasoning, text, call, completed)
}

#[tokio::test]
async fn responses_plain_non_streaming_and_streaming() {
    let addr = start().await;
    let r = post(addr, "/v1/responses", responses_body("hello", &[], false)).await.json();
    assert_eq!(r["status"], "completed");
    assert_eq!(r["output"][0]["content"][0]["text"], PLAIN_TEXT);
    let s = post(addr, "/v1/responses", responses_body("hello", &[], true)).await;
    let (types, _, text, call, completed) = parse_responses_stream(&s);
    assert_eq!(text, PLAIN_TEXT);
    assert!(call.is_none());
    assert_eq!(completed["output"][0]["content"][0]["text"], PLAIN_TEXT);
    let expected = ["response.created", "response.output_item.added", "response.content_part.added"];
    assert_eq!(&types[..3], expected);
    assert!(types.contains(&"response.output_item.done".to_owned()));
}

#[tokio::test]
async fn responses_tool_round_trip_for_each_shell_flavour() {
    let addr = start().await;
    for flavour in [codex_exec(), codex_shell(), claude_bash(), gemini_shell(), unknown_shell()] {
        let tools = [read_tool(), flavour.clone()];
        let s = post(addr, "/v1/responses", responses_body("Please run echo hello", &tools, true)).await;
        let (_, reasoning, text, call, _) = parse_responses_stream(&s);
        assert!(!reasoning.is_empty());
        assert_eq!(text, TOOL_PREAMBLE);
        let call = call.expect("function_call");
        assert_eq!(call["name"].as_str(), Some(flavour.0.as_str()));
        let args: Value = serde_json::from_str(call["arguments"].as_str().expect("args")).expect("args json");
        let (key, value) = expected_command(&flavour.0);
        assert_eq!(args[key], value);
        assert!(args.get("justification").is_none(), "codex refuses a justification without sandbox_permissions");

        let mut body = responses_body("Please run echo hello", &tools, false);
        let input = body["input"].as_array_mut().expect("input");
        input.push(json!({"type": "reasoning", "summary": [], "encrypted_content": null}));
        input.push(json!({"type": "function_call", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]}));
        input.push(json!({"type": "function_call_output", "call_id": call["call_id"],
                          "output": format!("Chunk ID: 1\nWall time: 0.0 seconds\nOutput:\n{OUTPUT}\n")}));
        let done = post(addr, "/v1/responses", body).await.json();
        let msg = done["output"]
            .as_array()
            .expect("output")
            .iter()
            .find(|i| i["type"] == "message")
            .expect("message")
            .clone();
        assert!(msg["content"][0]["text"].as_str().expect("text").contains(OUTPUT));
    }
}

#[tokio::test]
async fn responses_patch_scenario_runs_apply_patch_adding_the_patch_file() {
    let addr = start().await;
    let s = post(addr, "/v1/responses", responses_body("mock:patch please", &[codex_exec()], true)).await;
    let (_, _, _, call, _) = parse_responses_stream(&s);
    let call = call.expect("function_call");
    let args: Value = serde_json::from_str(call["arguments"].as_str().expect("args")).expect("args json");
    let cmd = args["cmd"].as_str().expect("cmd");
    assert!(cmd.starts_with("apply_patch <<'EOF'\n*** Begin Patch\n"), "{cmd}");
    assert!(cmd.contains(&format!("*** Add File: {PATCH_FILE}\n+{PATCH_LINE}\n*** End Patch\nEOF")), "{cmd}");
}

#[tokio::test]
async fn responses_long_and_error() {
    let addr = start().await;
    let s = post(addr, "/v1/responses", responses_body("mock:long", &[], true)).await;
    let (types, _, text, _, _) = parse_responses_stream(&s);
    assert!(text.len() >= 50 * 1024);
    assert!(types.iter().filter(|t| *t == "response.output_text.delta").count() >= 100);
    let e = post(addr, "/v1/responses", responses_body("mock:error", &[], true)).await;
    assert_eq!(e.status, 500);
    assert_eq!(e.json()["error"]["type"], "server_error");
    let recs = records(addr).await;
    assert_eq!(recs.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 500]);
    assert!(recs.iter().all(|r| r.api == "responses" && r.stream));
}

// --- Chat Completions --------------------------------------------------------------------------------------------

fn chat_body(text: &str, tools: &[(String, Value)], stream: bool) -> Value {
    let tools: Vec<Value> =
        tools.iter().map(|(n, s)| json!({"type": "function", "function": {"name": n, "parameters": s}})).collect();
    json!({"model": "mock-model", "stream": stream, "stream_options": {"include_usage": true}, "tools": tools,
           "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": text}]})
}

/// Returns (reasoning, text, tool call name, arguments, finish reason, saw usage).
fn parse_chat_stream(r: &Resp) -> (String, String, Option<String>, String, String, bool) {
    let frames = r.sse();
    assert_eq!(frames.last().map(|(_, d)| d.as_str()), Some("[DONE]"));
    let (mut reasoning, mut text, mut name, mut args, mut finish, mut usage) =
        (String::new(), String::new(), None, String::new(), String::new(), false);
    for e in r.sse_json() {
        assert_eq!(e["object"], "chat.completion.chunk");
        if e["usage"].is_object() {
            usage = true;
        }
        let Some(choice) = e["choices"].get(0) else { continue };
        let d = &choice["delta"];
        reasoning.push_str(d["reasoning_content"].as_str().unwrap_or_default());
        text.push_str(d["content"].as_str().unwrap_or_default());
        if let Some(tc) = d["tool_calls"].get(0) {
            if let Some(n) = tc["function"]["name"].as_str() {
                name = Some(n.to_owned());
            }
            args.push_str(tc["function"]["arguments"].as_str().unwrap_or_default());
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_owned();
        }
    }
    (reasoning, text, name, args, finish, usage)
}

#[tokio::test]
async fn chat_plain_and_tool_round_trip() {
    let addr = start().await;
    let r = post(addr, "/v1/chat/completions", chat_body("hi", &[], false)).await.json();
    assert_eq!(r["choices"][0]["message"]["content"], PLAIN_TEXT);
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    let s = post(addr, "/v1/chat/completions", chat_body("hi", &[], true)).await;
    let (_, text, name, _, finish, usage) = parse_chat_stream(&s);
    assert_eq!((text.as_str(), name, finish.as_str(), usage), (PLAIN_TEXT, None, "stop", true));

    let bash = ("bash".to_owned(), json!({"type":"object","properties":{"command":{"type":"string"}}}));
    for flavour in [bash, claude_bash(), codex_exec(), unknown_shell()] {
        let tools = [read_tool(), flavour.clone()];
        let s = post(addr, "/v1/chat/completions", chat_body("run it", &tools, true)).await;
        let (reasoning, text, name, args, finish, _) = parse_chat_stream(&s);
        assert!(!reasoning.is_empty());
        assert_eq!(text, TOOL_PREAMBLE);
        assert_eq!(name.as_deref(), Some(flavour.0.as_str()));
        assert_eq!(finish, "tool_calls");
        let args: Value = serde_json::from_str(&args).expect("args");
        let (key, value) = expected_command(&flavour.0);
        assert_eq!(args[key], value);

        let mut body = chat_body("run it", &tools, true);
        let messages = body["messages"].as_array_mut().expect("messages");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": flavour.0, "arguments": args.to_string()}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": "call_1", "content": json!({"output": OUTPUT, "exit_code": 0}).to_string()}));
        let done = post(addr, "/v1/chat/completions", body).await;
        let (_, text, name, _, finish, _) = parse_chat_stream(&done);
        assert!(text.contains(OUTPUT), "{text}");
        assert_eq!((name, finish.as_str()), (None, "stop"));
    }
}

#[tokio::test]
async fn chat_long_and_error() {
    let addr = start().await;
    let s = post(addr, "/v1/chat/completions", chat_body("mock:long", &[], true)).await;
    assert!(s.sse().len() >= 100);
    let (_, text, _, _, _, _) = parse_chat_stream(&s);
    assert!(text.len() >= 50 * 1024);
    let e = post(addr, "/v1/chat/completions", chat_body("MOCK:ERROR", &[], false)).await;
    assert_eq!(e.status, 500);
    assert!(e.json()["error"]["message"].is_string());
}

// --- Gemini ------------------------------------------------------------------------------------------------------

fn gemini_body(text: &str, tools: &[(String, Value)]) -> Value {
    let decls: Vec<Value> = tools.iter().map(|(n, s)| json!({"name": n, "parametersJsonSchema": s})).collect();
    json!({"contents": [{"role": "user", "parts": [{"text": text}]}], "tools": [{"functionDeclarations": decls}],
           "generationConfig": {"thinkingConfig": {"includeThoughts": true}}})
}

/// Returns (thought text, text, function call, finish reason) from a list of GenerateContentResponses.
fn parse_gemini(chunks: &[Value]) -> (String, String, Option<Value>, String) {
    let (mut thought, mut text, mut call, mut finish) = (String::new(), String::new(), None, String::new());
    for c in chunks {
        let cand = &c["candidates"][0];
        for p in cand["content"]["parts"].as_array().expect("parts") {
            if let Some(t) = p["text"].as_str() {
                if p["thought"] == true { thought.push_str(t) } else { text.push_str(t) }
            }
            if p["functionCall"].is_object() {
                call = Some(p["functionCall"].clone());
            }
        }
        if let Some(f) = cand["finishReason"].as_str() {
            finish = f.to_owned();
        }
    }
    (thought, text, call, finish)
}

#[tokio::test]
async fn gemini_plain_router_and_tool_round_trip() {
    let addr = start().await;
    let r = post(addr, "/v1beta/models/gemini-3.8-flash:generateContent", gemini_body("hi", &[])).await;
    assert_eq!(r.status, 200);
    let (_, text, call, finish) = parse_gemini(&[r.json()]);
    assert_eq!((text.as_str(), call, finish.as_str()), (PLAIN_TEXT, None, "STOP"));

    // the router call demands JSON following a schema
    let mut router = gemini_body("route this", &[]);
    router["generationConfig"] = json!({"responseMimeType": "application/json", "responseJsonSchema": {"type": "object",
        "properties": {"complexity_reasoning": {"type": "string"}, "complexity_score": {"type": "integer"}}}});
    let r = post(addr, "/v1beta/models/gemini-3.5-flash-lite:generateContent", router).await.json();
    let (_, text, _, _) = parse_gemini(&[r]);
    let routed: Value = serde_json::from_str(&text).expect("json answer");
    assert!(routed["complexity_score"].is_number());
    // …whatever scenario keyword the prompt holds
    for keyword in ["mock:tool", "mock:error", "mock:slow"] {
        let mut router = gemini_body(&format!("route this {keyword}"), &[]);
        router["generationConfig"] = json!({"responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object", "properties": {"complexity_score": {"type": "integer"}}}});
        let r = post(addr, "/v1beta/models/gemini-3.5-flash-lite:generateContent", router).await;
        assert_eq!(r.status, 200, "{keyword}");
        let (_, text, call, _) = parse_gemini(&[r.json()]);
        assert!(call.is_none() && serde_json::from_str::<Value>(&text).is_ok(), "{keyword}: {text}");
    }

    let s = post(addr, "/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse", gemini_body("hi", &[])).await;
    let (_, text, _, _) = parse_gemini(&s.sse_json());
    assert_eq!(text, PLAIN_TEXT);

    for flavour in [gemini_shell(), claude_bash(), unknown_shell()] {
        let tools = [read_tool(), flavour.clone()];
        let s =
            post(addr, "/v1beta/models/m:streamGenerateContent?alt=sse", gemini_body("Please run echo hello", &tools))
                .await;
        let (thought, text, call, _) = parse_gemini(&s.sse_json());
        assert!(!thought.is_empty());
        assert_eq!(text, TOOL_PREAMBLE);
        let call = call.expect("functionCall");
        assert_eq!(call["name"].as_str(), Some(flavour.0.as_str()));
        let (key, value) = expected_command(&flavour.0);
        assert_eq!(call["args"][key], value);

        let mut body = gemini_body("Please run echo hello", &tools);
        let contents = body["contents"].as_array_mut().expect("contents");
        contents.push(json!({"role": "model", "parts": [{"functionCall": call}]}));
        contents.push(json!({"role": "user", "parts": [{"functionResponse": {"name": flavour.0,
            "response": {"output": format!("<untrusted_context>\nOutput: {OUTPUT}\n</untrusted_context>")}}}]}));
        let done = post(addr, "/v1beta/models/m:streamGenerateContent?alt=sse", body).await;
        let (_, text, call, finish) = parse_gemini(&done.sse_json());
        assert!(text.contains(OUTPUT), "{text}");
        assert_eq!((call, finish.as_str()), (None, "STOP"));
    }
}

#[tokio::test]
async fn gemini_long_error_and_records() {
    let addr = start().await;
    let s = post(addr, "/v1beta/models/m:streamGenerateContent?alt=sse", gemini_body("mock:long", &[])).await;
    let chunks = s.sse_json();
    assert!(chunks.len() >= 100);
    let (_, text, _, _) = parse_gemini(&chunks);
    assert!(text.len() >= 50 * 1024);
    let e = post(addr, "/v1beta/models/m:generateContent", gemini_body("mock:error", &[])).await;
    assert_eq!(e.status, 500);
    assert_eq!(e.json()["error"]["status"], "INTERNAL");
    let recs = records(addr).await;
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].model.as_deref(), Some("m"));
    assert_eq!(recs[0].query.as_deref(), Some("alt=sse"));
    assert_eq!((recs[0].scenario.as_deref(), recs[1].scenario.as_deref()), (Some("long"), Some("error")));
    assert_eq!(recs[1].body.as_ref().map(|b| b["contents"][0]["parts"][0]["text"].clone()), Some(json!("mock:error")));
}

#[tokio::test]
async fn binary_prints_its_address() {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_terminull-model-server"))
        .args(["--port", "0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    tokio::io::BufReader::new(stdout).read_line(&mut line).await.expect("line");
    let addr: SocketAddr = line.trim().strip_prefix("listening on ").expect("prefix").parse().expect("addr");
    assert!(addr.ip().is_loopback());
    assert_eq!(request(addr, "GET", "/", None).await.status, 200);
    child.kill().await.expect("kill");
}

#[tokio::test]
async fn a_flaky_model_fails_its_first_calls_then_answers_plainly() {
    let addr = start_with(Config { flaky_failures: 2, ..Config::default() }).await;
    let mut statuses = Vec::new();
    let tools = [("bash".to_owned(), json!({"type": "object", "properties": {"command": {"type": "string"}}}))];
    let title = post(addr, "/v1/chat/completions", chat_body("mock:flaky", &[], false)).await;
    assert_eq!(title.status, 200, "a call without tools (a title) is answered and not counted");
    for _ in 0..3 {
        statuses.push(post(addr, "/v1/chat/completions", chat_body("mock:flaky", &tools, false)).await.status);
    }
    assert_eq!(statuses, [500, 500, 200], "two failures, then the answer");
    let r = post(addr, "/v1/messages", anthropic_body("mock:flaky", &[], false)).await;
    assert_eq!(r.json()["content"], json!([{"type": "text", "text": PLAIN_TEXT}]), "every later call is answered");
    let recs = records(addr).await;
    assert!(recs.iter().all(|r| r.scenario.as_deref() == Some("flaky")), "{recs:?}");
}
