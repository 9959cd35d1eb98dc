//! `terminull chat` and `terminull attach`: a terminal conversation with an agent
//! through the bridge, and the scriptable form (`-p PROMPT --json`).
//!
//! Text mode renders streaming text in place (each chunk prints only what is new),
//! tool calls with their status, diffs, plans and errors; a permission request is
//! answered with y/n on the next input line; Ctrl-C interrupts the running turn and a
//! second Ctrl-C leaves. JSON mode prints every block the client receives as one
//! NDJSON line, as it came on the wire (a streamed append stays an append, with its
//! `offset`, so a script sees what a device sees and rebuilds the text itself), and
//! answers permission requests from a flag.
//!
//! Text mode rebuilds streamed text from snapshots and appends with the client's
//! [`Transcript`]: an append prints its new piece, a snapshot that extends what was
//! printed prints the rest, and one that rewrites it prints the whole text again. A
//! piece that does not fit (a gap) prints nothing and resumes the session from before
//! that message, whose replay the transcript takes idempotently.

use std::collections::{HashMap, VecDeque};
use std::io::Write;

use terminull_client::transcript::{Applied, Transcript};
use terminull_protocol::blocks::{
    Block, BlockKind, EndReason, PermissionOptionKind, PermissionRequest, PlanStatus, ToolStatus,
};
use terminull_protocol::commands::is_universal;
use terminull_protocol::control::{
    self as control, BridgeMessage, ControlMessage, ReplyResult, SessionRequest, SessionResume,
};
use terminull_protocol::ids::SessionId;
use tokio::io::AsyncBufReadExt;

use crate::daemon_client::{Client, ClientError};

/// How to answer permission requests without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PermissionAnswer {
    /// Choose the first "allow" option.
    Allow,
    /// Choose the first "reject" option.
    Deny,
}

/// What `terminull chat` was asked to do.
#[derive(Debug, Clone)]
pub struct ChatOptions {
    /// The agent.
    pub agent: String,
    /// Working directory of the session.
    pub cwd: String,
    /// Model, when chosen.
    pub model: Option<String>,
    /// Permission mode, when chosen (agent-specific).
    pub permission_mode: Option<String>,
    /// One prompt, then exit when the turn ends (the scriptable form).
    pub prompt: Option<String>,
    /// Print blocks as NDJSON instead of rendering them.
    pub json: bool,
    /// Answer permission requests automatically.
    pub permission: Option<PermissionAnswer>,
}

/// Renders blocks for a person, printing only what is new in streamed text.
#[derive(Debug, Default)]
pub struct Renderer {
    /// The session as received: streamed text rebuilt, repeats by `seq` dropped.
    transcript: Transcript,
    /// Text printed so far per streamed id.
    printed: HashMap<String, String>,
    /// The id whose text was printed last (to know whether a newline is due).
    open_line: Option<String>,
    /// Where to resume the session from to repair a gap, once asked.
    resume: Option<u64>,
}

impl Renderer {
    /// The text to print for `block`.
    pub fn render(&mut self, block: &Block) -> String {
        let mut out = String::new();
        match self.transcript.apply(block.clone()) {
            Applied::Duplicate => return out,
            Applied::Gap { since_seq } => {
                self.resume = Some(self.resume.map_or(since_seq, |held| held.min(since_seq)));
                return out;
            }
            Applied::Added | Applied::Rebuilt => {}
        }
        match &block.kind {
            BlockKind::Text(t) | BlockKind::Thinking(t) => {
                let Some(message) = self.transcript.message(block) else { return out };
                let (text, done) = (message.text(), message.is_done());
                let key = format!("{}:{}", block.block_type(), t.id);
                let before = self.printed.get(&key).map(String::as_str).unwrap_or_default();
                if before == text && !(done && self.open_line.as_deref() == Some(key.as_str())) {
                    return out;
                }
                if self.open_line.as_deref() != Some(key.as_str()) {
                    close_line(&mut self.open_line, &mut out);
                    if matches!(block.kind, BlockKind::Thinking(_)) {
                        out.push_str("(thinking) ");
                    }
                }
                if let Some(rest) = text.strip_prefix(before) {
                    out.push_str(rest);
                } else {
                    // Not an extension of what was shown: show the whole text again.
                    out.push_str(&format!("\n{text}"));
                }
                self.printed.insert(key.clone(), text.to_owned());
                self.open_line = Some(key);
                if done {
                    close_line(&mut self.open_line, &mut out);
                }
            }
            other => {
                close_line(&mut self.open_line, &mut out);
                if let Some(line) = describe(other) {
                    out.push_str(&line);
                    out.push('\n');
                }
            }
        }
        out
    }

    /// The `seq` to resume the session from when a streamed message met a gap since
    /// the last call (a piece of it missing); `None` otherwise.
    pub fn take_resume(&mut self) -> Option<u64> {
        self.resume.take()
    }
}

/// Ends the streamed line that is open, if any.
fn close_line(open_line: &mut Option<String>, out: &mut String) {
    if open_line.take().is_some() {
        out.push('\n');
    }
}

fn describe(kind: &BlockKind) -> Option<String> {
    Some(match kind {
        BlockKind::AgentInfo(a) => format!(
            "── {} {}{} ──",
            a.name,
            a.version.as_deref().unwrap_or(""),
            a.model.as_deref().map(|m| format!(" · {m}")).unwrap_or_default()
        ),
        BlockKind::UserMessage(m) => format!("> {}", m.text),
        BlockKind::ToolCall(c) => {
            let status = match c.status {
                ToolStatus::Running => "running",
                ToolStatus::Done => "done",
                ToolStatus::Error => "error",
            };
            format!("⚙ {} {} [{status}]", c.title.as_deref().unwrap_or(&c.name), c.input)
        }
        BlockKind::ToolResult(r) => {
            let first = r.output.lines().next().unwrap_or("");
            format!("  ↳ {}{}", if r.is_error { "error: " } else { "" }, first)
        }
        BlockKind::PermissionRequest(p) => format!("? {} wants to run with {} — allow? [y/N]", p.tool, p.input),
        BlockKind::Plan(p) => p
            .entries
            .iter()
            .map(|e| {
                let mark = match e.status {
                    PlanStatus::Pending => " ",
                    PlanStatus::InProgress => "~",
                    PlanStatus::Completed => "x",
                };
                format!("  [{mark}] {}", e.content)
            })
            .collect::<Vec<_>>()
            .join("\n"),
        BlockKind::Diff(d) => format!("± {}", d.path),
        BlockKind::Progress(p) => format!("… {}", p.message),
        BlockKind::BgTask(t) => format!("⧗ {}", t.title),
        BlockKind::Error(e) => format!("error: {}", e.message),
        BlockKind::SessionSummary(s) => format!("── {} ──", s.title.as_deref().unwrap_or("summary")),
        BlockKind::SessionState(s) => {
            let mut line = format!(
                "── {} ──",
                s.message.as_deref().unwrap_or(match s.state {
                    terminull_protocol::blocks::Ownership::Parked => "parked: a terminal drives this session",
                    terminull_protocol::blocks::Ownership::Live => "live",
                })
            );
            if let Some(argv) = &s.resume_command {
                line.push_str(&format!("\n   continue in a terminal: {}", argv.join(" ")));
            }
            line
        }
        BlockKind::SessionEnd(e) => match e.reason {
            EndReason::Completed => return None,
            other => format!("── turn ended: {other:?} ──").to_lowercase(),
        },
        BlockKind::Text(_) | BlockKind::Thinking(_) => return None,
    })
}

/// The option id that answers `request` as `answer`.
pub fn choose(request: &PermissionRequest, answer: PermissionAnswer) -> Option<String> {
    let wanted: &[PermissionOptionKind] = match answer {
        PermissionAnswer::Allow => &[PermissionOptionKind::AllowOnce, PermissionOptionKind::AllowAlways],
        PermissionAnswer::Deny => &[PermissionOptionKind::RejectOnce, PermissionOptionKind::RejectAlways],
    };
    wanted.iter().find_map(|k| request.options.iter().find(|o| o.kind == *k)).map(|o| o.id.clone())
}

fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Runs a chat; the exit status is 0 only when the (last) turn completed.
pub async fn chat(client: &mut Client, opts: &ChatOptions) -> Result<bool, ClientError> {
    let mut kept = Vec::new();
    let request = ControlMessage::SessionRequest(SessionRequest {
        model: opts.model.clone(),
        permission_mode: opts.permission_mode.clone(),
        ..SessionRequest::new(opts.agent.as_str(), opts.cwd.clone())
    });
    let ReplyResult::SessionStarted { session_id } = client.call(request, &mut kept).await? else {
        return Err(ClientError::Closed);
    };
    eprintln_note(&format!("session {session_id}"));
    converse(client, &session_id, kept, opts.prompt.clone(), opts.json, opts.permission).await
}

/// Attaches to an existing session, replaying its history first.
pub async fn attach(client: &mut Client, session: &str, json: bool) -> Result<bool, ClientError> {
    let mut kept = Vec::new();
    client.call(resume_from(&SessionId(session.to_owned()), 0), &mut kept).await?;
    converse(client, &SessionId(session.to_owned()), kept, None, json, None).await
}

/// `--json`'s line for `block`: the block as it came on the wire (an append keeps its
/// `offset`), one NDJSON line.
fn json_line(block: &Block) -> String {
    format!("{}\n", serde_json::to_string(block).unwrap_or_default())
}

/// `session_resume` of `session` from `since_seq` (0: its whole history).
fn resume_from(session: &SessionId, since_seq: u64) -> ControlMessage {
    ControlMessage::SessionResume(SessionResume {
        session_id: session.clone(),
        since_seq: Some(since_seq),
        since_ts: None,
        app_pubkey: String::new(),
    })
}

fn eprintln_note(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{text}");
}

async fn converse(
    client: &mut Client,
    session: &SessionId,
    kept: Vec<BridgeMessage>,
    prompt: Option<String>,
    json: bool,
    auto: Option<PermissionAnswer>,
) -> Result<bool, ClientError> {
    let mut renderer = Renderer::default();
    let mut pending: VecDeque<BridgeMessage> = kept.into();
    let mut replaying = true;
    let scripted = prompt.is_some();
    let mut waiting_permission: Option<PermissionRequest> = None;
    let mut in_turn = false;
    let mut last_ok = true;
    let mut interrupts = 0u32;
    if let Some(text) = prompt.clone() {
        send_user(client, session, text).await?;
        in_turn = true;
    }
    let mut input = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut input_open = !scripted;
    loop {
        let message = match pending.pop_front() {
            Some(m) => m,
            None => tokio::select! {
                m = client.next() => match m { Some(m) => m, None => return Err(ClientError::Closed) },
                line = input.next_line(), if input_open => {
                    match line {
                        Ok(Some(line)) => {
                            interrupts = 0;
                            if let Some(request) = waiting_permission.take() {
                                let answer = if line.trim().eq_ignore_ascii_case("y") { PermissionAnswer::Allow } else { PermissionAnswer::Deny };
                                answer_permission(client, session, &request, answer).await?;
                            } else if let Some(command) = line.trim().strip_prefix('/') {
                                // Slash commands go to the bridge, which runs its own or passes the agent's on.
                                let (name, args) = command.split_once(' ').unwrap_or((command, ""));
                                let message = ControlMessage::SlashCommand(control::SlashCommand {
                                    session_id: session.clone(),
                                    command: name.to_owned(),
                                    args: args.trim().to_owned(),
                                });
                                let mut kept = Vec::new();
                                match client.call(message, &mut kept).await {
                                    Ok(ReplyResult::CommandOutput { text }) => out(&format!("{text}\n")),
                                    Ok(_) => in_turn = !is_universal(name),
                                    Err(e) => eprintln_note(&format!("/{name}: {e}")),
                                }
                                pending.extend(kept);
                            } else if !line.trim().is_empty() {
                                send_user(client, session, line).await?;
                                in_turn = true;
                            }
                        }
                        _ => {
                            input_open = false;
                            // Input ended: leave once the history is shown and no turn runs.
                            if !in_turn && !replaying {
                                return Ok(last_ok);
                            }
                        }
                    }
                    continue;
                }
                _ = tokio::signal::ctrl_c() => {
                    interrupts += 1;
                    if interrupts >= 2 || !in_turn {
                        return Ok(last_ok);
                    }
                    eprintln_note("interrupting (Ctrl-C again to leave)");
                    let mut kept = Vec::new();
                    let interrupt = ControlMessage::Interrupt(control::Interrupt { session_id: session.clone() });
                    if let Err(e) = client.call(interrupt, &mut kept).await {
                        eprintln_note(&format!("cannot interrupt: {e}"));
                    }
                    pending.extend(kept);
                    continue;
                }
            },
        };
        let block = match message {
            BridgeMessage::Block { block, session_id, .. } if &session_id == session => block,
            BridgeMessage::ReplayDone { .. } => {
                replaying = false;
                if !scripted && !input_open && !in_turn {
                    return Ok(last_ok);
                }
                continue;
            }
            BridgeMessage::Reply(r) => {
                if let control::ReplyOutcome::Error { error } = r.outcome {
                    eprintln_note(&format!("error: {}", error.message));
                }
                continue;
            }
            _ => continue,
        };
        if json {
            out(&json_line(&block));
        } else {
            out(&renderer.render(&block));
            if let Some(since_seq) = renderer.take_resume() {
                // A piece of a message went missing: fetch the session again from before it.
                client.send(resume_from(session, since_seq)).await?;
            }
        }
        if replaying {
            continue;
        }
        match &block.kind {
            BlockKind::PermissionRequest(request) => match auto {
                Some(answer) => answer_permission(client, session, request, answer).await?,
                None if scripted => answer_permission(client, session, request, PermissionAnswer::Deny).await?,
                None => waiting_permission = Some(request.clone()),
            },
            BlockKind::SessionEnd(end) => {
                in_turn = false;
                last_ok = end.reason == EndReason::Completed;
                if scripted || !input_open {
                    return Ok(last_ok);
                }
            }
            _ => {}
        }
    }
}

async fn send_user(client: &mut Client, session: &SessionId, text: String) -> Result<(), ClientError> {
    let message = ControlMessage::UserMessage(control::UserMessage {
        session_id: session.clone(),
        text,
        attachments: Vec::new(),
    });
    client.send(message).await.map(drop)
}

async fn answer_permission(
    client: &mut Client,
    session: &SessionId,
    request: &PermissionRequest,
    answer: PermissionAnswer,
) -> Result<(), ClientError> {
    let Some(option_id) = choose(request, answer) else {
        eprintln_note(&format!("no {answer:?} option offered for {}", request.tool));
        return Ok(());
    };
    let message = ControlMessage::PermissionResponse(control::PermissionResponse {
        session_id: session.clone(),
        request_id: request.request_id.clone(),
        option_id,
    });
    client.send(message).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use terminull_protocol::blocks::{PermissionOption, StreamedText};

    fn text(id: &str, t: &str, done: bool) -> Block {
        Block::now(BlockKind::Text(StreamedText::snapshot(id, t, done)))
    }

    #[test]
    fn streamed_text_prints_only_what_is_new_and_ends_the_line_once() {
        let mut r = Renderer::default();
        let printed: String = [text("m", "Hel", false), text("m", "Hello", false), text("m", "Hello!", true)]
            .iter()
            .map(|b| r.render(b))
            .collect();
        assert_eq!(printed, "Hello!\n");
    }

    #[test]
    fn a_chunk_that_rewrites_the_text_is_shown_whole() {
        let mut r = Renderer::default();
        let printed: String = [text("m", "abc", false), text("m", "xyz", true)].iter().map(|b| r.render(b)).collect();
        assert_eq!(printed, "abc\nxyz\n");
    }

    fn chunk(seq: u64, chunk: StreamedText) -> Block {
        Block { seq: Some(seq), ..Block::now(BlockKind::Text(chunk)) }
    }

    fn render_all(r: &mut Renderer, blocks: &[Block]) -> String {
        blocks.iter().map(|b| r.render(b)).collect()
    }

    #[test]
    fn streamed_text_prints_each_new_piece_once() {
        let append = |seq, offset, t: &str, done| chunk(seq, StreamedText::append("m", offset, t, done));
        let snapshot = |seq, t: &str, done| chunk(seq, StreamedText::snapshot("m", t, done));
        let cases: Vec<(&str, Vec<Block>, &str)> = vec![
            (
                "appends in order",
                vec![append(1, 0, "Hé", false), append(2, 3, "llo 😀", false), append(3, 11, "", true)],
                "Héllo 😀\n",
            ),
            (
                "a repeated seq prints nothing",
                vec![append(1, 0, "ab", false), append(1, 0, "ab", false), append(2, 2, "c", true)],
                "abc\n",
            ),
            (
                "a snapshot extending what was printed prints the rest",
                vec![append(1, 0, "ab", false), snapshot(2, "abcd", true)],
                "abcd\n",
            ),
            (
                "a snapshot rewriting it prints the whole text again",
                vec![append(1, 0, "ab", false), snapshot(2, "xy", true)],
                "ab\nxy\n",
            ),
            (
                "a gap prints nothing until the replay's snapshot",
                vec![append(1, 0, "ab", false), append(3, 4, "ef", false), snapshot(3, "abcdef", true)],
                "abcdef\n",
            ),
            (
                "snapshot-only streams as before",
                vec![snapshot(1, "Hel", false), snapshot(2, "Hello", false), snapshot(3, "Hello!", true)],
                "Hello!\n",
            ),
        ];
        for (name, blocks, expected) in cases {
            let mut r = Renderer::default();
            assert_eq!(render_all(&mut r, &blocks), expected, "{name}");
        }
    }

    #[test]
    fn json_mode_prints_appends_as_they_came() {
        let line = json_line(&chunk(7, StreamedText::append("m", 3, "lo", false)));
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (value["offset"].as_u64(), value["text"].as_str(), value["seq"].as_u64()),
            (Some(3), Some("lo"), Some(7))
        );
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let snapshot: serde_json::Value =
            serde_json::from_str(&json_line(&chunk(8, StreamedText::snapshot("m", "hello", true)))).unwrap();
        assert!(snapshot.get("offset").is_none(), "a snapshot has no offset");
    }

    #[test]
    fn a_gap_asks_to_resume_from_before_the_message_once() {
        let mut r = Renderer::default();
        let user = Block {
            seq: Some(1),
            ..Block::now(BlockKind::UserMessage(serde_json::from_value(serde_json::json!({"text": "hi"})).unwrap()))
        };
        r.render(&user);
        r.render(&chunk(2, StreamedText::append("m", 0, "ab", false)));
        assert_eq!(r.take_resume(), None);
        assert_eq!(r.render(&chunk(4, StreamedText::append("m", 4, "ef", false))), "");
        assert_eq!(r.take_resume(), Some(1));
        assert_eq!(r.take_resume(), None);
    }

    #[test]
    fn permission_answers_pick_the_matching_option() {
        let option = |id: &str, kind| PermissionOption { id: id.into(), label: id.into(), kind };
        let request = PermissionRequest {
            request_id: "p".into(),
            tool: "Write".into(),
            input: serde_json::json!({}),
            options: vec![
                option("no", PermissionOptionKind::RejectOnce),
                option("yes", PermissionOptionKind::AllowOnce),
            ],
            tool_call_id: None,
        };
        assert_eq!(choose(&request, PermissionAnswer::Allow).as_deref(), Some("yes"));
        assert_eq!(choose(&request, PermissionAnswer::Deny).as_deref(), Some("no"));
    }
}
