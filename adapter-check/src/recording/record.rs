//! The recorder: one adapter process through a fixed [`Script`], every line both ways
//! kept in order.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::driven::{Driven, Line, Read, temp_cwd};
use super::{Entry, RecordingError, normalize};

/// The init params the recorder offers in `initialize`: all six of protocol version 1.
const OFFERED_INIT_PARAMS: [&str; 7] =
    ["cwd", "model", "binary", "resume_session_id", "on_session_id", "effort", "permission_mode"];

/// The fixed script [`record`] runs. [`Script::default`] is the one the golden
/// recordings (`tests/transcripts/`) use; the fields exist so a caller can vary the prompt or the timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// `start`'s `session_id`. Default `transcript-session`.
    pub session_id: String,
    /// The text of the one `send`. Default `hello transcript`.
    pub prompt: String,
    /// `start`'s `model` when the adapter accepts `model` but does not provide models
    /// (when it does, the default model of its `list_models` answer is used). Default
    /// `default`.
    pub model: String,
    /// `start`'s `effort` when the adapter accepts `effort`. Default `medium`.
    pub effort: String,
    /// How long to wait for each response. Default 20 s.
    pub response_timeout: Duration,
    /// How long to wait, after `send` was answered, for the turn's `session_end`. Default 20 s.
    pub turn_timeout: Duration,
    /// How long the adapter has to exit after `stop` was answered. Default 5 s.
    pub exit_timeout: Duration,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            session_id: "transcript-session".to_owned(),
            prompt: "hello transcript".to_owned(),
            model: "default".to_owned(),
            effort: "medium".to_owned(),
            response_timeout: Duration::from_secs(20),
            turn_timeout: Duration::from_secs(20),
            exit_timeout: Duration::from_secs(5),
        }
    }
}

/// The recorder's state for one run.
#[derive(Debug)]
struct Recorder<'a> {
    adapter: Driven,
    script: &'a Script,
    /// Everything both ways, not yet normalised.
    entries: Vec<Entry>,
    next_id: u64,
}

impl Recorder<'_> {
    /// Writes a request and records it; returns its id.
    async fn send(&mut self, method: &str, params: Option<Value>) -> Result<u64, RecordingError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(params) = params {
            msg["params"] = params;
        }
        self.entries.push(Entry::ToAdapter(msg.clone()));
        if let Err(source) = self.adapter.write(&msg).await {
            return Err(RecordingError::Write {
                method: method.to_owned(),
                source,
                stderr_tail: self.adapter.stderr_tail(),
            });
        }
        Ok(id)
    }

    /// Reads and records one line; `waiting_for` names what the caller waits for.
    async fn read(&mut self, deadline: Instant, waiting_for: &str) -> Result<Option<Value>, ReadFailure> {
        match self.adapter.next(deadline).await {
            Read::Line(Line::Json(v)) => {
                self.entries.push(Entry::FromAdapter(v.clone()));
                Ok(Some(v))
            }
            Read::Line(Line::Raw(raw)) => {
                self.entries.push(Entry::FromAdapterRaw(raw));
                Ok(None)
            }
            Read::Closed => Err(ReadFailure::Closed(waiting_for.to_owned())),
            Read::TimedOut => Err(ReadFailure::TimedOut),
        }
    }

    /// Sends a request and records lines until its response; returns the response.
    /// `on_line` sees every JSON line before the response.
    async fn call(
        &mut self,
        method: &str,
        params: Option<Value>,
        mut on_line: impl FnMut(&Value),
    ) -> Result<Value, RecordingError> {
        let id = self.send(method, params).await?;
        let deadline = Instant::now() + self.script.response_timeout;
        loop {
            match self.read(deadline, &format!("the answer to `{method}`")).await {
                Ok(Some(v)) if is_response_to(&v, id) => return Ok(v),
                Ok(Some(v)) => on_line(&v),
                Ok(None) => {}
                Err(failure) => return Err(self.failure(failure, method, self.script.response_timeout, false)),
            }
        }
    }

    fn failure(&self, failure: ReadFailure, method: &str, waited: Duration, turn: bool) -> RecordingError {
        let stderr_tail = self.adapter.stderr_tail();
        match failure {
            ReadFailure::Closed(waiting_for) => RecordingError::Closed { waiting_for, stderr_tail },
            ReadFailure::TimedOut if turn => RecordingError::TurnTimeout { waited, stderr_tail },
            ReadFailure::TimedOut => RecordingError::Timeout { method: method.to_owned(), waited, stderr_tail },
        }
    }

    async fn run(&mut self, cwd: &Path) -> Result<(), RecordingError> {
        let script = self.script;
        let init = self
            .call(
                "initialize",
                Some(json!({
                    "protocol_version": terminull_protocol::adapter::OLDEST_PROTOCOL_VERSION,
                    "newest_protocol_version": terminull_protocol::adapter::PROTOCOL_VERSION,
                    "bridge": {"name": "terminull", "version": "transcript"},
                    "offered_init_params": OFFERED_INIT_PARAMS,
                })),
                |_| {},
            )
            .await?;
        let Some(declaration) = init.get("result").filter(|r| r.is_object()).cloned() else {
            return Err(RecordingError::Initialize { response: init });
        };
        let accepted: Vec<&str> = declaration
            .get("accepted_init_params")
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let provides = |flag: &str| declaration.get(flag) == Some(&Value::Bool(true));

        self.call("detect", None, |_| {}).await?;

        let mut model = script.model.clone();
        if provides("provides_models") {
            let models = self.call("list_models", None, |_| {}).await?;
            if let Some(id) = default_model(&models) {
                model = id;
            }
        }

        let mut start = json!({"session_id": script.session_id});
        for (param, value) in
            [("cwd", cwd.to_string_lossy().into_owned()), ("model", model), ("effort", script.effort.clone())]
        {
            if accepted.contains(&param) {
                start[param] = Value::String(value);
            }
        }
        self.call("start", Some(start), |_| {}).await?;

        let mut ended = false;
        let ack = self.call("send", Some(json!({"text": script.prompt})), |v| ended |= is_session_end(v)).await?;
        if ack.get("result").is_some() && !ended {
            let deadline = Instant::now() + script.turn_timeout;
            loop {
                match self.read(deadline, "the turn's session_end").await {
                    Ok(Some(v)) if is_session_end(&v) => break,
                    Ok(_) => {}
                    Err(failure) => return Err(self.failure(failure, "send", script.turn_timeout, true)),
                }
            }
        }

        if provides("provides_usage") {
            self.call("get_usage", None, |_| {}).await?;
        }
        self.call("stop", None, |_| {}).await?;

        // Whatever the adapter still writes is recorded; then it must exit.
        let deadline = Instant::now() + script.exit_timeout;
        let no_exit = |adapter: &Driven| RecordingError::NoExit {
            waited: script.exit_timeout,
            stderr_tail: adapter.stderr_tail(),
        };
        loop {
            match self.read(deadline, "the adapter's exit").await {
                Ok(_) => {}
                Err(ReadFailure::Closed(_)) => break,
                Err(ReadFailure::TimedOut) => return Err(no_exit(&self.adapter)),
            }
        }
        match self.adapter.wait_exit(deadline).await {
            Some(_) => Ok(()),
            None => Err(no_exit(&self.adapter)),
        }
    }
}

/// Why no line was read.
#[derive(Debug)]
enum ReadFailure {
    /// stdout closed while waiting for the named thing.
    Closed(String),
    TimedOut,
}

fn is_response_to(msg: &Value, id: u64) -> bool {
    msg.get("method").is_none()
        && msg.get("id").and_then(Value::as_u64) == Some(id)
        && (msg.get("result").is_some() || msg.get("error").is_some())
}

fn is_session_end(msg: &Value) -> bool {
    msg.get("method").and_then(Value::as_str) == Some("stream")
        && msg.pointer("/params/block/type").and_then(Value::as_str) == Some("session_end")
}

/// The id of the model marked `is_default` in a `list_models` response, else the first.
fn default_model(response: &Value) -> Option<String> {
    let models = response.pointer("/result/models")?.as_array()?;
    let default = models.iter().find(|m| m.get("is_default") == Some(&Value::Bool(true))).or(models.first())?;
    default.get("id")?.as_str().map(str::to_owned)
}

/// Runs `program args…` as an adapter through `script` and returns the normalised
/// recording of everything written both ways. The session's `cwd` is a fresh
/// temporary directory, removed afterwards; the adapter process itself runs in the
/// caller's working directory, so relative paths in `args` work. Fails when the adapter
/// cannot be started, does not answer a request or end the turn in time, refuses
/// `initialize`, or does not exit after `stop`; error responses to other requests are
/// simply recorded.
pub async fn record(
    program: impl AsRef<OsStr>,
    args: &[String],
    script: &Script,
) -> Result<Vec<Entry>, RecordingError> {
    let dir = temp_cwd()?;
    let adapter = Driven::spawn(program.as_ref(), args)?;
    let mut recorder = Recorder { adapter, script, entries: Vec::new(), next_id: 1 };
    let outcome = recorder.run(dir.path()).await;
    recorder.adapter.shutdown().await;
    outcome?;
    Ok(normalize(&recorder.entries, dir.path()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_the_default_one_else_the_first() {
        let r = json!({"result": {"models": [{"id": "a"}, {"id": "b", "is_default": true}]}});
        assert_eq!(default_model(&r).as_deref(), Some("b"));
        let r = json!({"result": {"models": [{"id": "a"}, {"id": "b"}]}});
        assert_eq!(default_model(&r).as_deref(), Some("a"));
        assert_eq!(default_model(&json!({"error": {"code": -32601, "message": "no"}})), None);
    }
}
