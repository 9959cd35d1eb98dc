//! Colours for `terminull chat`: on only when stdout is a terminal, `NO_COLOR` is unset
//! (or empty, as <https://no-color.org> says) and `TERM` is not `dumb`; markdown is
//! laid out (bullets, fences, quotes) whenever stdout is a terminal.

use std::io::IsTerminal;

/// How output is decorated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// ANSI colours and emphasis.
    pub color: bool,
    /// Markdown laid out for the terminal (else printed as the agent wrote it).
    pub markdown: bool,
}

impl Style {
    /// The style for this process's stdout and environment.
    pub fn detect() -> Self {
        let tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        Style { color: tty && !no_color && !dumb, markdown: tty }
    }

    /// No decoration at all (pipes, tests).
    pub fn plain() -> Self {
        Style::default()
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color && !text.is_empty() { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() }
    }

    /// Bold.
    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }
    /// Dim (secondary information).
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }
    /// Italic (emphasis).
    pub fn italic(self, text: &str) -> String {
        self.paint("3", text)
    }
    /// Cyan (code, the prompt marker).
    pub fn cyan(self, text: &str) -> String {
        self.paint("36", text)
    }
    /// Green (success).
    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }
    /// Red (errors).
    pub fn red(self, text: &str) -> String {
        self.paint("31", text)
    }
    /// Yellow (questions, running work).
    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }
    /// Bold magenta (headings).
    pub fn heading(self, text: &str) -> String {
        self.paint("1;35", text)
    }
}

/// `text` without ANSI escape sequences (CSI `ESC [ … letter`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.clone().next() == Some('[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The number of terminal columns `text` takes (escapes excluded).
pub fn display_width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(strip_ansi(text).as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_means_no_escapes() {
        let s = Style { color: false, markdown: true };
        assert_eq!(s.bold("x") + &s.cyan("y"), "xy");
        let c = Style { color: true, markdown: true };
        assert_eq!(c.bold("x"), "\x1b[1mx\x1b[0m");
        assert_eq!(strip_ansi(&c.bold("héllo")), "héllo");
        assert_eq!(display_width(&c.cyan("日本")), 4);
    }
}
