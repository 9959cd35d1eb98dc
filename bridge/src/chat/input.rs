//! The line editor (rustyline) on a thread of its own: it reads one line when asked,
//! so the terminal is in raw mode only while a line is being read, and Ctrl-C / Ctrl-D
//! arrive as events (the terminal sends no SIGINT while it reads). History lives in a
//! file of the bridge's home.

use std::path::PathBuf;

use rustyline::config::Configurer;
use rustyline::error::ReadlineError;
use rustyline::history::History;

use super::screen::Printer;
use super::style::Style;

/// Lines of history kept.
const HISTORY_LINES: usize = 1000;

/// What the user did at the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A line, Enter pressed.
    Line(String),
    /// Ctrl-C.
    Interrupted,
    /// Ctrl-D on an empty line, or the end of input.
    Eof,
}

/// The prompt marker and its width in columns.
pub fn prompt(style: Style) -> (String, String) {
    ("❯ ".to_owned(), if style.color { "\x1b[1;36m❯\x1b[0m ".to_owned() } else { "❯ ".to_owned() })
}

/// The editor thread's handle: ask for a line, receive what the user did.
#[derive(Debug)]
pub struct Editor {
    /// Ask for one more line.
    ask: std::sync::mpsc::Sender<()>,
    /// What the user did, one event per request.
    pub events: tokio::sync::mpsc::Receiver<Input>,
}

impl Editor {
    /// Starts the editor thread; also returns its printer when stdin and stdout are a
    /// terminal (output then goes above the prompt).
    pub fn start(history: Option<PathBuf>, style: Style) -> (Editor, Option<Printer>) {
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (tx, events) = tokio::sync::mpsc::channel(4);
        let (printer_tx, printer_rx) = std::sync::mpsc::sync_channel::<Option<Printer>>(1);
        let spawned = std::thread::Builder::new().name("chat-input".into()).spawn(move || {
            let mut editor = match rustyline::DefaultEditor::new() {
                Ok(e) => e,
                Err(_) => {
                    let _ = printer_tx.send(None);
                    let _ = tx.blocking_send(Input::Eof);
                    return;
                }
            };
            let _ = editor.set_max_history_size(HISTORY_LINES);
            let _ = editor.set_history_ignore_dups(true);
            if let Some(file) = &history {
                let _ = editor.load_history(file);
            }
            let printer: Option<Printer> = editor.create_external_printer().ok().map(|p| Box::new(p) as Printer);
            let _ = printer_tx.send(printer);
            let (raw, styled) = prompt(style);
            while asked.recv().is_ok() {
                let event = match editor.readline(&(raw.as_str(), styled.as_str())) {
                    Ok(line) => {
                        if !line.trim().is_empty() {
                            let _ = editor.add_history_entry(line.as_str());
                            if let Some(file) = &history
                                && editor.history().len() > 0
                            {
                                let _ = editor.save_history(file);
                                // What the user typed is as private as the sessions' history.
                                use std::os::unix::fs::PermissionsExt;
                                let _ = std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600));
                            }
                        }
                        Input::Line(line)
                    }
                    Err(ReadlineError::Interrupted) => Input::Interrupted,
                    Err(_) => Input::Eof,
                };
                if tx.blocking_send(event).is_err() {
                    return;
                }
            }
        });
        let printer = if spawned.is_ok() { printer_rx.recv().ok().flatten() } else { None };
        (Editor { ask, events }, printer)
    }

    /// Asks the editor for the next line.
    pub fn ask(&self) {
        let _ = self.ask.send(());
    }
}
