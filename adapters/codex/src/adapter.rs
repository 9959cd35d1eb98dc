//! The [`Codex`] adapter: one `codex app-server` process per session, or, when the
//! CLI has no usable app-server, one `codex exec --json` process per turn.
//!
//! **app-server** ([`crate::app_server`]): `start` runs `codex app-server` and performs
//! its `initialize` handshake; the first `send` starts the thread (`thread/start`, or
//! `thread/resume` of `resume_session_id`) with the approval policy and sandbox of the
//! permission mode; every turn is a `turn/start` whose notifications stream as blocks,
//! whose approval requests become `permission_request`s, and which `turn/interrupt`
//! stops. When the process dies (or was released for a terminal) the next `send` starts
//! a new one and resumes the thread.
//!
//! **exec fallback**: when `codex app-server` cannot be started or does not answer
//! `initialize` (an older CLI), or does not know `thread/start`, every turn builds its
//! command line ([`crate::command`]), spawns it through the SDK's [`AgentProcess`],
//! closes its stdin at once (codex would otherwise wait for more prompt on a piped
//! stdin), and feeds its stdout through the pure [`TurnMapper`]. Interrupt there is
//! SIGINT to the process group, up to [`INTERRUPT_GRACE`] to exit, then the SDK's
//! shutdown ladder. `codex exec` never asks for approval.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use serde_json::json;
use terminull_adapter_sdk::child::{AgentProcess, SpawnOptions};
use terminull_adapter_sdk::per_turn::{Driven, TurnProcess};
use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::settings::{binary, require_cli, working_dir};
use terminull_protocol::blocks::{Attachment, Progress};
use terminull_protocol::ids::ToolCallId;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::app_server::connection::{AppServer, METHOD_NOT_FOUND, ThreadSettings, TurnOutcome};
use crate::app_server::mapping::AppMapper;
use crate::app_server::rpc::CallFailure;
use crate::command::{PermissionMode, Settings, check_effort, turn_args};
use crate::events::parse_event;
use crate::handoff::CodexSessions;
use crate::mapping::{Action, DiffRequest, FileContent, MAX_DIFF_FILE_BYTES, TurnMapper, content_note, diff_block};

/// How long `<binary> --version` may take at `start`.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);
/// After SIGINT, how long `codex exec` gets to exit on its own.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(3);
/// codex's turn process: after the turn's last event (or end of stdout) it gets 5 s to
/// exit; each step of the SDK's shutdown ladder gets 2 s.
const PROCESS: TurnProcess = TurnProcess {
    agent: "codex",
    interrupt_grace: INTERRUPT_GRACE,
    exit_wait: Duration::from_secs(5),
    shutdown_grace: Duration::from_secs(2),
};
/// What codex 0.171 prints on stderr when `exec resume` names a thread it has no
/// rollout file for.
const NO_ROLLOUT: &str = "no rollout found for thread id";
/// Most image attachments in one message.
const MAX_IMAGES: usize = 16;
/// Most bytes of one decoded image attachment.
const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// How the session drives codex.
#[derive(Debug)]
enum Backend {
    /// `codex app-server`: the process when one runs, and whether it has the session's
    /// thread loaded.
    App { server: Option<Box<AppServer>>, loaded: bool },
    /// `codex exec --json` per turn.
    Exec,
}

/// One Codex session: the settings, how codex is driven, and the conversation (the
/// thread to resume, the usage totals for `get_usage`).
#[derive(Debug)]
pub struct Codex {
    binary: String,
    settings: Settings,
    thread: Conversation,
    backend: Backend,
}

impl Adapter for Codex {
    const AGENT_ID: &'static str = "codex";
    const DISPLAY_NAME: &'static str = "Codex";
    const CLI_BINARY: Option<&'static str> = Some("codex");
    const ADAPTER_VERSION: Option<&'static str> = Some(env!("CARGO_PKG_VERSION"));
    const VERIFIED_AGAINST: Option<&'static str> = Some("0.171.0");
    // images: `localImage` inputs (app-server) or --image (exec), from a private temp dir.
    // thinking: reasoning summaries.
    // permissions: app-server's command and patch approval requests (exec never asks).
    const CAPS: Caps = caps! {
        supported: [images, thinking, permissions, interrupt],
        unsupported: [documents, subagents, input_during_turn, terminal],
    };
    const LEASE: LeaseKind = LeaseKind::Persistent;
    const INIT_PARAMS: &'static [InitParam] = EVERY_INIT_PARAM;

    const HANDOFF_HOOKS: &'static [HandoffHook] = terminull_adapter_sdk::handoff::PERSISTENT_HOOKS;

    type Models = NotProvided;
    type Usage = Provided;

    fn handoff() -> Option<impl Handoff> {
        Some(CodexSessions)
    }

    async fn start(init: StartParams, session: &Session) -> Result<(Self, StartInfo), AdapterError> {
        let mode = PermissionMode::parse(init.permission_mode.as_deref())?;
        if let Some(effort) = &init.effort {
            check_effort(effort)?;
        }
        let cwd = working_dir(init.cwd.as_deref())?;
        let binary = binary(init.binary.clone(), "codex");
        let version = require_cli(&binary, "codex", VERSION_TIMEOUT).await?;
        let version = version.map(|v| v.strip_prefix("codex-cli ").map(str::to_owned).unwrap_or(v));
        let thread_id = init.resume_session_id.as_ref().map(|id| id.as_str().to_owned());
        if let Some(id) = &thread_id {
            session.set_agent_session_id(id.as_str()).await?;
        }
        let backend = match AppServer::start(&binary, &cwd).await {
            Ok(server) => Backend::App { server: Some(Box::new(server)), loaded: false },
            Err(e) => {
                tracing::warn!("codex app-server is unavailable ({e}); using `codex exec` per turn (no approvals)");
                Backend::Exec
            }
        };
        tracing::info!(%binary, cwd = %cwd.display(), ?mode, resume = ?thread_id, ?backend, "codex session ready");
        let model = init.model.clone();
        let settings = Settings { cwd, model: init.model, effort: init.effort, mode };
        let adapter = Codex { binary, settings, thread: Conversation::new("codex", thread_id), backend };
        Ok((adapter, StartInfo { version, model, slash_commands: Vec::new() }))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        match self.backend {
            Backend::App { .. } => self.app_turn(message, turn).await,
            Backend::Exec => self.exec_turn(message, turn).await,
        }
    }

    async fn stop(&mut self) {
        if let Backend::App { server, loaded } = &mut self.backend
            && let Some(mut server) = server.take()
        {
            *loaded = false;
            server.shutdown().await;
        }
    }

    /// Ends the app-server so a terminal can resume the thread; the next `send` starts a
    /// new one that resumes it. (`codex exec` holds nothing between turns.)
    async fn release(&mut self) -> Result<(), AdapterError> {
        self.stop().await;
        Ok(())
    }
}

impl Codex {
    fn thread_settings(&self) -> ThreadSettings {
        ThreadSettings {
            cwd: self.settings.cwd.display().to_string(),
            approval_policy: self.settings.mode.approval_policy(),
            sandbox: self.settings.mode.app_sandbox(),
            model: self.settings.model.clone(),
        }
    }

    /// One turn on the app-server: start it (again) when needed, load the thread, run
    /// `turn/start`.
    async fn app_turn(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        // Held until the turn ends; dropping it deletes the image files.
        let images = Images::write(&message.attachments).await?;
        let settings = self.thread_settings();
        let Backend::App { server, loaded } = &mut self.backend else {
            return Err(AdapterError::agent("codex app-server is not in use"));
        };
        if server.as_mut().is_none_or(|s| !s.is_running()) {
            if let Some(mut old) = server.take() {
                old.shutdown().await;
            }
            *loaded = false;
            let started = AppServer::start(&self.binary, &self.settings.cwd).await;
            *server = Some(Box::new(started.map_err(|e| AdapterError::agent(e.detail))?));
        }
        let Some(running) = server.as_mut() else { return Err(AdapterError::agent("codex app-server is not running")) };
        if !*loaded {
            let started = match self.thread.id().map(str::to_owned) {
                Some(id) => match running.resume_thread(&id, &settings).await {
                    Err(CallFailure::Rpc { error, .. }) => {
                        // No rollout for the thread (deleted, or the id came from elsewhere):
                        // without this every later turn would fail the same way.
                        self.thread.forget();
                        let message = format!(
                            "codex cannot resume thread {id} ({}); this message starts a new thread",
                            error.message
                        );
                        tracing::warn!("{message}");
                        let progress = Progress {
                            id: format!("resume-{id}").into(),
                            message,
                            current: None,
                            total: None,
                            done: true,
                        };
                        turn.emit_lenient(BlockKind::Progress(progress)).await?;
                        running.start_thread(&settings).await
                    }
                    other => other,
                },
                None => running.start_thread(&settings).await,
            };
            let id = match started {
                Ok(id) => id,
                Err(CallFailure::Rpc { error, .. }) if error.code == METHOD_NOT_FOUND => {
                    tracing::warn!(
                        "codex app-server does not know thread/start ({}); using `codex exec`",
                        error.message
                    );
                    if let Some(mut old) = server.take() {
                        old.shutdown().await;
                    }
                    self.backend = Backend::Exec;
                    drop(images);
                    return self.exec_turn(message, turn).await;
                }
                Err(e) => return Err(AdapterError::agent(format!("codex app-server: {e}"))),
            };
            if self.thread.id() != Some(id.as_str()) {
                self.thread.record_id(id, turn).await?;
            }
            *loaded = true;
        }
        let thread_id = self.thread.id().unwrap_or_default().to_owned();
        let mut input = vec![json!({"type": "text", "text": message.text, "text_elements": []})];
        input.extend(images.paths.iter().map(|p| json!({"type": "localImage", "path": p})));
        let mut params = json!({"threadId": thread_id, "input": input});
        if let Some(effort) = &self.settings.effort {
            params["effort"] = json!(effort);
        }
        let mut mapper = AppMapper::new(mint_id("codex"));
        let Backend::App { server, loaded } = &mut self.backend else { return Ok(EndReason::Error) };
        let Some(running) = server.as_mut() else { return Ok(EndReason::Error) };
        match running.run_turn(&thread_id, params, &mut mapper, &mut self.thread, turn).await {
            TurnOutcome::Ended(reason) => Ok(reason),
            TurnOutcome::Lost(reason) => {
                if let Some(mut lost) = server.take() {
                    lost.shutdown().await;
                }
                *loaded = false;
                Ok(reason)
            }
        }
    }

    /// One turn as a `codex exec --json` process.
    async fn exec_turn(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        // Held until the turn ends; dropping it deletes the image files.
        let images = Images::write(&message.attachments).await?;
        let image_paths: Vec<&Path> = images.paths.iter().map(PathBuf::as_path).collect();
        let args = turn_args(&self.settings, self.thread.id(), &message.text, &image_paths);
        tracing::debug!(binary = %self.binary, ?args, "starting codex");
        let mut cmd = Command::new(&self.binary);
        cmd.args(&args).current_dir(&self.settings.cwd);
        let (mut process, mut lines) =
            AgentProcess::spawn(cmd, SpawnOptions::default()).map_err(AdapterError::agent)?;
        process.close_stdin();

        let mut mapper = TurnMapper::new(mint_id("codex"), self.thread.id().map(str::to_owned));
        let cwd = &self.settings.cwd;
        let resolve = async |actions| resolve_diffs(cwd, actions).await;
        let status = match PROCESS
            .drive(&mut process, &mut lines, turn, &mut self.thread, &mut mapper, parse_event, resolve)
            .await?
        {
            Driven::Ended(reason) => return Ok(reason),
            Driven::Closed(status) => status,
        };
        // stdout closed before codex ended the turn.
        let stderr = process.stderr_tail();
        let mut detail = PROCESS.exit_detail(status, &stderr);
        if !mapper.thread_started()
            && stderr.contains(NO_ROLLOUT)
            && let Some(lost) = self.thread.forget()
        {
            // The thread cannot be resumed (its rollout file is gone, or the id came from
            // elsewhere): without this, every later turn would fail the same way.
            detail = format!("codex cannot resume thread {lost}; the next message starts a new thread.\n{detail}");
        }
        tracing::warn!("{detail}");
        let actions = resolve_diffs(&self.settings.cwd, mapper.on_exit(&detail)).await;
        match self.thread.apply(actions, turn).await? {
            Some(end) => self.thread.end_turn(end, turn).await,
            None => Ok(EndReason::Error),
        }
    }
}

impl GetUsage for Codex {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(self.thread.totals().clone())
    }
}

/// Reads the files codex changed for their `diff` blocks, in order. A diff that
/// cannot be shown (missing, binary, too large) gets a note appended to its tool call's
/// result, when that result follows in the same batch.
async fn resolve_diffs(cwd: &Path, actions: Vec<Action>) -> Vec<terminull_adapter_sdk::Action> {
    let mut notes: Vec<(ToolCallId, String)> = Vec::new();
    let mut out = Vec::with_capacity(actions.len());
    for action in actions {
        out.push(match action {
            Action::Agent(request) => {
                let content = read_changed_file(cwd, &request).await;
                if let Some(note) = content_note(&content) {
                    notes.push((request.tool_call_id.clone(), format!("{}: {note}", request.path)));
                }
                terminull_adapter_sdk::Action::Emit(diff_block(&request, content))
            }
            Action::Emit(BlockKind::ToolResult(mut result)) => {
                let mine: Vec<String> =
                    notes.iter().filter(|(id, _)| id == &result.tool_call_id).map(|(_, n)| n.clone()).collect();
                if !mine.is_empty() {
                    result.output = format!("{}\n{}", result.output, mine.join("\n"));
                }
                terminull_adapter_sdk::Action::Emit(BlockKind::ToolResult(result))
            }
            Action::Emit(kind) => terminull_adapter_sdk::Action::Emit(kind),
            Action::SessionId(id) => terminull_adapter_sdk::Action::SessionId(id),
            Action::End(end) => terminull_adapter_sdk::Action::End(end),
        });
    }
    out
}

/// Reads a file codex changed, for its `diff` block: at most [`MAX_DIFF_FILE_BYTES`],
/// regular files only (never a FIFO or device that could block or never end).
async fn read_changed_file(cwd: &Path, request: &DiffRequest) -> FileContent {
    let path = Path::new(&request.path);
    let full = if path.is_absolute() { path.to_path_buf() } else { cwd.join(path) };
    let meta = match tokio::fs::metadata(&full).await {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FileContent::Missing,
        Err(e) => return FileContent::Unreadable(e.to_string()),
    };
    if !meta.is_file() {
        return FileContent::Unreadable("not a regular file".to_owned());
    }
    if meta.len() > MAX_DIFF_FILE_BYTES {
        return FileContent::TooLarge(meta.len());
    }
    let mut bytes = Vec::new();
    let read = match tokio::fs::File::open(&full).await {
        Ok(file) => file.take(MAX_DIFF_FILE_BYTES + 1).read_to_end(&mut bytes).await,
        Err(e) => Err(e),
    };
    match read {
        Err(e) => FileContent::Unreadable(e.to_string()),
        Ok(n) if n as u64 > MAX_DIFF_FILE_BYTES => FileContent::TooLarge(n as u64),
        Ok(_) => String::from_utf8(bytes).map(FileContent::Text).unwrap_or(FileContent::Binary),
    }
}

/// A message's image attachments, written to a private temporary directory (mode 0700,
/// deleted when this is dropped) for `--image`.
#[derive(Debug)]
struct Images {
    _dir: Option<tempfile::TempDir>,
    paths: Vec<PathBuf>,
}

impl Images {
    async fn write(attachments: &[Attachment]) -> Result<Images, AdapterError> {
        if attachments.is_empty() {
            return Ok(Images { _dir: None, paths: Vec::new() });
        }
        if attachments.len() > MAX_IMAGES {
            return Err(AdapterError::invalid(format!(
                "{} attachments; codex takes at most {MAX_IMAGES} images per message",
                attachments.len()
            )));
        }
        let dir = tempfile::Builder::new()
            .prefix("terminull-codex-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()
            .map_err(|e| AdapterError::agent(format!("cannot create a directory for the images: {e}")))?;
        let mut paths = Vec::with_capacity(attachments.len());
        for (i, attachment) in attachments.iter().enumerate() {
            let ext = image_extension(&attachment.mime_type).ok_or_else(|| {
                AdapterError::invalid(format!(
                    "`{}` is {}; codex takes image attachments only",
                    attachment.name, attachment.mime_type
                ))
            })?;
            if attachment.data.len() > MAX_IMAGE_BYTES / 3 * 4 + 4 {
                return Err(AdapterError::invalid(format!(
                    "`{}` is larger than {MAX_IMAGE_BYTES} bytes",
                    attachment.name
                )));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(attachment.data.as_bytes())
                .map_err(|e| AdapterError::invalid(format!("`{}` is not valid base64: {e}", attachment.name)))?;
            let path = dir.path().join(format!("image-{}.{ext}", i + 1));
            tokio::fs::write(&path, &bytes)
                .await
                .map_err(|e| AdapterError::agent(format!("cannot write {}: {e}", path.display())))?;
            paths.push(path);
        }
        Ok(Images { _dir: Some(dir), paths })
    }
}

/// The file extension for an image MIME type; `None` when it is not an image.
fn image_extension(mime_type: &str) -> Option<String> {
    let mime = mime_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let subtype = mime.strip_prefix("image/")?;
    let ext = match subtype {
        "jpeg" | "jpg" | "pjpeg" => "jpg".to_owned(),
        "svg+xml" => "svg".to_owned(),
        other => other.chars().filter(char::is_ascii_alphanumeric).take(10).collect(),
    };
    Some(if ext.is_empty() { "img".to_owned() } else { ext })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;
    use terminull_adapter_sdk::child::STDERR_QUOTE_BYTES;

    #[test]
    fn image_extensions() {
        let cases = [
            ("image/png", Some("png")),
            ("image/jpeg", Some("jpg")),
            ("IMAGE/WEBP; q=1", Some("webp")),
            ("image/svg+xml", Some("svg")),
            ("image/../../x", Some("x")),
            ("image/", Some("img")),
            ("application/pdf", None),
            ("text/plain", None),
        ];
        for (mime, want) in cases {
            assert_eq!(image_extension(mime).as_deref(), want, "{mime}");
        }
    }

    #[tokio::test]
    async fn images_are_written_privately_and_deleted_after() {
        let png = Attachment { name: "a.png".into(), mime_type: "image/png".into(), data: "iVBORw0KGgo=".into() };
        let images = Images::write(&[png.clone(), png]).await.unwrap();
        assert_eq!(images.paths.len(), 2);
        let dir = images.paths[0].parent().unwrap().to_path_buf();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::read(&images.paths[1]).unwrap(), b"\x89PNG\r\n\x1a\n");
        drop(images);
        assert!(!dir.exists());

        let pdf = Attachment { name: "a.pdf".into(), mime_type: "application/pdf".into(), data: String::new() };
        let err = Images::write(&[pdf]).await.unwrap_err();
        assert!(err.message.contains("image attachments only"), "{err}");
        let bad = Attachment { name: "b.png".into(), mime_type: "image/png".into(), data: "!!".into() };
        assert!(Images::write(&[bad]).await.unwrap_err().message.contains("base64"));
    }

    #[tokio::test]
    async fn changed_files_are_read_with_bounds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hi\n").unwrap();
        std::fs::write(dir.path().join("big"), vec![b'x'; MAX_DIFF_FILE_BYTES as usize + 1]).unwrap();
        std::fs::write(dir.path().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        let req = |path: &str| DiffRequest {
            path: path.into(),
            kind: crate::events::ChangeKind::Update,
            tool_call_id: "c".into(),
        };
        let abs = dir.path().join("a.txt").display().to_string();
        let cases = [
            (req("a.txt"), FileContent::Text("hi\n".into())),
            (req(&abs), FileContent::Text("hi\n".into())),
            (req("gone"), FileContent::Missing),
            (req("big"), FileContent::TooLarge(MAX_DIFF_FILE_BYTES + 1)),
            (req("bin"), FileContent::Binary),
            (req("."), FileContent::Unreadable("not a regular file".into())),
        ];
        for (request, want) in cases {
            assert_eq!(read_changed_file(dir.path(), &request).await, want, "{}", request.path);
        }
    }

    #[test]
    fn exit_details() {
        let status = ExitStatus::from_raw(1 << 8);
        assert_eq!(PROCESS.exit_detail(Some(status), ""), "codex exited with status 1 before finishing the turn");
        let signalled = ExitStatus::from_raw(9);
        let tail: String = (0..40).map(|i| format!("line {i}\n")).collect();
        let detail = PROCESS.exit_detail(Some(signalled), &tail);
        assert!(detail.starts_with("codex exited on signal 9 before finishing the turn:\nline 28\n"), "{detail}");
        assert!(detail.ends_with("line 39"));
        let anyhow = "WARNING: proceeding\nError: thread/resume failed: no rollout found for thread id x\n\nStack backtrace:\n   0: <unknown>\n  12: main\n             at src/main.rs:3\n";
        assert_eq!(
            PROCESS.exit_detail(Some(status), anyhow),
            "codex exited with status 1 before finishing the turn:\nWARNING: proceeding\nError: thread/resume failed: no rollout found for thread id x"
        );
        let long = "é".repeat(5000);
        assert!(PROCESS.exit_detail(None, &long).len() < STDERR_QUOTE_BYTES + 100);
    }
}
