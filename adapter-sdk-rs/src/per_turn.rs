//! The turn of an adapter that runs one agent process per turn (codex, cursor): read
//! the process's stdout lines, map them to [`Action`]s, carry those out, and end the
//! process when the turn ends or is interrupted.
//!
//! The adapter keeps what is its own: the command line, the mapper (a pure state
//! machine, [`EventMapper`]), what to say when the process exits early. [`TurnProcess`]
//! is the loop between them:
//!
//! - a line that is not JSON, or not an event the mapper knows, is logged and skipped;
//! - an interrupt sends SIGINT to the process group (the agent's Ctrl-C), gives the
//!   agent `interrupt_grace` to exit, then the [`AgentProcess::shutdown`] ladder; the
//!   mapper closes what it left open and the turn ends `interrupted`;
//! - at the mapper's `session_end`, the agent gets `exit_wait` to exit before the
//!   ladder ends it, and only then is `session_end` streamed: it tells the bridge the
//!   session is idle again, and the next turn must not continue the conversation while
//!   this process still holds it.

use std::fmt::Display;
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::Value;
use terminull_protocol::blocks::EndReason;

use crate::action::{Action, Conversation};
use crate::adapter::AdapterError;
use crate::child::{AgentProcess, LineReceiver, describe_exit, quote_stderr};
use crate::session::Turn;

/// The pure part of a per-turn adapter: the agent's events in, actions out.
pub trait EventMapper {
    /// One parsed stdout line.
    type Event;
    /// The agent's own kind of action ([`Action::Agent`]).
    type Step;
    /// The actions one event asks for.
    fn on_event(&mut self, event: Self::Event) -> Vec<Action<Self::Step>>;
    /// Closes what the turn left open when the user interrupted it. A `session_end`
    /// among these is not streamed: the SDK ends an interrupted turn itself.
    fn on_interrupt(&mut self) -> Vec<Action<Self::Step>>;
}

/// How a driven turn came out.
#[derive(Debug)]
pub enum Driven {
    /// The turn ended (its `session_end` was streamed, or it was interrupted).
    Ended(EndReason),
    /// stdout closed before the agent ended the turn; the process has exited (or was
    /// ended), with this status when known. The adapter says why and ends the turn.
    Closed(Option<ExitStatus>),
}

/// The timings of one agent's per-turn process and its name in the logs.
#[derive(Debug, Clone, Copy)]
pub struct TurnProcess {
    /// The agent's name, as the logs and messages call it (`codex`, `cursor-agent`).
    pub agent: &'static str,
    /// After SIGINT, how long the agent gets to exit on its own.
    pub interrupt_grace: Duration,
    /// After the turn's last event (or end of stdout), how long the agent gets to exit.
    pub exit_wait: Duration,
    /// Each step of the shutdown ladder (close stdin, SIGTERM, SIGKILL).
    pub shutdown_grace: Duration,
}

impl TurnProcess {
    /// Runs the turn's read loop until the turn ends or stdout closes. `parse` turns a
    /// line into the mapper's event; `resolve` turns the mapper's own steps into plain
    /// actions (`async |actions| actions` when it has none).
    #[allow(clippy::too_many_arguments)]
    pub async fn drive<M: EventMapper, E: Display>(
        &self,
        process: &mut AgentProcess,
        lines: &mut LineReceiver,
        turn: &mut Turn,
        conversation: &mut Conversation,
        mapper: &mut M,
        parse: impl Fn(Value) -> Result<M::Event, E>,
        mut resolve: impl AsyncFnMut(Vec<Action<M::Step>>) -> Vec<Action>,
    ) -> Result<Driven, AdapterError> {
        loop {
            let next = tokio::select! {
                () = turn.interrupted() => None,
                line = lines.recv() => Some(line),
            };
            let Some(line) = next else {
                tracing::info!(pid = process.pid(), "interrupting {}", self.agent);
                let outcome = process.interrupt_and_end(lines, self.interrupt_grace, self.shutdown_grace).await;
                tracing::debug!(?outcome, "{} interrupted", self.agent);
                conversation.apply(resolve(mapper.on_interrupt()).await, turn).await?;
                return Ok(Driven::Ended(EndReason::Interrupted));
            };
            let value = match line {
                Some(Ok(value)) => value,
                Some(Err(bad)) => {
                    tracing::warn!("skipping a line of {} output: {bad}", self.agent);
                    continue;
                }
                None => break,
            };
            let event = match parse(value) {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!("skipping a {} event: {e}", self.agent);
                    continue;
                }
            };
            let actions = resolve(mapper.on_event(event)).await;
            if let Some(end) = conversation.apply(actions, turn).await? {
                let status = self.wind_down(process, lines).await;
                tracing::debug!(?status, reason = ?end.reason, "{} turn ended", self.agent);
                return conversation.end_turn(end, turn).await.map(Driven::Ended);
            }
        }
        Ok(Driven::Closed(self.wind_down(process, lines).await))
    }

    /// Lets the agent finish after its last event: reads the rest of stdout (dropped)
    /// and waits for it to exit, at most `exit_wait`; if it does not, the shutdown
    /// ladder ends its process group. The exit status when known.
    ///
    /// When the agent exits by itself, whatever is left in its process group (a
    /// background command it started, or an exited helper not reaped yet) is killed
    /// when the [`AgentProcess`] is dropped at the end of the turn, without waiting: the
    /// ladder's sweep would wait for such zombies to be reaped, which delays the turn's
    /// end for nothing.
    pub async fn wind_down(&self, process: &mut AgentProcess, lines: &mut LineReceiver) -> Option<ExitStatus> {
        let waited = tokio::time::timeout(self.exit_wait, async {
            while lines.recv().await.is_some() {}
            process.wait().await
        })
        .await;
        match waited {
            Ok(Ok(status)) => Some(status),
            Ok(Err(e)) => {
                tracing::warn!("waiting for {} failed: {e}", self.agent);
                process.shutdown(self.shutdown_grace).await.status
            }
            Err(_) => {
                tracing::warn!(
                    "{} did not exit within {:?} after its output ended; ending it",
                    self.agent,
                    self.exit_wait
                );
                process.shutdown(self.shutdown_grace).await.status
            }
        }
    }

    /// What to tell the user when the agent stopped without finishing the turn: how it
    /// exited and the end of its stderr.
    pub fn exit_detail(&self, status: Option<ExitStatus>, stderr_tail: &str) -> String {
        let (how, quoted) = (describe_exit(status), quote_stderr(stderr_tail));
        if quoted.is_empty() {
            format!("{} exited {how} before finishing the turn", self.agent)
        } else {
            format!("{} exited {how} before finishing the turn:\n{quoted}", self.agent)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;
    use crate::child::STDERR_QUOTE_BYTES;

    const PROCESS: TurnProcess = TurnProcess {
        agent: "cursor-agent",
        interrupt_grace: Duration::from_secs(3),
        exit_wait: Duration::from_secs(3),
        shutdown_grace: Duration::from_secs(2),
    };

    #[test]
    fn exit_detail_says_how_the_agent_exited_and_quotes_the_end_of_its_stderr() {
        let status = ExitStatus::from_raw(1 << 8);
        assert_eq!(
            PROCESS.exit_detail(Some(status), ""),
            "cursor-agent exited with status 1 before finishing the turn"
        );
        let signalled = ExitStatus::from_raw(9);
        let tail: String = (0..40).map(|i| format!("line {i}\n\n")).collect();
        let detail = PROCESS.exit_detail(Some(signalled), &tail);
        assert!(
            detail.starts_with("cursor-agent exited on signal 9 before finishing the turn:\nline 28\n"),
            "{detail}"
        );
        assert!(detail.ends_with("line 39"));
        let long = "é".repeat(5000);
        assert!(PROCESS.exit_detail(None, &long).len() < STDERR_QUOTE_BYTES + 100);
    }
}
