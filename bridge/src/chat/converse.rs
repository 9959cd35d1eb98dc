//! The conversation loop: blocks from the bridge to the screen, lines and keys from
//! the editor to the bridge, Ctrl-C as the docs say (during a reply it interrupts the
//! turn; a second press, or two at idle, leaves at once, no Enter needed).

use std::collections::VecDeque;
use std::io::IsTerminal;

use terminull_protocol::blocks::{BlockKind, EndReason, PermissionRequest};
use terminull_protocol::commands::is_universal;
use terminull_protocol::control::{self as control, BridgeMessage, ControlMessage, ReplyResult};
use terminull_protocol::ids::SessionId;

use super::input::{self, Editor, Input};
use super::render::{Out, Renderer};
use super::screen::Screen;
use super::style::{Style, display_width};
use super::{KEY_HINT, Mode, PermissionAnswer, answer_permission, json_line, resume_from, send_user};
use crate::daemon_client::{Client, ClientError};

/// The state of one conversation.
struct Conversation<'a> {
    client: &'a mut Client,
    session: &'a SessionId,
    mode: Mode,
    style: Style,
    renderer: Renderer,
    screen: Screen,
    /// The line editor, in the interactive form.
    editor: Option<Editor>,
    /// The terminal's settings at start, restored on leaving (the editor may be
    /// reading, in raw mode, when the conversation ends).
    termios: Option<rustix::termios::Termios>,
    /// The session's history is still being replayed.
    replaying: bool,
    /// The permission request the next line answers.
    waiting_permission: Option<PermissionRequest>,
    /// A turn runs.
    in_turn: bool,
    /// Whether the last turn completed.
    last_ok: bool,
    /// Ctrl-C presses since the last line or turn end.
    interrupts: u32,
    /// Input is still open (it ends with Ctrl-D, or at the end of piped input).
    input_open: bool,
    /// The editor is reading a line (its prompt is on the screen).
    reading: bool,
}

/// What to do after an event.
enum Next {
    Go,
    Leave,
}

pub(super) async fn converse(
    client: &mut Client,
    session: &SessionId,
    kept: Vec<BridgeMessage>,
    mode: Mode,
) -> Result<bool, ClientError> {
    let scripted = mode.prompt.is_some();
    let style = if mode.json { Style::plain() } else { Style::detect() };
    let mut screen = Screen::new(std::io::stdout().is_terminal() && !mode.json);
    let stdin_tty = std::io::stdin().is_terminal();
    let termios = stdin_tty.then(|| rustix::termios::tcgetattr(std::io::stdin()).ok()).flatten();
    let editor = if scripted {
        None
    } else {
        let (editor, printer) = Editor::start(mode.history.clone(), style);
        if let Some(printer) = printer {
            screen.use_printer(printer);
        }
        Some(editor)
    };
    let mut c = Conversation {
        client,
        session,
        style,
        renderer: Renderer::new(style),
        screen,
        editor,
        termios,
        replaying: true,
        waiting_permission: None,
        in_turn: false,
        last_ok: true,
        interrupts: 0,
        input_open: !scripted,
        reading: false,
        mode,
    };
    if let Some(text) = c.mode.prompt.clone() {
        send_user(c.client, c.session, text).await?;
        c.in_turn = true;
    }
    let result = c.run(kept.into()).await;
    c.restore_terminal();
    result
}

impl Conversation<'_> {
    async fn run(&mut self, mut pending: VecDeque<BridgeMessage>) -> Result<bool, ClientError> {
        // A new session: the hint once what came with the start (its agent line) is shown.
        let mut hint_due = !self.mode.replay;
        loop {
            if hint_due && pending.is_empty() {
                self.started();
                hint_due = false;
            }
            let message = match pending.pop_front() {
                Some(m) => m,
                None => tokio::select! {
                    m = self.client.next() => match m { Some(m) => m, None => return Err(ClientError::Closed) },
                    event = next_input(&mut self.editor), if self.input_open => {
                        let mut kept = Vec::new();
                        let next = self.on_input(event, &mut kept).await?;
                        pending.extend(kept);
                        match next { Next::Go => continue, Next::Leave => return Ok(self.last_ok) }
                    }
                    _ = tokio::signal::ctrl_c() => {
                        let mut kept = Vec::new();
                        let next = self.on_ctrl_c(&mut kept).await;
                        pending.extend(kept);
                        match next { Next::Go => continue, Next::Leave => return Ok(self.last_ok) }
                    }
                },
            };
            let block = match message {
                BridgeMessage::Block { block, session_id, .. } if &session_id == self.session => block,
                BridgeMessage::ReplayDone { .. } => {
                    if self.replaying && self.mode.replay {
                        self.started();
                    }
                    self.replaying = false;
                    if self.mode.prompt.is_none() && !self.input_open && !self.in_turn {
                        return Ok(self.last_ok);
                    }
                    continue;
                }
                BridgeMessage::Reply(r) => {
                    if let control::ReplyOutcome::Error { error } = r.outcome {
                        self.note(&self.style.red(&format!("error: {}", error.message)));
                    }
                    continue;
                }
                _ => continue,
            };
            if self.mode.json {
                self.screen.show(&[Out::Line(json_line(&block).trim_end().to_owned())]);
            } else {
                let outs = self.renderer.render(&block);
                self.screen.show(&outs);
                if let Some(since_seq) = self.renderer.take_resume() {
                    // A piece of a message went missing: fetch the session again from before it.
                    self.client.send(resume_from(self.session, since_seq)).await?;
                }
            }
            if self.replaying {
                if let BlockKind::SessionEnd(end) = &block.kind {
                    self.last_ok = end.reason == EndReason::Completed;
                }
                continue;
            }
            match &block.kind {
                BlockKind::PermissionRequest(request) => match self.mode.auto {
                    Some(answer) => answer_permission(self.client, self.session, request, answer).await?,
                    None if self.mode.prompt.is_some() => {
                        answer_permission(self.client, self.session, request, PermissionAnswer::Deny).await?
                    }
                    None => self.waiting_permission = Some(request.clone()),
                },
                BlockKind::SessionEnd(end) => {
                    self.in_turn = false;
                    self.interrupts = 0;
                    self.waiting_permission = None;
                    self.last_ok = end.reason == EndReason::Completed;
                    if self.mode.prompt.is_some() || !self.input_open {
                        return Ok(self.last_ok);
                    }
                }
                _ => {}
            }
        }
    }

    /// The session is on screen: show the key hint and let the user type.
    fn started(&mut self) {
        if self.mode.prompt.is_none() && !self.mode.json && std::io::stdin().is_terminal() {
            let hint = self.style.dim(KEY_HINT);
            self.note(&hint);
        }
        self.ask_again();
    }

    async fn on_input(&mut self, event: Input, kept: &mut Vec<BridgeMessage>) -> Result<Next, ClientError> {
        self.reading = false;
        let prompt_width = display_width(&input::prompt(self.style).0);
        let line = match event {
            Input::Line(line) => line,
            Input::Interrupted => {
                self.screen.erase_entered(prompt_width, "");
                let next = self.on_ctrl_c(kept).await;
                if matches!(next, Next::Go) {
                    self.ask_again();
                }
                return Ok(next);
            }
            Input::Eof => {
                self.input_open = false;
                if std::io::stdin().is_terminal() {
                    self.screen.erase_entered(prompt_width, "");
                    self.leave_hint();
                    return Ok(Next::Leave);
                }
                // Piped input ended: leave once the history is shown and no turn runs.
                let done = !self.in_turn && !self.replaying;
                return Ok(if done { Next::Leave } else { Next::Go });
            }
        };
        self.screen.erase_entered(prompt_width, &line);
        self.interrupts = 0;
        if let Some(request) = self.waiting_permission.take() {
            let typed = line.trim();
            let allowed = typed.eq_ignore_ascii_case("y") || typed.eq_ignore_ascii_case("yes");
            let outs = self.renderer.answer(allowed, if typed.is_empty() { "n" } else { typed });
            self.screen.show(&outs);
            let answer = if allowed { PermissionAnswer::Allow } else { PermissionAnswer::Deny };
            answer_permission(self.client, self.session, &request, answer).await?;
        } else if let Some(command) = line.trim().strip_prefix('/') {
            // Slash commands go to the bridge, which runs its own or passes the agent's on.
            let (name, args) = command.split_once(' ').unwrap_or((command, ""));
            let message = ControlMessage::SlashCommand(control::SlashCommand {
                session_id: self.session.clone(),
                command: name.to_owned(),
                args: args.trim().to_owned(),
            });
            match self.client.call(message, kept).await {
                Ok(ReplyResult::CommandOutput { text }) => {
                    for line in text.lines() {
                        self.note(line);
                    }
                }
                Ok(_) => self.in_turn = !is_universal(name),
                Err(e) => self.note(&self.style.red(&format!("/{name}: {e}"))),
            }
        } else if !line.trim().is_empty() {
            send_user(self.client, self.session, line).await?;
            self.in_turn = true;
        }
        self.ask_again();
        Ok(Next::Go)
    }

    /// Ctrl-C: interrupts a running turn; the second press (or the second at idle) leaves.
    async fn on_ctrl_c(&mut self, kept: &mut Vec<BridgeMessage>) -> Next {
        self.interrupts += 1;
        if self.interrupts >= 2 || (self.mode.prompt.is_some() && !self.in_turn) {
            self.leave_hint();
            return Next::Leave;
        }
        if !self.in_turn {
            self.note(&self.style.dim("(Ctrl-C again to leave, or Ctrl-D)"));
            return Next::Go;
        }
        self.note(&self.style.yellow("interrupting… (Ctrl-C again to leave)"));
        let interrupt = ControlMessage::Interrupt(control::Interrupt { session_id: self.session.clone() });
        if let Err(e) = self.client.call(interrupt, kept).await {
            self.note(&self.style.red(&format!("cannot interrupt: {e}")));
        }
        Next::Go
    }

    fn ask_again(&mut self) {
        if let Some(editor) = &self.editor {
            editor.ask();
            self.reading = true;
        }
    }

    /// A line of this client's own, after what is shown (the unfinished line stays);
    /// on stderr when stdout is a script's (`-p`, `--json`).
    fn note(&mut self, line: &str) {
        if self.editor.is_none() || self.mode.json {
            super::note_stderr(line);
            return;
        }
        let mut outs = Vec::new();
        self.renderer.close(&mut outs);
        outs.push(Out::Line(line.to_owned()));
        self.screen.show(&outs);
    }

    /// How to come back, said once on leaving an interactive chat.
    fn leave_hint(&mut self) {
        if self.mode.prompt.is_some() || self.mode.json {
            return;
        }
        let hint = format!(
            "Left the session; it keeps its history. Come back with `terminull chat --continue` (from this directory) or `terminull attach {}`.",
            self.session
        );
        let hint = self.style.dim(&hint);
        self.note(&hint);
    }

    fn restore_terminal(&mut self) {
        if self.reading && self.screen.is_tty() {
            // The editor's prompt is on the last row: wipe it, the editor is left behind.
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(b"\r\x1b[K");
            let _ = stdout.flush();
        }
        if let Some(termios) = self.termios.take() {
            let _ = rustix::termios::tcsetattr(std::io::stdin(), rustix::termios::OptionalActions::Now, &termios);
        }
    }
}

/// The editor's next event (never, without an editor).
async fn next_input(editor: &mut Option<Editor>) -> Input {
    match editor {
        Some(editor) => editor.events.recv().await.unwrap_or(Input::Eof),
        None => std::future::pending().await,
    }
}
