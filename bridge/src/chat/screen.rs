//! Where `terminull chat` writes. On a terminal every piece goes through the line
//! editor's printer, which clears the prompt, prints above it and draws it again, so
//! the reply grows above what the user is typing and never mixes with it. The reply's
//! unfinished line is printed too and overwritten (cursor up the rows it took) when it
//! grows. Without a terminal the text is appended as it comes, no escapes.

use std::io::Write;
use std::os::fd::AsFd;

use super::render::Out;
use super::style::display_width;

/// Something that prints above the line being edited (rustyline's external printer).
pub type Printer = Box<dyn rustyline::ExternalPrinter + Send>;

/// The output side of a chat.
pub struct Screen {
    /// The line editor's printer, while one runs.
    printer: Option<Printer>,
    /// Stdout is a terminal: overwrite the unfinished line with cursor moves.
    tty: bool,
    /// Rows the unfinished line took when last printed (terminal).
    partial_rows: usize,
    /// The unfinished line as printed so far (no terminal).
    partial: String,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen").field("tty", &self.tty).field("partial_rows", &self.partial_rows).finish()
    }
}

impl Screen {
    /// Writes to stdout; `tty`: stdout is a terminal.
    pub fn new(tty: bool) -> Self {
        Screen { printer: None, tty, partial_rows: 0, partial: String::new() }
    }

    /// Stdout is a terminal.
    pub fn is_tty(&self) -> bool {
        self.tty
    }

    /// From now on, print through the line editor.
    pub fn use_printer(&mut self, printer: Printer) {
        self.printer = Some(printer);
    }

    /// Shows `outs`.
    pub fn show(&mut self, outs: &[Out]) {
        if outs.is_empty() {
            return;
        }
        let mut text = String::new();
        for out in outs {
            let (line, finished) = match out {
                Out::Line(l) => (l, true),
                Out::Partial(p) => (p, false),
            };
            if self.tty {
                text.push_str(&self.rewind());
                text.push_str(line);
                text.push('\n');
                self.partial_rows = if finished { 0 } else { rows(line, columns()) };
            } else {
                match line.strip_prefix(self.partial.as_str()) {
                    Some(rest) => text.push_str(rest),
                    None => {
                        text.push('\n');
                        text.push_str(line);
                    }
                }
                if finished {
                    text.push('\n');
                    self.partial.clear();
                } else {
                    self.partial = line.clone();
                }
            }
        }
        self.write(text);
    }

    /// A line of this client's own (a hint, an error) below what was shown.
    pub fn note(&mut self, line: &str) {
        self.show(&[Out::Line(line.to_owned())]);
    }

    /// Removes the prompt line the editor left on the screen after Enter (the bridge
    /// sends the message back as a block, shown in its place once).
    pub fn erase_entered(&mut self, prompt_width: usize, line: &str) {
        if !self.tty || self.printer.is_none() {
            return;
        }
        let rows = (prompt_width + display_width(line)) / columns() + 1;
        // The editor is not reading: straight to the terminal.
        let text = format!("\x1b[{rows}A\r\x1b[J");
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }

    /// Moves back over the unfinished line printed last, if any, and clears below.
    fn rewind(&mut self) -> String {
        let rows = std::mem::take(&mut self.partial_rows);
        if rows == 0 { String::new() } else { format!("\x1b[{rows}A\r\x1b[J") }
    }

    fn write(&mut self, text: String) {
        if let Some(printer) = self.printer.as_mut() {
            let _ = printer.print(text);
            return;
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }
}

/// The terminal's width in columns (80 when it cannot be read).
pub fn columns() -> usize {
    rustix::termios::tcgetwinsize(std::io::stdout().as_fd())
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|c| *c > 0)
        .unwrap_or(80)
}

/// The rows `line` takes on a terminal `cols` wide.
fn rows(line: &str, cols: usize) -> usize {
    display_width(line).div_ceil(cols.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_takes_the_rows_its_width_needs() {
        assert_eq!([rows("", 80), rows("abc", 80), rows(&"x".repeat(80), 80), rows(&"x".repeat(81), 80)], [1, 1, 1, 2]);
        assert_eq!(rows("\x1b[1mabc\x1b[0m", 3), 1);
    }
}
