//! The stateless script: which scenario a request selects and what the reply contains.
//!
//! Every API module turns its request body into a [`Conversation`], calls [`select`] and renders the
//! resulting [`Outcome`] in its own wire format.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::Config;

/// A scenario the script can play. Selected by a keyword in the last user message (see [`Scenario::keyword`]),
/// or implicitly: a conversation whose last message is a tool result always gets [`Scenario::FollowUp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// A short text answer.
    Plain,
    /// Thinking, a short text and one shell tool call built from the offered tool's schema.
    Tool,
    /// Thinking and one file-writing tool call (for permission tests).
    Write,
    /// Thinking and one shell call running `apply_patch` with a patch that adds
    /// [`PATCH_FILE`] (codex turns such a call into a patch, a `fileChange` item that its
    /// approval policy may ask about).
    Patch,
    /// A streamed answer of at least [`Config::long_bytes`] bytes in many chunks.
    Long,
    /// An error status (HTTP 500; Anthropic: 529 `overloaded_error`).
    Error,
    /// A stream with [`Config::slow_delay`] between events (for interrupt tests).
    Slow,
    /// A stream whose first event comes at once and the rest only once the test calls
    /// `POST /__release` (at most [`crate::HOLD_LIMIT`] later): a turn that lasts exactly
    /// as long as the test needs, however loaded the machine.
    Held,
    /// The first [`Config::flaky_failures`] calls of the server that select it and offer
    /// tools (the main calls, not a title request) fail like
    /// [`Scenario::Error`]; every later one is answered like [`Scenario::Plain`] (a model
    /// that recovers while the CLI retries).
    Flaky,
    /// The answer after a tool result: thinking and a text quoting the tool output.
    FollowUp,
}

impl Scenario {
    /// All scenarios that can be chosen by keyword, in the order they are checked.
    pub const KEYWORDED: [Scenario; 9] = [
        Scenario::Error,
        Scenario::Flaky,
        Scenario::Slow,
        Scenario::Held,
        Scenario::Long,
        Scenario::Write,
        Scenario::Patch,
        Scenario::Tool,
        Scenario::Plain,
    ];

    /// The keyword (case-insensitive) that selects this scenario from the last user message.
    pub fn keyword(self) -> &'static str {
        match self {
            Scenario::Plain => "mock:plain",
            Scenario::Tool => "mock:tool",
            Scenario::Write => "mock:write",
            Scenario::Patch => "mock:patch",
            Scenario::Long => "mock:long",
            Scenario::Error => "mock:error",
            Scenario::Slow => "mock:slow",
            Scenario::Held => "mock:held",
            Scenario::Flaky => "mock:flaky",
            Scenario::FollowUp => "(a tool result is the last message)",
        }
    }

    /// A short lower-case name, used in the request log.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Plain => "plain",
            Scenario::Tool => "tool",
            Scenario::Write => "write",
            Scenario::Patch => "patch",
            Scenario::Long => "long",
            Scenario::Error => "error",
            Scenario::Slow => "slow",
            Scenario::Held => "held",
            Scenario::Flaky => "flaky",
            Scenario::FollowUp => "follow_up",
        }
    }
}

/// A tool the client offered: its name and JSON schema of its arguments.
#[derive(Debug, Clone)]
pub(crate) struct ToolSpec {
    pub name: String,
    pub schema: Value,
}

impl ToolSpec {
    /// The tools of a request's `tools` array: each entry's definition is found by
    /// `definition` (the entry itself, or its `function`), its schema under `schema_key`.
    /// Entries without a name are skipped.
    pub(crate) fn all_in(tools: &Value, definition: fn(&Value) -> &Value, schema_key: &str) -> Vec<ToolSpec> {
        tools
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| {
                        let d = definition(t);
                        Some(ToolSpec { name: d["name"].as_str()?.to_owned(), schema: d[schema_key].clone() })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Text of a message's content: a string, or the `text` of its parts joined by newlines
/// (parts without `text` — tool calls, thinking — are skipped). Every API shapes content
/// this way.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// The API-neutral view of a request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conversation {
    /// Text of the last user message (without tool results).
    pub last_user_text: String,
    /// The output of the tool result, when the last message of the conversation is one.
    pub tool_result: Option<String>,
    /// Tools offered.
    pub tools: Vec<ToolSpec>,
    /// Number of messages / items / contents in the request.
    pub history: usize,
    /// A JSON schema the answer must follow (Gemini `responseJsonSchema`), if any.
    pub json_schema: Option<Value>,
    /// Rough input token count.
    pub input_tokens: u64,
}

impl Conversation {
    /// A conversation of `history` messages whose turns carry `role` and `content` (every
    /// API but Gemini's): the last user turn's text is the prompt.
    pub(crate) fn of_turns(
        body: &Value,
        turns: &[&Value],
        history: usize,
        tool_result: Option<String>,
        tools: Vec<ToolSpec>,
    ) -> Self {
        let last_user_text =
            turns.iter().rev().find(|m| m["role"] == "user").map(|m| content_text(&m["content"])).unwrap_or_default();
        Self { last_user_text, tool_result, tools, history, json_schema: None, input_tokens: input_tokens(body) }
    }
}

/// A rough token count of a request: four bytes of JSON a token.
pub(crate) fn input_tokens(body: &Value) -> u64 {
    (body.to_string().len() / 4 + 1) as u64
}

/// A scripted tool call (the id is assigned by the renderer).
#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

/// A scripted successful reply.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reply {
    pub thinking: Option<String>,
    /// The answer text, already split into stream chunks; the full text is their concatenation.
    pub text_chunks: Vec<String>,
    pub tool_call: Option<ToolCall>,
    /// Delay between stream events.
    pub delay: Option<Duration>,
    /// Everything after the first event waits for `POST /__release` ([`Scenario::Held`]).
    pub held: bool,
}

impl Reply {
    /// The full answer text.
    pub fn text(&self) -> String {
        self.text_chunks.concat()
    }

    /// Rough output token count.
    pub fn output_tokens(&self) -> u64 {
        let chars = self.text().len()
            + self.thinking.as_ref().map_or(0, String::len)
            + self.tool_call.as_ref().map_or(0, |c| c.arguments.to_string().len());
        (chars / 4 + 1) as u64
    }
}

/// What the script answers.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    Reply(Reply),
    Error,
}

/// Tool names treated as a shell tool, in the order of the CLIs that use them.
const SHELL_NAMES: [&str; 9] = [
    "Bash",
    "bash",
    "exec_command",
    "shell",
    "shell_command",
    "run_shell_command",
    "Execute",
    "terminal",
    "local_shell",
];
/// Tool names treated as a file-writing tool.
const WRITE_NAMES: [&str; 5] = ["Write", "write_file", "write", "create_file", "Create"];
const COMMAND_KEYS: [&str; 2] = ["command", "cmd"];
const PATH_KEYS: [&str; 6] = ["file_path", "filePath", "path", "absolute_path", "filename", "file"];
const CONTENT_KEYS: [&str; 3] = ["content", "contents", "text"];

/// The text of the `plain` scenario.
pub const PLAIN_TEXT: &str = "Hello from the terminull model server. This is a short scripted answer.";
/// The file the `patch` scenario's patch adds, relative to the agent's directory.
pub const PATCH_FILE: &str = "patched_by_agent.txt";
/// The line the `patch` scenario's patch writes into [`PATCH_FILE`].
pub const PATCH_LINE: &str = "added by the terminull model server's patch";

/// The shell command of the `patch` scenario: codex's `apply_patch` with a heredoc.
fn patch_command() -> String {
    format!("apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {PATCH_FILE}\n+{PATCH_LINE}\n*** End Patch\nEOF\n")
}

/// The text written before the tool call in the `tool` and `write` scenarios.
pub const TOOL_PREAMBLE: &str = "I'll run the command.";

/// Picks the scenario and builds the outcome.
pub(crate) fn select(conv: &Conversation, config: &Config) -> (Scenario, Outcome) {
    // A request that demands JSON (gemini-cli's model router) always gets the JSON it
    // asked for, whatever keyword the user's prompt holds: the scenario is for the main
    // call that follows.
    if conv.json_schema.is_some() && conv.tool_result.is_none() {
        return (Scenario::Plain, Outcome::Reply(plain(conv)));
    }
    if let Some(output) = &conv.tool_result {
        let text = format!("Done. The command printed: {} (history={} msgs)", output.trim_end(), conv.history);
        let reply = Reply {
            thinking: Some("The tool ran; summarise its output.".into()),
            text_chunks: words(&text),
            ..Reply::default()
        };
        return (Scenario::FollowUp, Outcome::Reply(reply));
    }
    let lower = conv.last_user_text.to_lowercase();
    // The keyword that appears last wins: after a failed request Claude Code sends the
    // failed prompt again together with the next one, in one user message.
    let keyed = Scenario::KEYWORDED
        .into_iter()
        .filter_map(|s| lower.rfind(s.keyword()).map(|at| (at, s)))
        .max_by_key(|(at, _)| *at)
        .map(|(_, s)| s);
    let scenario =
        keyed.unwrap_or(if find_shell_tool(&conv.tools).is_some() { Scenario::Tool } else { Scenario::Plain });
    let outcome = match scenario {
        Scenario::Error => Outcome::Error,
        // Whether this call of a flaky model fails is the server's to decide (it counts them).
        Scenario::Plain | Scenario::FollowUp | Scenario::Flaky => Outcome::Reply(plain(conv)),
        Scenario::Tool => Outcome::Reply(shell_call(conv, &config.shell_command)),
        Scenario::Write => Outcome::Reply(write_call(conv, config)),
        Scenario::Patch => Outcome::Reply(shell_call(conv, &patch_command())),
        Scenario::Long => Outcome::Reply(Reply { text_chunks: long_chunks(config.long_bytes), ..Reply::default() }),
        Scenario::Slow => Outcome::Reply(Reply {
            text_chunks: (1..=config.slow_chunks).map(|i| format!("Slow chunk {i}. ")).collect(),
            delay: Some(config.slow_delay),
            ..Reply::default()
        }),
        Scenario::Held => Outcome::Reply(Reply {
            text_chunks: (1..=5).map(|i| format!("Held chunk {i}. ")).collect(),
            held: true,
            ..Reply::default()
        }),
    };
    (scenario, outcome)
}

fn plain(conv: &Conversation) -> Reply {
    let text = match &conv.json_schema {
        Some(schema) => sample_from_schema(schema).to_string(),
        None => PLAIN_TEXT.to_owned(),
    };
    Reply { text_chunks: words(&text), ..Reply::default() }
}

fn shell_call(conv: &Conversation, command: &str) -> Reply {
    let Some(tool) = find_shell_tool(&conv.tools) else {
        return Reply {
            text_chunks: words("No shell tool was offered, so I cannot run a command."),
            ..Reply::default()
        };
    };
    let arguments = build_arguments(&tool.schema, &|key, prop| {
        if COMMAND_KEYS.contains(&key) {
            Some(if type_of(prop) == "array" { json!(["bash", "-lc", command]) } else { json!(command) })
        } else {
            None
        }
    });
    Reply {
        thinking: Some("The user wants me to run a command; I will use the shell tool.".into()),
        text_chunks: words(TOOL_PREAMBLE),
        tool_call: Some(ToolCall { name: tool.name.clone(), arguments }),
        delay: None,
        held: false,
    }
}

fn write_call(conv: &Conversation, config: &Config) -> Reply {
    if let Some(tool) = find_write_tool(&conv.tools) {
        let arguments = build_arguments(&tool.schema, &|key, _| {
            if PATH_KEYS.contains(&key) {
                Some(json!(config.write_path))
            } else if CONTENT_KEYS.contains(&key) {
                Some(json!(config.write_content))
            } else {
                None
            }
        });
        return Reply {
            thinking: Some("The user wants a file written; I will use the write tool.".into()),
            text_chunks: words("I'll write the file."),
            tool_call: Some(ToolCall { name: tool.name.clone(), arguments }),
            delay: None,
            held: false,
        };
    }
    // No write tool (e.g. codex): write the file through the shell instead.
    let command = format!("touch {} && echo created", config.write_path);
    shell_call(conv, &command)
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

/// Finds the shell tool: by a known name first, then the first tool with a `command`/`cmd` property.
pub(crate) fn find_shell_tool(tools: &[ToolSpec]) -> Option<&ToolSpec> {
    SHELL_NAMES.iter().find_map(|n| tools.iter().find(|t| t.name == *n)).or_else(|| {
        tools.iter().find(|t| {
            properties(&t.schema).is_some_and(|p| {
                COMMAND_KEYS
                    .iter()
                    .any(|k| p.get(*k).is_some_and(|v| matches!(type_of(v).as_str(), "string" | "array")))
            })
        })
    })
}

/// Finds the write tool: by a known name first, then the first tool with a path and a content property.
pub(crate) fn find_write_tool(tools: &[ToolSpec]) -> Option<&ToolSpec> {
    WRITE_NAMES.iter().find_map(|n| tools.iter().find(|t| t.name == *n)).or_else(|| {
        tools.iter().find(|t| {
            properties(&t.schema).is_some_and(|p| {
                PATH_KEYS.iter().any(|k| p.contains_key(*k)) && CONTENT_KEYS.iter().any(|k| p.contains_key(*k))
            })
        })
    })
}

/// The (lower-cased) JSON-schema type of a property; Gemini's `parameters` use upper case.
fn type_of(prop: &Value) -> String {
    match prop.get("type") {
        Some(Value::String(s)) => s.to_lowercase(),
        Some(Value::Array(a)) => {
            a.iter().filter_map(Value::as_str).find(|s| *s != "null").unwrap_or("string").to_lowercase()
        }
        _ => String::new(),
    }
}

/// Builds tool arguments from a schema: `fill` supplies the interesting keys; `description`/`summary`-like keys get a
/// short sentence; any other *required* key gets a value sampled from its schema (enum → first value).
fn build_arguments(schema: &Value, fill: &dyn Fn(&str, &Value) -> Option<Value>) -> Value {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    for (key, prop) in properties(schema).into_iter().flatten() {
        let value = if let Some(v) = fill(key, prop) {
            Some(v)
        } else if matches!(key.as_str(), "description" | "summary") {
            // Not `justification`: codex 0.171 refuses an exec_command that has one
            // without `sandbox_permissions`, and it is optional.
            Some(json!("Run the requested command"))
        } else if required.contains(&key.as_str()) {
            Some(sample_from_schema(prop))
        } else {
            None
        };
        if let Some(v) = value {
            out.insert(key.clone(), v);
        }
    }
    Value::Object(out)
}

/// A value that satisfies a (simple) JSON schema.
pub(crate) fn sample_from_schema(schema: &Value) -> Value {
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    match type_of(schema).as_str() {
        "object" => {
            let mut out = Map::new();
            for (key, prop) in properties(schema).into_iter().flatten() {
                out.insert(key.clone(), sample_from_schema(prop));
            }
            Value::Object(out)
        }
        "integer" | "number" => json!(1),
        "boolean" => json!(false),
        "array" => json!([]),
        "null" => Value::Null,
        _ => json!("mock value"),
    }
}

/// Splits text into word-sized chunks (each keeps its trailing space).
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_owned).collect()
}

/// Splits a string into chunks of at most `n` characters.
pub(crate) fn chunk_chars(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

fn long_chunks(min_bytes: usize) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut total = 0;
    let mut i = 0;
    while total < min_bytes {
        i += 1;
        let line = format!("Line {i:05}: the quick brown fox jumps over the lazy dog, scripted long answer.\n");
        total += line.len();
        chunks.push(line);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, schema: Value) -> ToolSpec {
        ToolSpec { name: name.into(), schema }
    }

    #[test]
    fn shell_fallback_uses_first_command_property() {
        let tools = vec![
            tool("read", json!({"type":"object","properties":{"path":{"type":"string"}}})),
            tool("run_it", json!({"type":"object","properties":{"cmd":{"type":"string"}}})),
        ];
        assert_eq!(find_shell_tool(&tools).map(|t| t.name.as_str()), Some("run_it"));
    }

    #[test]
    fn required_enum_gets_first_value() {
        let schema = json!({"type":"object","required":["command","riskLevel","riskLevelReason"],"properties":{
            "command":{"type":"string"},"summary":{"type":"string"},
            "riskLevel":{"type":"string","enum":["low","medium","high"]},"riskLevelReason":{"type":"string"},
            "optional":{"type":"string"}}});
        let args = build_arguments(&schema, &|k, _| (k == "command").then(|| json!("echo hi")));
        assert_eq!(
            args,
            json!({"command":"echo hi","summary":"Run the requested command","riskLevel":"low","riskLevelReason":"mock value"})
        );
    }
}
