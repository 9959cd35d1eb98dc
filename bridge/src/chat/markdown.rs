//! Markdown for the terminal, one line at a time (the text arrives streamed, so a
//! line is laid out once it is complete): headings, bullet and numbered lists, quotes,
//! rules, fenced code blocks, and inline `code`, **bold** and *emphasis*. Without
//! colour the markers that only colour can replace (`#`, `**`, backticks) stay as the
//! agent wrote them, so nothing is lost.

use super::style::Style;

/// Layout state of one streamed message: whether a code fence is open.
#[derive(Debug, Clone, Default)]
pub struct Markdown {
    /// Inside a ``` fence.
    in_code: bool,
}

impl Markdown {
    /// `line` (no newline) laid out, advancing the fence state.
    pub fn line(&mut self, line: &str, style: Style) -> String {
        if !style.markdown {
            return line.to_owned();
        }
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            self.in_code = !self.in_code;
            return if self.in_code {
                style.dim(format!("┌─ {}", lang.trim()).trim_end())
            } else {
                style.dim("└─")
            };
        }
        if self.in_code {
            return format!("{}{}", style.dim("│ "), style.cyan(line));
        }
        block_line(line, style)
    }

    /// `line` laid out as it stands, without advancing the state (an unfinished line).
    pub fn peek(&self, line: &str, style: Style) -> String {
        self.clone().line(line, style)
    }
}

fn block_line(line: &str, style: Style) -> String {
    let indent = line.len() - line.trim_start().len();
    let (pad, rest) = line.split_at(indent);
    let hashes = rest.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && rest[hashes..].starts_with(' ') {
        let text = rest[hashes..].trim();
        return if style.color { style.heading(&inline(text, style)) } else { line.to_owned() };
    }
    if let Some(item) = rest.strip_prefix("- ").or_else(|| rest.strip_prefix("* ")).or_else(|| rest.strip_prefix("+ "))
    {
        return format!("{pad}{} {}", style.cyan("•"), inline(item, style));
    }
    if let Some(quote) = rest.strip_prefix("> ").or_else(|| (rest == ">").then_some("")) {
        return format!("{pad}{}{}", style.dim("│ "), style.italic(&inline(quote, style)));
    }
    let rule = rest.trim_end();
    if rule.len() >= 3 && (rule.chars().all(|c| c == '-') || rule.chars().all(|c| c == '*')) {
        return style.dim(&"─".repeat(40));
    }
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && (rest[digits..].starts_with(". ") || rest[digits..].starts_with(") ")) {
        let (number, item) = rest.split_at(digits + 1);
        return format!("{pad}{} {}", style.cyan(number), inline(item.trim_start(), style));
    }
    format!("{pad}{}", inline(rest, style))
}

/// Inline `code`, **bold** and *emphasis* / _emphasis_, coloured (markers kept
/// when there is no colour).
fn inline(text: &str, style: Style) -> String {
    if !style.color {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let (marker, paint): (&str, fn(Style, &str) -> String) = if rest.starts_with('`') {
            ("`", Style::cyan)
        } else if rest.starts_with("**") {
            ("**", Style::bold)
        } else if rest.starts_with("__") {
            ("__", Style::bold)
        } else if rest.starts_with('*') {
            ("*", Style::italic)
        } else if rest.starts_with('_') && !out.ends_with(|c: char| c.is_alphanumeric()) {
            ("_", Style::italic)
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        };
        let body = &rest[marker.len()..];
        match body.find(marker) {
            Some(end) if end > 0 && !body.starts_with(' ') => {
                let inner = &body[..end];
                out.push_str(&if marker == "`" { paint(style, inner) } else { paint(style, &inline(inner, style)) });
                rest = &body[end + marker.len()..];
            }
            _ => {
                out.push_str(marker);
                rest = body;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::style::strip_ansi;

    fn lay_out(text: &str, style: Style) -> Vec<String> {
        let mut md = Markdown::default();
        text.lines().map(|l| md.line(l, style)).collect()
    }

    #[test]
    fn lists_fences_and_headings_are_laid_out_for_the_terminal() {
        let color = Style { color: true, markdown: true };
        let text = "# Title\n- one **two** `three`\n1. first\n```rust\nlet x = *y;\n```\n> said";
        let lines: Vec<String> = lay_out(text, color).iter().map(|l| strip_ansi(l)).collect();
        assert_eq!(lines, ["Title", "• one two three", "1. first", "┌─ rust", "│ let x = *y;", "└─", "│ said"]);
        let bold = &lay_out("a **b** c", color)[0];
        assert!(bold.contains("\x1b[1mb\x1b[0m"), "{bold:?}");
    }

    #[test]
    fn without_colour_the_markers_stay_and_no_escape_is_printed() {
        let style = Style { color: false, markdown: true };
        let lines = lay_out("## Title\n- a **b** `c`\n```\ncode\n```", style);
        assert_eq!(lines, ["## Title", "• a **b** `c`", "┌─", "│ code", "└─"]);
        assert!(lines.iter().all(|l| !l.contains('\x1b')));
    }

    #[test]
    fn unmatched_markers_and_snake_case_are_left_alone() {
        let color = Style { color: true, markdown: true };
        assert_eq!(lay_out("a * b and snake_case_name and 2*3", color)[0], "a * b and snake_case_name and 2*3");
    }
}
