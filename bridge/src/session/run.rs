//! Starting a session actor and its loop: one command, adapter event, liveness deadline
//! or parked poll at a time, with the pending work saved after each.

use std::collections::VecDeque;

use terminull_protocol::blocks::{Block, EndReason};
use terminull_protocol::control::{ReplyError, ReplyErrorCode, SessionState};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

use super::actor::{Actor, SessionSpec, next_event};
use super::compact::compaction_finished;
use super::handle::{Following, HISTORY_PAGE_BYTES, OLDER_HISTORY_CAP, SessionCommand, SessionHandle};
use crate::handoff::PendingWork;
use crate::history::{LogStatus, SessionLog};

/// Blocks buffered for followers before a slow one lags; a lagging follower resumes
/// from history by seq, so nothing is lost. tokio's broadcast channel allocates every
/// slot up front, so this is per-session memory (4096 slots measured ~1 MB per idle
/// session; 256 keep it small while covering a burst of streamed chunks).
const FOLLOWER_BUFFER: usize = 256;

/// Commands queued per session.
const COMMAND_QUEUE: usize = 256;

/// Starts a session actor and returns its handle. With `start_now` the adapter is
/// launched and the session started (appending its `agent_info`) before this returns,
/// and a failure to start is the error; otherwise (a session revived from history)
/// the adapter starts with the first message, so replaying history costs no process.
pub async fn spawn_session(spec: SessionSpec, log: SessionLog, start_now: bool) -> Result<SessionHandle, ReplyError> {
    let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
    let (live, _) = broadcast::channel(FOLLOWER_BUFFER);
    let mut actor = Actor {
        spec,
        log,
        live,
        adapter: None,
        declaration: None,
        state: SessionState::Idle,
        turn: None,
        last_output: Instant::now(),
        pending: PendingWork::default(),
        crashes: VecDeque::new(),
        ever_started: false,
        next_poll: Instant::now(),
        appends: Default::default(),
        compaction: None,
        recent: Default::default(),
    };
    if start_now {
        actor.ensure_adapter().await?;
    } else {
        // Revived after a bridge restart: what it had accepted and not carried out.
        actor.pending = actor.spec.meta.pending.clone();
        // A turn the bridge was stopped in ends now, before anyone follows the session.
        actor.close_interrupted_turn();
        actor.state = SessionState::Detached;
        if actor.pending.parked.is_some() {
            actor.state = SessionState::Parked;
        }
    }
    if actor.spec.attach {
        actor.attach_external().await?;
    }
    let handle = SessionHandle::new(actor.spec.meta.session_id.clone(), actor.spec.meta.agent_id.to_string(), tx);
    tokio::spawn(actor.run(rx));
    Ok(handle)
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<SessionCommand>) {
        self.resume_pending().await;
        loop {
            self.save_pending();
            let watching = matches!(self.state, SessionState::Running);
            let parked = self.pending.parked.is_some();
            let next_poll = self.next_poll;
            let deadline = self.last_output + self.spec.policy.liveness;
            let flush_at = self.appends.flush_at();
            tokio::select! {
                command = rx.recv() => match command {
                    Some(command) => {
                        if self.command(command).await {
                            break;
                        }
                    }
                    None => {
                        // Every handle is gone (bridge shutdown): let the adapter go.
                        self.shutdown_adapter(true).await;
                        break;
                    }
                },
                event = next_event(&mut self.adapter) => self.event(event).await,
                () = tokio::time::sleep_until(deadline), if watching => self.hung().await,
                () = sleep_until_some(flush_at), if flush_at.is_some() => self.flush_appends(),
                done = compaction_finished(&mut self.compaction), if self.compaction.is_some() => self.compaction_done(done),
                () = tokio::time::sleep_until(next_poll), if parked => {
                    self.poll_parked().await;
                    // From the end of this poll: a slow hook does not stack polls up.
                    self.next_poll = Instant::now() + self.spec.policy.handoff_poll;
                }
            }
        }
    }

    /// Handles one command; true when the session is over.
    async fn command(&mut self, command: SessionCommand) -> bool {
        // What a command reads (history for a follower, the last seq) includes the text
        // held back for joining.
        self.flush_appends();
        match command {
            SessionCommand::UserMessage(message, reply) => {
                let result = self.user_message(message).await;
                let _ = reply.send(result);
            }
            SessionCommand::Interrupt(reply) => {
                let result = self.interrupt().await;
                let _ = reply.send(result);
            }
            SessionCommand::PermissionResponse(id, option, reply) => {
                let result = self.permission_response(id, option).await;
                let _ = reply.send(result);
            }
            SessionCommand::GetUsage(reply) => {
                let result = self.usage().await;
                let _ = reply.send(result);
            }
            SessionCommand::Follow { since_seq, since_ts, reply } => {
                // A resume by seq is read a page at a time (the follower asks for the
                // rest); one by time keeps its whole read, since its blocks are chosen by
                // `ts`, which need not rise with `seq`.
                let (backlog, more) = match (since_seq, since_ts) {
                    (None, Some(ts)) => (self.log.read_since_ts(ts), None),
                    (seq, _) => match self.log.read_page(seq.unwrap_or(0), HISTORY_PAGE_BYTES) {
                        Ok(page) => (Ok(page.blocks), page.more),
                        Err(e) => (Err(e), None),
                    },
                };
                // The spec's lifecycle (§1.4): an app resuming by time gets the older
                // history too, after replay_done; a resume by seq is exact and gets none.
                let history = match (since_seq, since_ts, &backlog) {
                    (None, Some(_), Ok(backlog)) => {
                        let first = backlog.first().and_then(|b| b.seq).unwrap_or(u64::MAX);
                        // Compacted below the first live block only, so that a message the
                        // live part continues (as an append) arrives here from its start.
                        let mut older: Vec<Block> = self.log.read_before_seq(first).unwrap_or_default();
                        let skip = older.len().saturating_sub(OLDER_HISTORY_CAP);
                        older.drain(..skip);
                        older
                    }
                    _ => Vec::new(),
                };
                // A resume by time read the log twice; the last read is not the backlog's.
                if let Ok(backlog) = &backlog
                    && (since_seq.is_some() || since_ts.is_none())
                {
                    self.maybe_compact(backlog.len());
                }
                let result = backlog
                    .map(|backlog| Following { backlog, more, history, live: self.live.subscribe() })
                    .map_err(|e| ReplyError { code: ReplyErrorCode::Internal, message: e.to_string() });
                let _ = reply.send(result);
            }
            SessionCommand::ReadPage { after, reply } => {
                let page = self
                    .log
                    .read_page(after, HISTORY_PAGE_BYTES)
                    .map_err(|e| ReplyError { code: ReplyErrorCode::Internal, message: e.to_string() });
                let _ = reply.send(page);
            }
            SessionCommand::Listing(reply) => {
                let _ = reply.send(self.listing());
            }
            SessionCommand::EditMeta(edit, reply) => {
                self.edit_meta(&edit);
                let _ = reply.send(());
            }
            SessionCommand::Detach(reply) => {
                if self.turn.is_some() {
                    self.end_turn(EndReason::Stopped, Some("the bridge is shutting down"));
                }
                self.shutdown_adapter(true).await;
                if let Err(e) = self.log.sync() {
                    tracing::warn!(session = %self.spec.meta.session_id, "cannot sync history: {e}");
                }
                let _ = reply.send(());
                return true;
            }
            SessionCommand::SetOptions(options, reply) => {
                let result = self.set_options(options).await;
                let _ = reply.send(result);
            }
            SessionCommand::ContinueInTerminal(reply) => {
                let result = self.continue_in_terminal().await;
                let _ = reply.send(result);
            }
            SessionCommand::Stop(reply) => {
                if self.turn.is_some() {
                    self.end_turn(EndReason::Stopped, None);
                }
                self.shutdown_adapter(true).await;
                self.state = SessionState::Stopped;
                self.spec.meta.status = LogStatus::Stopped;
                self.save_meta();
                let _ = reply.send(Ok(()));
                return true;
            }
        }
        false
    }
}

/// Sleeps until `at`; never wakes when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
