//! The [`Droid`] adapter: one `droid exec -o stream-json` process per turn.
//!
//! `start` only checks the settings and the CLI (`<binary> --version`); nothing runs
//! between turns. `send` builds the turn's command line ([`crate::command`]), spawns it
//! through the SDK's [`AgentProcess`] (own process group, bounded lines and stderr
//! tail), feeds every stdout line through the pure [`TurnMapper`] and carries out the
//! actions.
//!
//! **The end of a turn.** droid flushes telemetry and cloud sync for about 5 s after its
//! `completion` event (both time out without network). The turn does not wait for that:
//! at `completion` the adapter kills droid's process group (the session is already
//! written; a fork taken right after holds the whole history) and streams `session_end`
//! at once.
//!
//! **Continuing the session.** The next turn runs `droid exec -s <id>`. That loads the
//! session from Factory's cloud: without a login and network droid exits 1 with no
//! output at all. The adapter then says so in an `error` block (code
//! `resume_unavailable`) and runs the same message again as `droid exec --fork <id>`,
//! which copies the session's local history into a new session (a new id, reported),
//! and uses `--fork` for the rest of the session. See docs/adapters/droid.md.
//!
//! **Interrupt.** droid finishes its turn whatever SIGINT or SIGTERM say (observed with
//! 0.225.2), so an interrupt kills the process group at once; the turn ends
//! `interrupted` and the next one continues the session (the message and what was
//! written of the answer are in it).

use std::process::ExitStatus;
use std::time::Duration;

use terminull_adapter_sdk::child::{AgentProcess, LineReceiver, SpawnOptions, describe_exit, quote_stderr};
use terminull_adapter_sdk::prelude::*;
use terminull_adapter_sdk::settings::{binary, require_cli, working_dir};
use terminull_protocol::blocks::ErrorBlock;
use tokio::process::Command;
use tokio::time::{Instant, sleep_until};

use crate::command::{Continue, PermissionMode, Settings, check_effort, check_value, turn_args};
use crate::events::{Event, parse_event};
use crate::handoff::DroidSessions;
use crate::mapping::{Action, TurnMapper, bounded};
use crate::retries::{LogWatch, log_path, retry_of};

/// How often droid's log is read for retries during a turn.
const LOG_POLL: Duration = Duration::from_millis(500);
/// How long to wait, after droid's `completion`, for it to exit and write its log.
const LOG_AT_EXIT_WAIT: Duration = Duration::from_secs(2);

/// How long `<binary> --version` may take at `start`.
const VERSION_TIMEOUT: Duration = Duration::from_secs(20);
/// How long droid may take to print its first line (its `init`, under a second here).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long to wait for a killed or finished droid to be reaped.
const EXIT_WAIT: Duration = Duration::from_secs(5);
/// After droid reported that the exec command failed (`error` from `cli`), how long it
/// may go on printing before the turn ends without waiting for its slow exit.
const FAILED_GRACE: Duration = Duration::from_secs(1);

/// One droid session.
#[derive(Debug)]
pub struct Droid {
    binary: String,
    settings: Settings,
    /// The session the next turn continues, and the usage so far.
    session: Conversation,
    /// False once `-s` failed: later turns continue with `--fork`.
    resume_works: bool,
}

/// How one `droid exec` run ended.
#[derive(Debug)]
enum Run {
    /// The turn ended (its `session_end` was streamed).
    Ended(EndReason),
    /// droid printed nothing and exited (or printed nothing in time): the turn is still
    /// open and nothing was streamed.
    NoOutput {
        /// Exit status and stderr, for the user.
        detail: String,
        /// True when droid said nothing at all (stderr empty too), or timed out: what a
        /// failed `-s` / `--fork` looks like offline.
        silent: bool,
    },
}

impl Adapter for Droid {
    const AGENT_ID: &'static str = "droid";
    const DISPLAY_NAME: &'static str = "Droid";
    const CLI_BINARY: Option<&'static str> = Some("droid");
    const ADAPTER_VERSION: Option<&'static str> = Some(env!("CARGO_PKG_VERSION"));
    const VERIFIED_AGAINST: Option<&'static str> = Some("0.225.2");
    // thinking: `reasoning` events.
    // permissions: `droid exec` never asks; the autonomy level (permission_mode) decides.
    // interrupt: the process group is killed.
    const CAPS: Caps = caps! {
        supported: [thinking, interrupt],
        unsupported: [images, documents, permissions, subagents, input_during_turn, terminal],
    };
    const LEASE: LeaseKind = LeaseKind::PerTurn;
    const INIT_PARAMS: &'static [InitParam] = EVERY_INIT_PARAM;

    const HANDOFF_HOOKS: &'static [HandoffHook] = terminull_adapter_sdk::handoff::PER_TURN_HOOKS;

    type Models = NotProvided;
    type Usage = Provided;

    fn handoff() -> Option<impl Handoff> {
        Some(DroidSessions)
    }

    async fn start(init: StartParams, session: &Session) -> Result<(Self, StartInfo), AdapterError> {
        let mode = PermissionMode::parse(init.permission_mode.as_deref())?;
        if let Some(effort) = &init.effort {
            check_effort(effort)?;
        }
        let model = init.model.filter(|m| !m.trim().is_empty());
        if let Some(model) = &model {
            check_value("model", model)?;
        }
        let session_id = init.resume_session_id.map(|id| id.as_str().to_owned());
        if let Some(id) = &session_id {
            check_value("session id", id)?;
        }
        let cwd = working_dir(init.cwd.as_deref())?;
        let binary = binary(init.binary, "droid");
        let version = require_cli(&binary, "droid", VERSION_TIMEOUT).await?;
        if let Some(id) = &session_id {
            session.set_agent_session_id(id.as_str()).await?;
        }
        tracing::info!(%binary, cwd = %cwd.display(), ?mode, resume = ?session_id, "droid session ready");
        let settings = Settings { cwd, model: model.clone(), effort: init.effort, mode };
        let adapter = Droid { binary, settings, session: Conversation::new("droid", session_id), resume_works: true };
        Ok((adapter, StartInfo { version, model, slash_commands: Vec::new() }))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        if !message.attachments.is_empty() {
            return Err(AdapterError::invalid("droid exec takes no attachments; send text only"));
        }
        let Some(id) = self.session.id().map(str::to_owned) else {
            return self.run_or_fail(Continue::New, &message.text, turn).await;
        };
        if !self.resume_works {
            return self.fork(&id, &message.text, turn).await;
        }
        match self.run(Continue::Resume(&id), &message.text, turn).await? {
            Run::Ended(reason) => Ok(reason),
            Run::NoOutput { detail, silent: true } => {
                tracing::warn!("droid could not resume session {id}: {detail}");
                self.resume_works = false;
                let notice = format!(
                    "droid could not resume session {id}: `droid exec -s` loads a session from Factory's cloud, which \
                     needs a Factory login (run `droid` once and log in, or set FACTORY_API_KEY in the agent's \
                     environment) and network access. Continuing in a local fork of the session instead \
                     (`droid exec --fork`): the conversation keeps its history under a new session id, and later \
                     messages fork it the same way."
                );
                let block = ErrorBlock { message: notice, recoverable: true, code: Some("resume_unavailable".into()) };
                turn.emit_lenient(BlockKind::Error(block)).await?;
                self.fork(&id, &message.text, turn).await
            }
            Run::NoOutput { detail, silent: false } => self.fail(detail, turn).await,
        }
    }
}

impl GetUsage for Droid {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(self.session.totals().clone())
    }
}

impl Droid {
    /// Continues session `id` in a fork; when even that fails, the session is
    /// forgotten and the next message starts a new one.
    async fn fork(&mut self, id: &str, prompt: &str, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        match self.run(Continue::Fork(id), prompt, turn).await? {
            Run::Ended(reason) => Ok(reason),
            Run::NoOutput { detail, .. } => {
                self.session.forget();
                let detail = format!(
                    "droid could not fork session {id} either (is its file still under ~/.factory/sessions?); \
                     the next message starts a new droid session without this conversation's history.\n{detail}"
                );
                self.fail(detail, turn).await
            }
        }
    }

    async fn run_or_fail(
        &mut self,
        how: Continue<'_>,
        prompt: &str,
        turn: &mut Turn,
    ) -> Result<EndReason, AdapterError> {
        match self.run(how, prompt, turn).await? {
            Run::Ended(reason) => Ok(reason),
            Run::NoOutput { detail, .. } => self.fail(detail, turn).await,
        }
    }

    /// Ends a turn in which droid printed nothing: an `error` block and `session_end`
    /// error.
    async fn fail(&mut self, detail: String, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        let mut mapper = TurnMapper::new(mint_id("droid"), self.session.id().map(str::to_owned));
        let actions = mapper.on_exit(&detail);
        Ok(self.apply(actions, turn, None).await?.unwrap_or(EndReason::Error))
    }

    /// One `droid exec` process.
    async fn run(&mut self, how: Continue<'_>, prompt: &str, turn: &mut Turn) -> Result<Run, AdapterError> {
        let (args, on_stdin) = turn_args(&self.settings, how, prompt);
        tracing::debug!(binary = %self.binary, ?how, "starting droid");
        let mut cmd = Command::new(&self.binary);
        cmd.args(&args).current_dir(&self.settings.cwd);
        let (mut process, mut lines) = AgentProcess::spawn(cmd, SpawnOptions::default())
            .map_err(|e| AdapterError::agent(format!("cannot start droid: {e}")))?;
        if on_stdin && let Err(e) = process.write_line(prompt).await {
            tracing::warn!("cannot write the prompt to droid: {e}");
        }
        process.close_stdin();

        let mut mapper = TurnMapper::new(mint_id("droid"), self.session.id().map(str::to_owned));
        // droid tells of its retries only in its log (crate::retries).
        let mut log = std::env::var_os("HOME").map(|home| LogWatch::start(log_path(std::path::Path::new(&home))));
        let mut log_tick = tokio::time::interval(LOG_POLL);
        let startup_deadline = Instant::now() + STARTUP_TIMEOUT;
        let mut failed_deadline: Option<Instant> = None;
        loop {
            if failed_deadline.is_none() && mapper.failed() {
                failed_deadline = Some(Instant::now() + FAILED_GRACE);
            }
            let failed_at = failed_deadline.unwrap_or(startup_deadline);
            let next = tokio::select! {
                biased;
                () = turn.interrupted() => Next::Interrupt,
                () = sleep_until(startup_deadline), if !mapper.started() => Next::StartupTimedOut,
                () = sleep_until(failed_at), if failed_deadline.is_some() => Next::Failed,
                _ = log_tick.tick(), if log.is_some() && !mapper.ended() => Next::LogTick,
                line = lines.recv() => match line {
                    Some(Ok(value)) => Next::Line(value),
                    Some(Err(bad)) => {
                        tracing::warn!("skipping a line of droid output: {bad}");
                        continue;
                    }
                    None => Next::Closed,
                },
            };
            let actions = match next {
                Next::Interrupt => {
                    tracing::info!(pid = process.pid(), "interrupting droid: killing its process group");
                    end_process(&mut process).await;
                    mapper.on_interrupted()
                }
                Next::StartupTimedOut => {
                    tracing::warn!("droid printed nothing within {STARTUP_TIMEOUT:?}; killing it");
                    end_process(&mut process).await;
                    let detail = format!(
                        "droid printed nothing within {} s{}",
                        STARTUP_TIMEOUT.as_secs(),
                        match quote_stderr(&process.stderr_tail()) {
                            quoted if quoted.is_empty() => quoted,
                            quoted => format!(":\n{quoted}"),
                        }
                    );
                    return Ok(Run::NoOutput { detail, silent: true });
                }
                Next::LogTick => log.as_mut().map(|log| retries_in_log(log, &mut mapper)).unwrap_or_default(),
                Next::Failed => {
                    tracing::debug!("droid reported its failure; not waiting for its exit");
                    end_process(&mut process).await;
                    mapper.on_exit("droid failed")
                }
                Next::Line(value) => match parse_event(value) {
                    Ok(event @ Event::Completion { .. }) => {
                        // droid writes its log when it exits, right after `completion`
                        // (a short turn's retries are in no earlier write): read it then,
                        // so that they are told before the turn ends.
                        let mut actions = Vec::new();
                        if let Some(log) = log.as_mut() {
                            let _ = tokio::time::timeout(LOG_AT_EXIT_WAIT, process.wait()).await;
                            actions = retries_in_log(log, &mut mapper);
                        }
                        actions.extend(mapper.on_event(event));
                        actions
                    }
                    Ok(event) => mapper.on_event(event),
                    Err(e) => {
                        tracing::warn!("skipping a droid event: {e}");
                        continue;
                    }
                },
                Next::Closed => {
                    let status = wait_exit(&mut process, &mut lines).await;
                    let stderr = process.stderr_tail();
                    let detail = exit_detail(status, &stderr);
                    if !mapper.started() {
                        return Ok(Run::NoOutput { detail, silent: stderr.trim().is_empty() });
                    }
                    tracing::warn!("{detail}");
                    mapper.on_exit(&detail)
                }
            };
            if let Some(reason) = self.apply(actions, turn, Some(&mut process)).await? {
                return Ok(Run::Ended(reason));
            }
        }
    }

    /// Carries out the mapper's actions in order; the end reason once the turn ended.
    /// Before `session_end` the process (when still there) is ended: its slow exit is
    /// not waited for.
    async fn apply(
        &mut self,
        actions: Vec<Action>,
        turn: &mut Turn,
        process: Option<&mut AgentProcess>,
    ) -> Result<Option<EndReason>, AdapterError> {
        let Some(end) = self.session.apply(actions, turn).await? else { return Ok(None) };
        if let Some(process) = process {
            end_process(process).await;
        }
        self.session.end_turn(end, turn).await.map(Some)
    }
}

/// What the turn's reading loop does next.
enum Next {
    Interrupt,
    LogTick,
    StartupTimedOut,
    Failed,
    Line(serde_json::Value),
    Closed,
}

/// The retry notices of what droid's log gained (crate::retries).
fn retries_in_log(log: &mut LogWatch, mapper: &mut TurnMapper) -> Vec<Action> {
    let session = mapper.session_id().map(str::to_owned);
    let retries: Vec<_> = log.poll().iter().filter_map(|line| retry_of(line, session.as_deref())).collect();
    retries.into_iter().flat_map(|(attempt, why)| mapper.on_retry(attempt, &why)).collect()
}

/// Kills droid's whole process group (droid ignores SIGINT and SIGTERM mid-turn, and
/// after `completion` it only flushes telemetry) and reaps it, bounded.
async fn end_process(process: &mut AgentProcess) {
    if let Ok(Some(status)) = process.try_wait() {
        // Whatever it left in its group is killed when the process handle is dropped.
        tracing::debug!(?status, "droid already exited");
        return;
    }
    if let Err(e) = process.kill_group() {
        tracing::warn!("cannot kill droid: {e}");
    }
    match tokio::time::timeout(EXIT_WAIT, process.wait()).await {
        Ok(Ok(status)) => tracing::debug!(?status, "droid ended"),
        Ok(Err(e)) => tracing::warn!("waiting for droid failed: {e}"),
        Err(_) => tracing::warn!("droid was not reaped within {EXIT_WAIT:?} of SIGKILL"),
    }
}

/// Waits, bounded, for droid to exit once its stdout closed; its status when known.
async fn wait_exit(process: &mut AgentProcess, lines: &mut LineReceiver) -> Option<ExitStatus> {
    let waited = tokio::time::timeout(EXIT_WAIT, async {
        while lines.recv().await.is_some() {}
        process.wait().await
    })
    .await;
    match waited {
        Ok(Ok(status)) => Some(status),
        Ok(Err(e)) => {
            tracing::warn!("waiting for droid failed: {e}");
            None
        }
        Err(_) => {
            end_process(process).await;
            process.try_wait().ok().flatten()
        }
    }
}

/// What to tell the user when droid stopped without finishing the turn.
fn exit_detail(status: Option<ExitStatus>, stderr_tail: &str) -> String {
    let (how, quoted) = (describe_exit(status), quote_stderr(stderr_tail));
    let detail = if quoted.is_empty() {
        format!("droid exited {how} without finishing the turn (it printed nothing on stderr)")
    } else {
        format!("droid exited {how} without finishing the turn:\n{quoted}")
    };
    bounded(&detail, 4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use terminull_adapter_sdk::child::STDERR_QUOTE_BYTES;

    #[test]
    fn exit_details() {
        let status = ExitStatus::from_raw(1 << 8);
        assert_eq!(
            exit_detail(Some(status), ""),
            "droid exited with status 1 without finishing the turn (it printed nothing on stderr)"
        );
        let tail = "Invalid model: custom:nope\n\nAvailable custom models:\n  custom:Mock-Claude-0 (Mock Claude)\n";
        assert_eq!(
            exit_detail(Some(status), tail),
            "droid exited with status 1 without finishing the turn:\nInvalid model: custom:nope\nAvailable custom models:\n  custom:Mock-Claude-0 (Mock Claude)"
        );
        let killed = ExitStatus::from_raw(9);
        assert!(exit_detail(Some(killed), "").starts_with("droid exited on signal 9"));
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let detail = exit_detail(None, &long);
        assert!(
            detail.contains("(exit status unknown)") && detail.contains("line 88\n") && detail.ends_with("line 99")
        );
        assert!(exit_detail(None, &"é".repeat(5000)).len() < STDERR_QUOTE_BYTES + 200);
    }
}
