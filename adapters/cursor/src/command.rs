//! The `cursor-agent` command line of one turn, built from the session's settings. Pure:
//! no I/O, so every flag is unit-tested here.
//!
//! ```text
//! cursor-agent -p --output-format stream-json --stream-partial-output --trust
//!              [--force | --mode=plan | --mode=ask] [--model=<model>] [--resume=<chat id>] -- <prompt>
//! ```
//!
//! Why this shape (from Cursor's CLI documentation; not checked against the real binary):
//! - `-p` (print mode) with `--output-format stream-json`: NDJSON events on stdout.
//! - `--stream-partial-output`: text arrives in small pieces as the model writes it, not
//!   one line per finished message; the mapper drops the consolidated repeats.
//! - `--trust`: print mode cannot answer the workspace-trust prompt; the working directory
//!   is the one the user chose for the session.
//! - Values chosen by the user are attached with `=`, so a model name beginning with `-`
//!   is never read as a flag.
//! - `--` ends the options, so a prompt beginning with `-` is the prompt. A prompt without
//!   any whitespace is sent with a leading space: after `--` the first operand could still
//!   be taken for a subcommand (`ls`, `status`, `update`, …), which must never run.

use std::ffi::OsString;
use std::path::PathBuf;
use terminull_adapter_sdk::settings::{SettingError, choose};

/// How much the agent may do (init param `permission_mode`), in cursor-agent's own terms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PermissionMode {
    /// `default`: no flag. cursor-agent's configured permissions (`~/.cursor/cli-config.json`,
    /// `.cursor/cli.json`) decide; in print mode it does not run shell commands (they
    /// come back `rejected`) and proposes file changes rather than applying them. The
    /// default.
    #[default]
    Default,
    /// `force`: `--force`, "force allow commands unless explicitly denied".
    Force,
    /// `plan`: `--mode=plan`, design the approach without editing.
    Plan,
    /// `ask`: `--mode=ask`, read-only questions and answers.
    Ask,
}

impl PermissionMode {
    /// Every mode's name, as `permission_mode` spells it.
    pub const NAMES: [&'static str; 4] = ["default", "force", "plan", "ask"];

    /// The mode for a `permission_mode` value; absent means the default. An unknown name
    /// is refused with a sentence listing the choices.
    pub fn parse(name: Option<&str>) -> Result<Self, SettingError> {
        let choices = [("default", Self::Default), ("force", Self::Force), ("plan", Self::Plan), ("ask", Self::Ask)];
        choose("cursor", "permission mode", name, Self::Default, &choices, "")
    }

    /// The flags this mode adds.
    pub fn flags(self) -> &'static [&'static str] {
        match self {
            PermissionMode::Default => &[],
            PermissionMode::Force => &["--force"],
            PermissionMode::Plan => &["--mode=plan"],
            PermissionMode::Ask => &["--mode=ask"],
        }
    }
}

/// What every turn's command line is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The working directory (the process's current directory).
    pub cwd: PathBuf,
    /// The model (`--model`), when chosen.
    pub model: Option<String>,
    /// The permission mode.
    pub mode: PermissionMode,
}

fn attached(flag: &str, value: &str) -> OsString {
    format!("{flag}={value}").into()
}

/// The prompt as it goes after `--`: unchanged, except that a prompt with no whitespace
/// gets a leading space so it can never name a subcommand.
pub fn prompt_operand(prompt: &str) -> String {
    if prompt.chars().any(char::is_whitespace) { prompt.to_owned() } else { format!(" {prompt}") }
}

/// The arguments after the program name for one turn: a new chat when `chat_id` is
/// `None`, else a resume of that chat.
pub fn turn_args(settings: &Settings, chat_id: Option<&str>, prompt: &str) -> Vec<OsString> {
    let mut args: Vec<OsString> =
        ["-p", "--output-format", "stream-json", "--stream-partial-output", "--trust"].map(OsString::from).into();
    args.extend(settings.mode.flags().iter().map(OsString::from));
    if let Some(model) = &settings.model {
        args.push(attached("--model", model));
    }
    if let Some(chat_id) = chat_id {
        args.push(attached("--resume", chat_id));
    }
    args.push("--".into());
    args.push(prompt_operand(prompt).into());
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings { cwd: "/w/shop".into(), model: None, mode: PermissionMode::default() }
    }

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    const BASE: [&str; 5] = ["-p", "--output-format", "stream-json", "--stream-partial-output", "--trust"];

    /// (name, settings, chat to resume, prompt, expected argv after the fixed start)
    type ArgvCase<'a> = (&'a str, Settings, Option<&'a str>, &'a str, Vec<&'a str>);

    #[test]
    fn argv_table() {
        let with = |mode, model: Option<&str>| Settings { mode, model: model.map(str::to_owned), ..settings() };
        #[rustfmt::skip]
        let cases: Vec<ArgvCase<'_>> = vec![
            ("first turn, defaults", settings(), None, "fix the bug", vec!["--", "fix the bug"]),
            ("resume", settings(), Some("c6b62c6f-7ead"), "again please", vec!["--resume=c6b62c6f-7ead", "--", "again please"]),
            ("force, model, resume", with(PermissionMode::Force, Some("sonnet-4")), Some("c1"), "go on",
                vec!["--force", "--model=sonnet-4", "--resume=c1", "--", "go on"]),
            ("plan", with(PermissionMode::Plan, None), None, "a plan", vec!["--mode=plan", "--", "a plan"]),
            ("ask", with(PermissionMode::Ask, None), None, "why?", vec!["--mode=ask", "--", " why?"]),
            ("a model starting with a dash stays attached", with(PermissionMode::Default, Some("-x")), None, "p q",
                vec!["--model=-x", "--", "p q"]),
            ("a prompt starting with dashes stays after --", settings(), None, "--help me", vec!["--", "--help me"]),
            ("a one-word prompt can never be a subcommand", settings(), None, "update", vec!["--", " update"]),
            ("a lone dash", settings(), None, "-", vec!["--", " -"]),
            ("an empty prompt", settings(), None, "", vec!["--", " "]),
            ("multi-line prompts are unchanged", settings(), None, "a\nb", vec!["--", "a\nb"]),
        ];
        for (name, s, chat, prompt, rest) in cases {
            let want: Vec<String> = BASE.iter().chain(rest.iter()).map(|s| s.to_string()).collect();
            assert_eq!(strings(turn_args(&s, chat, prompt)), want, "{name}");
        }
    }

    #[test]
    fn permission_modes() {
        let cases: [(Option<&str>, PermissionMode, &[&str]); 5] = [
            (None, PermissionMode::Default, &[]),
            (Some("default"), PermissionMode::Default, &[]),
            (Some("force"), PermissionMode::Force, &["--force"]),
            (Some("plan"), PermissionMode::Plan, &["--mode=plan"]),
            (Some("ask"), PermissionMode::Ask, &["--mode=ask"]),
        ];
        for (name, mode, flags) in cases {
            assert_eq!(PermissionMode::parse(name), Ok(mode), "{name:?}");
            assert_eq!(mode.flags(), flags, "{name:?}");
        }
        for bad in ["yolo", "bypassPermissions", "full-access", "Force", ""] {
            let err = PermissionMode::parse(Some(bad)).unwrap_err().to_string();
            assert!(err.contains(&format!("`{bad}`")) && err.contains("default, force, plan, ask"), "{err}");
        }
    }
}
