//! From droid's stream-json events to terminull blocks: a pure state machine for one
//! turn.
//!
//! [`TurnMapper::on_event`] takes one parsed [`Event`] and returns the [`Action`]s it
//! causes, in order: blocks to stream, the agent session id to report, and the turn's
//! end. It does no I/O, so the adapter's behaviour on the wire is tested here from
//! captured `droid exec -o stream-json` lines.
//!
//! | droid event | blocks |
//! |---|---|
//! | `system` `init` | `session_id` notification when the id is new (every fork has a new one) |
//! | `message` user | nothing (the prompt, echoed) |
//! | `reasoning` | `thinking`, `done: true` (id `<prefix>-thinking-<message id>`) |
//! | `message` assistant | `text`, `done: true` (id `<prefix>-text-<message id>`) |
//! | `tool_call` | `tool_call` running (id `<prefix>-<call id>`, title from the `summary`, command or path) |
//! | `tool_result` | `tool_call` done / error + `tool_result` with `value` |
//! | `completion` | the `finalText` as `text` when no assistant message came; `session_end` completed with the usage |
//! | a failed model call in droid's log ([`crate::retries`]) | `progress` `Model call failed (attempt n): …; retrying`, one id per turn, `done` once the model answers or the turn ends |
//! | `error` | `error`, recoverable (code `model_error` from `agent_loop`, `agent_error` from `cli`) |
//! | end of output without `completion` | `session_end` error with the first error's message, or `error` (code `agent_exited`) with the exit status and stderr ([`TurnMapper::on_exit`]) |
//!
//! droid sends whole items (no token deltas), so every text and thinking block is one
//! `done: true` chunk. Before any `session_end` the mapper closes running tool calls as
//! `error` with a result, so the turn contract holds whatever droid printed. Everything
//! is bounded: text at [`MAX_TEXT_BYTES`], tool output at [`MAX_TOOL_OUTPUT_BYTES`],
//! tool input at [`MAX_INPUT_BYTES`], titles at [`MAX_TITLE_CHARS`].

use std::collections::HashSet;

use serde_json::Value;
pub use terminull_adapter_sdk::bounds::bounded;
use terminull_adapter_sdk::bounds::{bounded_input, first_line};
use terminull_adapter_sdk::tools::ToolCallTracker;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{EndReason, ErrorBlock, Progress, SessionEnd, StreamedText, Usage};

use crate::events::{AnthropicUsage, Event};

/// The SDK's shared limits, used by this mapping.
pub use terminull_adapter_sdk::bounds::{
    MAX_ERROR_BYTES, MAX_INPUT_BYTES, MAX_TEXT_BYTES, MAX_TITLE_CHARS, MAX_TOOL_OUTPUT_BYTES, MAX_TRACKED_IDS,
};

/// What the adapter must do for one event.
pub type Action = terminull_adapter_sdk::Action;

/// A short title for a tool call: droid's own `summary` (its `Execute` tool requires
/// one), else the command, path or pattern it works on.
pub fn tool_title(parameters: &Value) -> Option<String> {
    ["summary", "command", "file_path", "path", "pattern", "query", "url"]
        .iter()
        .find_map(|key| parameters.get(*key).and_then(Value::as_str))
        .map(|s| first_line(s, MAX_TITLE_CHARS))
        .filter(|s| !s.is_empty())
}

/// The run's usage in terminull's terms (droid reports no cost).
pub fn usage_of(u: &AnthropicUsage) -> Usage {
    u.to_usage(None)
}

/// The state of one turn (one `droid exec` process). Create one per process.
#[derive(Debug)]
pub struct TurnMapper {
    prefix: String,
    session_id: Option<String>,
    started: bool,
    tools: ToolCallTracker,
    /// Text and thinking block ids already sent (repeats are dropped).
    sent: HashSet<String>,
    texts: usize,
    first_error: Option<String>,
    /// True once droid reported an error of the `exec` command itself (`source: cli`),
    /// its last word before it exits.
    failed: bool,
    ended: bool,
    /// The turn's retry `progress` while the model has not answered
    /// ([`TurnMapper::on_retry`]).
    retry: Option<Progress>,
    retries: u64,
}

impl TurnMapper {
    /// A mapper for one turn. `prefix` makes the turn's ids unique (mint it with the
    /// SDK's `mint_id`); `session_id` is the session already known (so resuming it does
    /// not report it again).
    pub fn new(prefix: impl Into<String>, session_id: Option<String>) -> Self {
        TurnMapper {
            prefix: prefix.into(),
            session_id,
            started: false,
            tools: ToolCallTracker::new(),
            sent: HashSet::new(),
            texts: 0,
            first_error: None,
            failed: false,
            ended: false,
            retry: None,
            retries: 0,
        }
    }

    /// droid's log says a model call of this turn failed (attempt `attempt`) and droid
    /// retries it: the turn's retry `progress`, replaced at each attempt and done once
    /// the model answers or the turn ends (crate::retries).
    pub fn on_retry(&mut self, attempt: u64, why: &str) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        self.retries += 1;
        let id = self.retry.as_ref().map_or_else(|| format!("{}-retry", self.prefix), |p| p.id.to_string());
        let message = bounded(&format!("Model call failed (attempt {attempt}): {why}; retrying"), MAX_ERROR_BYTES);
        let progress = Progress { id: id.into(), message, current: Some(attempt), total: None, done: false };
        self.retry = Some(progress.clone());
        vec![Action::Emit(BlockKind::Progress(progress))]
    }

    /// Ends the retry `progress`, if one is open, with `message`.
    fn settle_retry(&mut self, message: String, out: &mut Vec<Action>) {
        if let Some(mut progress) = self.retry.take() {
            progress.message = message;
            progress.done = true;
            out.push(Action::Emit(BlockKind::Progress(progress)));
        }
    }

    /// True once droid printed anything this turn (its `init` comes first): a run that
    /// never started is a failed resume or a refused command line.
    pub fn started(&self) -> bool {
        self.started
    }

    /// True once the turn ended; later events produce nothing.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// True once droid reported that the exec command failed (an `error` with
    /// `source: cli`): nothing but its slow shutdown follows.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The session id as known now.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The actions for one event.
    pub fn on_event(&mut self, event: Event) -> Vec<Action> {
        self.started = true;
        if self.ended {
            tracing::debug!(?event, "droid event after the turn ended; ignored");
            return Vec::new();
        }
        let mut out = Vec::new();
        if matches!(
            event,
            Event::AssistantMessage { .. }
                | Event::Reasoning { .. }
                | Event::ToolCall { .. }
                | Event::Completion { .. }
        ) {
            let retries = self.retries;
            self.settle_retry(format!("Model call succeeded after {retries} failed attempt(s)"), &mut out);
        }
        match event {
            Event::Init { session_id, model } => {
                tracing::debug!(?model, %session_id, "droid run started");
                if !session_id.is_empty() && self.session_id.as_deref() != Some(session_id.as_str()) {
                    self.session_id = Some(session_id.clone());
                    out.push(Action::SessionId(session_id));
                }
            }
            Event::UserMessage => {}
            Event::AssistantMessage { id, text } => {
                if let Some(block) = self.whole("text", &id, &text) {
                    self.texts += 1;
                    out.push(Action::Emit(block));
                }
            }
            Event::Reasoning { id, text } => out.extend(self.whole("thinking", &id, &text).map(Action::Emit)),
            Event::ToolCall { id, name, parameters } => {
                let title = tool_title(&parameters);
                let input = bounded_input(parameters, MAX_INPUT_BYTES);
                out.extend(self.tools.start_lenient(self.tool_id(&id), name, input, title).map(Action::Emit));
            }
            Event::ToolResult { id, name, output, is_error } => {
                let output = bounded(&output, MAX_TOOL_OUTPUT_BYTES);
                out.extend(
                    self.tools.finish_lenient(self.tool_id(&id), name, output, is_error).into_iter().map(Action::Emit),
                );
            }
            Event::Completion { final_text, usage, session_id } => {
                if let Some(id) = session_id.filter(|id| !id.is_empty() && self.session_id.as_ref() != Some(id)) {
                    self.session_id = Some(id.clone());
                    out.push(Action::SessionId(id));
                }
                if self.texts == 0
                    && let Some(block) = self.whole("text", "final", &final_text)
                {
                    out.push(Action::Emit(block));
                }
                self.close_open("the turn ended before the tool call finished", &mut out);
                self.end(EndReason::Completed, usage.as_ref().map(usage_of), None, &mut out);
            }
            Event::Error { source, message } => {
                let message =
                    if message.trim().is_empty() { format!("droid reported an error ({source})") } else { message };
                let message = bounded(&message, MAX_ERROR_BYTES);
                let code = if source == "agent_loop" { "model_error" } else { "agent_error" };
                self.failed |= source == "cli";
                self.first_error.get_or_insert_with(|| message.clone());
                out.push(Action::Emit(BlockKind::Error(ErrorBlock {
                    message,
                    recoverable: true,
                    code: Some(code.to_owned()),
                })));
            }
            Event::Ignored { what } => tracing::debug!(what, "droid event ignored"),
            Event::Unknown { event_type } => tracing::debug!(event_type, "unknown droid event; ignored"),
        }
        out
    }

    /// droid's output ended without `completion`: closes what is open, then
    /// `session_end` error with the first error droid reported or, when it reported
    /// none, an `error` (code `agent_exited`) with `detail` (exit status, stderr).
    pub fn on_exit(&mut self, detail: &str) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.close_open("droid exited before the tool call finished", &mut out);
        let message = match self.first_error.clone() {
            Some(first) => first,
            None => {
                let message = bounded(detail, MAX_ERROR_BYTES);
                out.push(Action::Emit(BlockKind::Error(ErrorBlock {
                    message: message.clone(),
                    recoverable: true,
                    code: Some("agent_exited".to_owned()),
                })));
                message
            }
        };
        self.end(EndReason::Error, None, Some(message), &mut out);
        out
    }

    /// The turn was interrupted (droid was killed): closes what is open and ends the
    /// turn `interrupted`.
    pub fn on_interrupted(&mut self) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.close_open("interrupted by the user", &mut out);
        self.end(EndReason::Interrupted, None, None, &mut out);
        out
    }

    fn tool_id(&self, droid_id: &str) -> String {
        format!("{}-{droid_id}", self.prefix)
    }

    /// A whole text or thinking block, once per id; nothing for empty text.
    fn whole(&mut self, kind: &str, id: &str, text: &str) -> Option<BlockKind> {
        if text.trim().is_empty() {
            return None;
        }
        let block_id = format!("{}-{kind}-{id}", self.prefix);
        if self.sent.contains(&block_id) || self.sent.len() >= MAX_TRACKED_IDS {
            tracing::debug!(%block_id, "repeated droid item; ignored");
            return None;
        }
        self.sent.insert(block_id.clone());
        let body = StreamedText::snapshot(block_id, bounded(text, MAX_TEXT_BYTES), true);
        Some(if kind == "thinking" { BlockKind::Thinking(body) } else { BlockKind::Text(body) })
    }

    fn close_open(&mut self, reason: &str, out: &mut Vec<Action>) {
        out.extend(self.tools.close_all(reason).into_iter().map(Action::Emit));
    }

    fn end(&mut self, reason: EndReason, usage: Option<Usage>, message: Option<String>, out: &mut Vec<Action>) {
        let retries = self.retries;
        let settled = match reason {
            EndReason::Error => format!("Model call failed {retries} time(s); droid gave up"),
            _ => format!("Model call failed {retries} time(s); the turn ended"),
        };
        self.settle_retry(settled, out);
        self.ended = true;
        out.push(Action::End(SessionEnd { reason, usage, message }));
    }
}

#[cfg(test)]
mod tests {
    use terminull_adapter_sdk::testing::{blocks_of, describe};

    use serde_json::json;

    use super::*;
    use crate::events::parse_event;
    use terminull_protocol::turn::TurnTracker;

    const TOOL: &str = include_str!("../tests/fixtures/tool.jsonl");
    const RESUME_OFFLINE: &str = include_str!("../tests/fixtures/resume-offline.jsonl");
    const FORK: &str = include_str!("../tests/fixtures/fork.jsonl");
    const SLOW_INTERRUPTED: &str = include_str!("../tests/fixtures/slow-interrupted.jsonl");
    const WRITE_READ_ONLY: &str = include_str!("../tests/fixtures/write-read-only.jsonl");
    const NO_LOGIN: &str = include_str!("../tests/fixtures/no-login.jsonl");
    const BAD_MODEL: &str = include_str!("../tests/fixtures/bad-model.jsonl");
    const MODEL_ERROR: &str = include_str!("../tests/fixtures/model-error.jsonl");

    /// How the recorded run ended, for the adapter.
    enum Ending {
        /// With `completion` (the mapper ends the turn itself).
        None,
        /// droid's output ended: `on_exit` with this detail.
        Exit(&'static str),
        /// The user interrupted it.
        Interrupt,
    }

    /// Replays the `out` lines of one recorded `droid exec` process.
    fn run(recording: &str, known: Option<&str>, ending: Ending) -> (Vec<Action>, TurnMapper) {
        let mut mapper = TurnMapper::new("p", known.map(str::to_owned));
        let mut actions = Vec::new();
        for record in recording.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()) {
            if let Some(line) = record.get("out").and_then(Value::as_str) {
                let event = parse_event(serde_json::from_str(line).unwrap()).unwrap();
                actions.extend(mapper.on_event(event));
            }
        }
        match ending {
            Ending::None => {}
            Ending::Exit(detail) => actions.extend(mapper.on_exit(detail)),
            Ending::Interrupt => actions.extend(mapper.on_interrupted()),
        }
        (actions, mapper)
    }

    /// (name, recording, session known before, how it ended, expected actions)
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, Ending, Vec<String>);

    const OVERLOADED: &str = r#""529 {\"error\":{\"message\":\"Overloaded (scripted mock:error)\",\"type\":\"overloaded_error\"},\"type\":\"error\"}""#;
    const EXECUTE_ECHO: &str = r#"{"command":"echo hello","riskLevel":"low","riskLevelReason":"mock value","summary":"Run the requested command"}"#;
    const EXECUTE_TOUCH: &str = r#"{"command":"touch /tmp/lab/pd/ws/made.txt && echo created","riskLevel":"low","riskLevelReason":"mock value","summary":"Run the requested command"}"#;
    const AUTH: &str = r#""Error: Authentication failed. Please log in using /login or set a valid FACTORY_API_KEY environment variable.""#;

    #[test]
    fn recorded_runs() {
        #[rustfmt::skip]
        let cases: Vec<Case<'_>> = vec![
            ("tool round trip, new session", TOOL, None, Ending::None, vec![
                "session_id 60c1888a-642d-441a-89a7-4d547cd03416".into(),
                "thinking p-thinking-285e321e-663e-48cd-a9b4-6e5c5fa1b92f done=true \"The user wants me to run a command; I will use the shell tool.\"".into(),
                "text p-text-285e321e-663e-48cd-a9b4-6e5c5fa1b92f done=true \"I'll run the command.\"".into(),
                format!("tool_call p-toolu_mock_000001 Execute Running {EXECUTE_ECHO} title=\"Run the requested command\""),
                format!("tool_call p-toolu_mock_000001 Execute Done {EXECUTE_ECHO} title=\"Run the requested command\""),
                "tool_result p-toolu_mock_000001 error=false \"hello\\n\\n\\n[Process exited with code 0]\"".into(),
                "thinking p-thinking-4b171350-52ac-426e-adfd-fbdaf341dd1c done=true \"The tool ran; summarise its output.\"".into(),
                "text p-text-4b171350-52ac-426e-adfd-fbdaf341dd1c done=true \"Done. The command printed: hello\\n\\n\\n[Process exited with code 0] (history=4 msgs)\"".into(),
                "session_end Completed in=Some(20732) out=Some(78) cache_read=Some(0) cache_write=Some(0)".into(),
            ]),
            ("-s offline: no output at all (the adapter then forks)", RESUME_OFFLINE, Some("60c1888a-642d-441a-89a7-4d547cd03416"), Ending::Exit("droid exited with status 1"), vec![
                "error agent_exited recoverable=true \"droid exited with status 1\"".into(),
                "session_end Error \"droid exited with status 1\"".into(),
            ]),
            ("--fork: the new session is reported", FORK, Some("60c1888a-642d-441a-89a7-4d547cd03416"), Ending::None, vec![
                "session_id 7721e3e5-3b2a-49a0-bdcb-043a8310b9e1".into(),
                "text p-text-842657b0-405f-4d65-beb2-b0d82e720c51 done=true \"Hello from the terminull model server. This is a short scripted answer.\"".into(),
                "session_end Completed in=Some(10523) out=Some(18) cache_read=Some(0) cache_write=Some(0)".into(),
            ]),
            ("interrupted (mock:slow): nothing streamed before the kill", SLOW_INTERRUPTED, Some("7721e3e5-3b2a-49a0-bdcb-043a8310b9e1"), Ending::Interrupt, vec![
                "session_id d0fd1a32-5575-49c0-ba1f-a916478226af".into(),
                "session_end Interrupted".into(),
            ]),
            ("mock:write in read-only mode: droid runs `touch` (the model said riskLevel low)", WRITE_READ_ONLY, Some("d0fd1a32-5575-49c0-ba1f-a916478226af"), Ending::None, vec![
                "session_id a4e06038-096a-4aa2-9c18-9e89b588a41e".into(),
                "thinking p-thinking-21eef612-ccbb-48a2-8ff0-03765f4d2296 done=true \"The user wants me to run a command; I will use the shell tool.\"".into(),
                "text p-text-21eef612-ccbb-48a2-8ff0-03765f4d2296 done=true \"I'll run the command.\"".into(),
                format!("tool_call p-toolu_mock_000005 Execute Running {EXECUTE_TOUCH} title=\"Run the requested command\""),
                format!("tool_call p-toolu_mock_000005 Execute Done {EXECUTE_TOUCH} title=\"Run the requested command\""),
                "tool_result p-toolu_mock_000005 error=false \"created\\n\\n\\n[Process exited with code 0]\"".into(),
                "thinking p-thinking-aa2d27b6-1163-47b3-827b-d14e76680d9a done=true \"The tool ran; summarise its output.\"".into(),
                "text p-text-aa2d27b6-1163-47b3-827b-d14e76680d9a done=true \"Done. The command printed: created\\n\\n\\n[Process exited with code 0] (history=12 msgs)\"".into(),
                "session_end Completed in=Some(21319) out=Some(88) cache_read=Some(0) cache_write=Some(0)".into(),
            ]),
            ("no model and no login: droid's own error ends the turn", NO_LOGIN, None, Ending::Exit("droid failed"), vec![
                "session_id 15bb28d1-4e68-4e12-bd72-12d1c7ba461c".into(),
                format!("error agent_error recoverable=true {AUTH}"),
                format!("session_end Error {AUTH}"),
            ]),
            ("an unknown model: only stderr says why", BAD_MODEL, None, Ending::Exit("droid exited with status 1 without finishing the turn:\nInvalid model: custom:nope"), vec![
                "error agent_exited recoverable=true \"droid exited with status 1 without finishing the turn:\\nInvalid model: custom:nope\"".into(),
                "session_end Error \"droid exited with status 1 without finishing the turn:\\nInvalid model: custom:nope\"".into(),
            ]),
            ("model error after droid's retries (about 4 minutes)", MODEL_ERROR, None, Ending::Exit("droid exited with status 1"), vec![
                "session_id 5badb709-1e17-4a89-bab2-fa7465c412d4".into(),
                format!("error model_error recoverable=true {OVERLOADED}"),
                "error agent_error recoverable=true \"Exec failed\"".into(),
                format!("session_end Error {OVERLOADED}"),
            ]),
        ];
        for (name, recording, known, ending, want) in cases {
            let (actions, mapper) = run(recording, known, ending);
            let got: Vec<String> = actions.iter().map(describe).collect();
            assert_eq!(got, want, "{name}");
            assert!(mapper.ended(), "{name}");
            let mut tracker = TurnTracker::new();
            for block in blocks_of(&actions) {
                assert_eq!(tracker.observe(&block), None, "{name}: {block:?}");
            }
            assert!(tracker.ended() && tracker.open_violations().is_empty(), "{name}");
        }
        let (_, mapper) = run(RESUME_OFFLINE, None, Ending::Exit("x"));
        assert!(!mapper.started(), "a run that printed nothing never started");
        let (_, mapper) = run(NO_LOGIN, None, Ending::Exit("x"));
        assert!(mapper.started() && mapper.failed());
    }

    fn event(value: Value) -> Event {
        parse_event(value).unwrap()
    }

    #[test]
    fn synthetic_runs() {
        let mut mapper = TurnMapper::new("p", Some("s-1".into()));
        let mut actions = Vec::new();
        for line in [
            json!({"type":"system","subtype":"init","session_id":"s-1"}),
            json!({"type":"tool_call","id":"c1","toolName":"Read","parameters":{"file_path":"/w/a.rs"}}),
            json!({"type":"tool_call","id":"c1","toolName":"Read","parameters":{"file_path":"/w/a.rs"}}),
            json!({"type":"tool_result","id":"c9","toolId":"LS","isError":true,"value":"denied"}),
            json!({"type":"tool_call","id":"c2","toolName":"Execute","parameters":{"command":"sleep 9"}}),
            json!({"type":"message","role":"assistant","id":"m1","text":""}),
            json!({"type":"reasoning","id":"m1","text":"x"}),
            json!({"type":"reasoning","id":"m1","text":"x again"}),
            json!({"type":"completion","finalText":"All done.","session_id":"s-2"}),
            json!({"type":"message","role":"assistant","id":"late","text":"late"}),
        ] {
            actions.extend(mapper.on_event(event(line)));
        }
        let got: Vec<String> = actions.iter().map(describe).collect();
        assert_eq!(
            got,
            [
                "tool_call p-c1 Read Running {\"file_path\":\"/w/a.rs\"} title=\"/w/a.rs\"",
                "tool_call p-c9 LS Running null title=\"\"",
                "tool_call p-c9 LS Error null title=\"\"",
                "tool_result p-c9 error=true \"denied\"",
                "tool_call p-c2 Execute Running {\"command\":\"sleep 9\"} title=\"sleep 9\"",
                "thinking p-thinking-m1 done=true \"x\"",
                "session_id s-2",
                "text p-text-final done=true \"All done.\"",
                "tool_call p-c2 Execute Error {\"command\":\"sleep 9\"} title=\"sleep 9\"",
                "tool_result p-c2 error=true \"the turn ended before the tool call finished\"",
                "tool_call p-c1 Read Error {\"file_path\":\"/w/a.rs\"} title=\"/w/a.rs\"",
                "tool_result p-c1 error=true \"the turn ended before the tool call finished\"",
                "session_end Completed",
            ],
            "repeats, a result without a call, empty text, finalText without a message, late lines"
        );
        assert_eq!(mapper.session_id(), Some("s-2"));
        assert!(mapper.on_exit("late").is_empty() && mapper.on_interrupted().is_empty());

        // An error with an empty message still says something.
        let mut mapper = TurnMapper::new("p", None);
        let got: Vec<String> =
            mapper.on_event(event(json!({"type":"error","source":"cli"}))).iter().map(describe).collect();
        assert_eq!(got, ["error agent_error recoverable=true \"droid reported an error (cli)\""]);
    }

    #[test]
    fn everything_is_bounded() {
        let mut mapper = TurnMapper::new("p", None);
        let huge = "x".repeat(MAX_TEXT_BYTES + 10);
        let actions = mapper.on_event(event(json!({"type":"message","role":"assistant","id":"m","text":huge})));
        let [Action::Emit(BlockKind::Text(t))] = &actions[..] else { panic!("{actions:?}") };
        assert!(t.text.len() < MAX_TEXT_BYTES + 100 && t.text.ends_with("bytes in all]"));
        let out = "é".repeat(MAX_TOOL_OUTPUT_BYTES);
        let actions = mapper.on_event(event(json!({"type":"tool_call","id":"c","toolName":"Execute",
            "parameters":{"command":"y".repeat(MAX_INPUT_BYTES * 2),"summary":"s".repeat(500)}})));
        let [Action::Emit(BlockKind::ToolCall(call))] = &actions[..] else { panic!("{actions:?}") };
        assert!(call.input.to_string().len() < MAX_INPUT_BYTES + 200);
        assert_eq!(call.title.as_ref().unwrap().chars().count(), MAX_TITLE_CHARS + 1);
        let actions = mapper.on_event(event(json!({"type":"tool_result","id":"c","value":out})));
        let Action::Emit(BlockKind::ToolResult(result)) = &actions[1] else { panic!("{actions:?}") };
        assert!(result.output.len() < MAX_TOOL_OUTPUT_BYTES + 100);
        assert_eq!(bounded("héllo", 2), "h\n… [truncated: 6 bytes in all]");
    }

    #[test]
    fn usage_is_converted_and_summed() {
        let u = usage_of(&AnthropicUsage {
            input_tokens: Some(10),
            output_tokens: Some(2),
            cache_read_input_tokens: Some(3),
            cache_creation_input_tokens: None,
        });
        assert_eq!(
            u,
            Usage {
                input_tokens: Some(10),
                output_tokens: Some(2),
                cache_read_tokens: Some(3),
                cache_write_tokens: None,
                cost_usd: None
            }
        );
        let mut total = Usage::default();
        total.add(&u);
        total.add(&u);
        assert_eq!((total.input_tokens, total.cache_read_tokens, total.cost_usd), (Some(20), Some(6), None));
    }
}
