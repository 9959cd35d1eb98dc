//! The [`Codex`] adapter: one `codex exec --json` process per turn.
//!
//! `start` only checks the settings and the CLI (`<binary> --version`); nothing runs
//! between turns. `send` builds the turn's command line ([`crate::command`]), spawns
//! it through the SDK's [`AgentProcess`] (own process group, bounded stdout lines and
//! stderr tail), closes its stdin at once (codex would otherwise wait for more prompt on
//! a piped stdin), feeds every stdout line through the pure [`TurnMapper`] and carries
//! out the actions: stream blocks, report the thread id, read changed files for `diff`
//! blocks, end the turn. The thread id from `thread.started` makes the next turn a
//! `codex exec resume`.
//!
//! Interrupt: SIGINT to the process group (codex's Ctrl-C; it also reaches the
//! commands it runs), up to [`INTERRUPT_GRACE`] to exit, then the SDK's shutdown
//! ladder (SIGTERM, SIGKILL). The conversation stays resumable: the next turn resumes
//! the same thread.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use base64::Engine;
use terminull_adapter_sdk::child::{AgentProcess, LineReceiver, SpawnOptions, describe_exit, quote_stderr};
use terminull_adapter_sdk::detect::detect_cli;
use terminull_adapter_sdk::prelude::*;
use terminull_protocol::adapter::{
    ExternalSession, IsCwdExternallyOwnedParams, IsCwdExternallyOwnedResult, LatestSidForCwdParams,
    LatestSidForCwdResult, MirrorParams, MirrorResult, ScanExternalSessionsParams, TerminalResumeCommandParams,
    TerminalResumeCommandResult,
};
use terminull_protocol::blocks::{Attachment, SessionEnd};
use terminull_protocol::ids::ToolCallId;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::command::{PermissionMode, Settings, check_effort, turn_args};
use crate::events::parse_event;
use crate::handoff;
use crate::mapping::{Action, DiffRequest, FileContent, MAX_DIFF_FILE_BYTES, TurnMapper, content_note, diff_block};

/// How long `<binary> --version` may take at `start`.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);
/// After SIGINT, how long codex gets to exit on its own.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(3);
/// After the turn's last event (or end of stdout), how long codex gets to exit.
const EXIT_WAIT: Duration = Duration::from_secs(5);
/// Each step of the SDK's shutdown ladder (close stdin, SIGTERM, SIGKILL).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// What codex 0.171 prints on stderr when `exec resume` names a thread it has no
/// rollout file for.
const NO_ROLLOUT: &str = "no rollout found for thread id";
/// Most image attachments in one message.
const MAX_IMAGES: usize = 16;
/// Most bytes of one decoded image attachment.
const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// One Codex session: the settings every turn's command line is built from, the thread
/// to resume, and the usage totals for `get_usage`.
#[derive(Debug)]
pub struct Codex {
    binary: String,
    settings: Settings,
    thread_id: Option<String>,
    totals: Usage,
}

impl Adapter for Codex {
    const AGENT_ID: &'static str = "codex";
    const DISPLAY_NAME: &'static str = "Codex";
    const CLI_BINARY: Option<&'static str> = Some("codex");
    const ADAPTER_VERSION: Option<&'static str> = Some(env!("CARGO_PKG_VERSION"));
    const VERIFIED_AGAINST: Option<&'static str> = Some("0.171.0");
    const CAPS: Caps = Caps {
        // Written to a private temp dir and passed with --image.
        images: true,
        documents: false,
        // `reasoning` items.
        thinking: true,
        // `codex exec` never asks; the sandbox mode (permission_mode) decides.
        permissions: false,
        subagents: false,
        interrupt: true,
        input_during_turn: false,
        terminal: false,
    };
    const LEASE: LeaseKind = LeaseKind::PerTurn;
    const INIT_PARAMS: &'static [InitParam] = &[
        InitParam::Cwd,
        InitParam::Model,
        InitParam::Binary,
        InitParam::ResumeSessionId,
        InitParam::OnSessionId,
        InitParam::Effort,
        InitParam::PermissionMode,
    ];

    const HANDOFF_HOOKS: &'static [HandoffHook] = terminull_adapter_sdk::handoff::PER_TURN_HOOKS;

    type Models = NotProvided;
    type Usage = Provided;

    async fn scan_external_sessions(params: ScanExternalSessionsParams) -> Result<Vec<ExternalSession>, AdapterError> {
        Ok(handoff::scan(&home()?, &params))
    }

    async fn is_cwd_externally_owned(
        params: IsCwdExternallyOwnedParams,
    ) -> Result<IsCwdExternallyOwnedResult, AdapterError> {
        Ok(handoff::is_owned(&params))
    }

    async fn mirror(params: MirrorParams) -> Result<MirrorResult, AdapterError> {
        handoff::mirror(&home()?, &params)
    }

    async fn latest_sid_for_cwd(params: LatestSidForCwdParams) -> Result<LatestSidForCwdResult, AdapterError> {
        Ok(handoff::latest(&home()?, &params))
    }

    async fn terminal_resume_command(
        params: TerminalResumeCommandParams,
    ) -> Result<TerminalResumeCommandResult, AdapterError> {
        handoff::resume_command(&params)
    }

    async fn start(init: StartParams, session: &Session) -> Result<(Self, StartInfo), AdapterError> {
        let mode = PermissionMode::parse(init.permission_mode.as_deref()).map_err(AdapterError::invalid)?;
        if let Some(effort) = &init.effort {
            check_effort(effort).map_err(AdapterError::invalid)?;
        }
        let cwd = match &init.cwd {
            Some(cwd) => PathBuf::from(cwd),
            None => std::env::current_dir().map_err(|e| AdapterError::agent(format!("no working directory: {e}")))?,
        };
        let cwd = std::path::absolute(&cwd).unwrap_or(cwd);
        if !cwd.is_dir() {
            return Err(AdapterError::invalid(format!("the working directory {} is not a directory", cwd.display())));
        }
        let binary = init.binary.clone().filter(|b| !b.trim().is_empty()).unwrap_or_else(|| "codex".to_owned());
        let detected = detect_cli(&binary, VERSION_TIMEOUT).await;
        if !detected.installed {
            let reason = detected.reason.unwrap_or_else(|| format!("`{binary}` cannot be run"));
            return Err(AdapterError::agent(format!("codex is not available: {reason}")));
        }
        let version = detected.version.map(|v| v.strip_prefix("codex-cli ").map(str::to_owned).unwrap_or(v));
        let thread_id = init.resume_session_id.as_ref().map(|id| id.as_str().to_owned());
        if let Some(id) = &thread_id {
            session.set_agent_session_id(id.as_str()).await.map_err(AdapterError::agent)?;
        }
        tracing::info!(%binary, cwd = %cwd.display(), ?mode, resume = ?thread_id, "codex session ready");
        let model = init.model.clone();
        let settings = Settings { cwd, model: init.model, effort: init.effort, mode };
        let adapter = Codex { binary, settings, thread_id, totals: Usage::default() };
        Ok((adapter, StartInfo { version, model, slash_commands: Vec::new() }))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        // Held until the turn ends; dropping it deletes the image files.
        let images = Images::write(&message.attachments).await?;
        let image_paths: Vec<&Path> = images.paths.iter().map(PathBuf::as_path).collect();
        let args = turn_args(&self.settings, self.thread_id.as_deref(), &message.text, &image_paths);
        tracing::debug!(binary = %self.binary, ?args, "starting codex");
        let mut cmd = Command::new(&self.binary);
        cmd.args(&args).current_dir(&self.settings.cwd);
        let (mut process, mut lines) =
            AgentProcess::spawn(cmd, SpawnOptions::default()).map_err(AdapterError::agent)?;
        process.close_stdin();

        let mut mapper = TurnMapper::new(mint_id("codex"), self.thread_id.clone());
        loop {
            let next = tokio::select! {
                () = turn.interrupted() => None,
                line = lines.recv() => Some(line),
            };
            let Some(line) = next else {
                return self.interrupt(process, lines, mapper, turn).await;
            };
            let value = match line {
                Some(Ok(value)) => value,
                Some(Err(bad)) => {
                    tracing::warn!("skipping a line of codex output: {bad}");
                    continue;
                }
                None => break,
            };
            let event = match parse_event(value) {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!("skipping a codex event: {e}");
                    continue;
                }
            };
            if let Some(end) = self.apply(mapper.on_event(event), turn).await? {
                let status = wind_down(&mut process, &mut lines).await;
                tracing::debug!(?status, reason = ?end.reason, "codex turn ended");
                return self.end_turn(end, turn).await;
            }
        }
        // stdout closed before codex ended the turn.
        let status = wind_down(&mut process, &mut lines).await;
        let stderr = process.stderr_tail();
        let mut detail = exit_detail(status, &stderr);
        if !mapper.thread_started()
            && let Some(lost) = self.thread_id.take_if(|_| stderr.contains(NO_ROLLOUT))
        {
            // The thread cannot be resumed (its rollout file is gone, or the id came from
            // elsewhere): without this, every later turn would fail the same way.
            detail = format!("codex cannot resume thread {lost}; the next message starts a new thread.\n{detail}");
        }
        tracing::warn!("{detail}");
        match self.apply(mapper.on_exit(&detail), turn).await? {
            Some(end) => self.end_turn(end, turn).await,
            None => Ok(EndReason::Error),
        }
    }
}

impl GetUsage for Codex {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(self.totals.clone())
    }
}

impl Codex {
    /// Ends the turn's process on interrupt and closes what the turn left open.
    async fn interrupt(
        &mut self,
        mut process: AgentProcess,
        mut lines: LineReceiver,
        mut mapper: TurnMapper,
        turn: &mut Turn,
    ) -> Result<EndReason, AdapterError> {
        tracing::info!(pid = process.pid(), "interrupting codex");
        let outcome = process.interrupt_and_end(&mut lines, INTERRUPT_GRACE, SHUTDOWN_GRACE).await;
        tracing::debug!(?outcome, "codex interrupted");
        self.apply(mapper.on_interrupt(), turn).await?;
        Ok(EndReason::Interrupted)
    }

    /// Streams the turn's `session_end` (with this turn's usage, also added to the
    /// session's totals) as the last thing the turn does.
    async fn end_turn(&mut self, end: SessionEnd, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        if let Some(usage) = &end.usage {
            self.totals.add(usage);
        }
        let reason = end.reason;
        emit(turn, BlockKind::SessionEnd(end)).await?;
        Ok(reason)
    }

    /// Carries out the mapper's actions in order, except the turn's end, which is
    /// returned: it is streamed by [`end_turn`](Self::end_turn) only once codex has
    /// exited, because `session_end` tells the bridge the session is idle again (it may
    /// call `get_usage` or send the next message at once, and the next turn must not
    /// resume the thread while this process still holds it).
    async fn apply(&mut self, actions: Vec<Action>, turn: &mut Turn) -> Result<Option<SessionEnd>, AdapterError> {
        let mut ended = None;
        // Notes about diffs that could not be shown, appended to their call's result.
        let mut notes: Vec<(ToolCallId, String)> = Vec::new();
        for action in actions {
            match action {
                Action::Emit(BlockKind::ToolResult(mut result)) => {
                    let mine: Vec<String> =
                        notes.iter().filter(|(id, _)| id == &result.tool_call_id).map(|(_, n)| n.clone()).collect();
                    if !mine.is_empty() {
                        result.output = format!("{}\n{}", result.output, mine.join("\n"));
                    }
                    emit(turn, BlockKind::ToolResult(result)).await?;
                }
                Action::Emit(kind) => emit(turn, kind).await?,
                Action::SessionId(id) => {
                    tracing::info!(thread_id = %id, "codex thread");
                    self.thread_id = Some(id.clone());
                    turn.session().set_agent_session_id(id).await.map_err(AdapterError::agent)?;
                }
                Action::Diff(request) => {
                    let content = read_changed_file(&self.settings.cwd, &request).await;
                    if let Some(note) = content_note(&content) {
                        notes.push((request.tool_call_id.clone(), format!("{}: {note}", request.path)));
                    }
                    emit(turn, diff_block(&request, content)).await?;
                }
                Action::End(end) => ended = Some(end),
            }
        }
        Ok(ended)
    }
}

/// What to tell the user when codex stopped without finishing the turn.
fn exit_detail(status: Option<ExitStatus>, stderr_tail: &str) -> String {
    let (how, quoted) = (describe_exit(status), quote_stderr(stderr_tail));
    if quoted.is_empty() {
        format!("codex exited {how} before finishing the turn")
    } else {
        format!("codex exited {how} before finishing the turn:\n{quoted}")
    }
}

/// Streams one block. A block the SDK refuses as a contract breach is logged and
/// dropped (the mapper should never produce one); a closed bridge ends the turn.
/// `$CODEX_HOME` or `~/.codex`.
fn home() -> Result<PathBuf, AdapterError> {
    handoff::codex_home().ok_or_else(|| AdapterError::agent("neither CODEX_HOME nor HOME is set"))
}

async fn emit(turn: &mut Turn, kind: BlockKind) -> Result<(), AdapterError> {
    match turn.emit(kind).await {
        Ok(()) => Ok(()),
        Err(TurnError::Contract(violation)) => {
            tracing::warn!("dropped a block that would break the turn contract: {violation}");
            Ok(())
        }
        Err(e) => Err(AdapterError::agent(e)),
    }
}

/// Lets codex finish after its last event: reads the rest of stdout (dropped) and
/// waits for it to exit, at most [`EXIT_WAIT`]; if it does not, the SDK's shutdown
/// ladder ends its process group. The exit status when known.
///
/// When codex exits by itself, whatever is left in its process group (a background
/// command it started, or an exited helper its init has not reaped yet) is killed when
/// the [`AgentProcess`] is dropped at the end of the turn, without waiting: the
/// shutdown ladder's sweep would wait for such zombies to be reaped, which delays the
/// turn's end for nothing.
async fn wind_down(process: &mut AgentProcess, lines: &mut LineReceiver) -> Option<ExitStatus> {
    let waited = tokio::time::timeout(EXIT_WAIT, async {
        while lines.recv().await.is_some() {}
        process.wait().await
    })
    .await;
    match waited {
        Ok(Ok(status)) => Some(status),
        Ok(Err(e)) => {
            tracing::warn!("waiting for codex failed: {e}");
            process.shutdown(SHUTDOWN_GRACE).await.status
        }
        Err(_) => {
            tracing::warn!("codex did not exit within {EXIT_WAIT:?} after its output ended; ending it");
            process.shutdown(SHUTDOWN_GRACE).await.status
        }
    }
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
        assert_eq!(exit_detail(Some(status), ""), "codex exited with status 1 before finishing the turn");
        let signalled = ExitStatus::from_raw(9);
        let tail: String = (0..40).map(|i| format!("line {i}\n")).collect();
        let detail = exit_detail(Some(signalled), &tail);
        assert!(detail.starts_with("codex exited on signal 9 before finishing the turn:\nline 28\n"), "{detail}");
        assert!(detail.ends_with("line 39"));
        let anyhow = "WARNING: proceeding\nError: thread/resume failed: no rollout found for thread id x\n\nStack backtrace:\n   0: <unknown>\n  12: main\n             at src/main.rs:3\n";
        assert_eq!(
            exit_detail(Some(status), anyhow),
            "codex exited with status 1 before finishing the turn:\nWARNING: proceeding\nError: thread/resume failed: no rollout found for thread id x"
        );
        let long = "é".repeat(5000);
        assert!(exit_detail(None, &long).len() < STDERR_QUOTE_BYTES + 100);
    }
}
