//! The `pi` command line and the RPC commands the adapter writes to its stdin. Pure:
//! no I/O, so every flag and every command is unit-tested here.
//!
//! ```text
//! pi --mode rpc [--model <provider/id>] [--thinking <level>] [--tools read,grep,find,ls] [--session <id>]
//! ```
//!
//! - `--mode rpc`: one long-lived process per session; commands on stdin, responses and
//!   events on stdout (see docs/adapters/pi.md for why RPC rather than `--mode json -p`).
//! - `--session <id>`: continue a session pi saved before (the id `get_state` reports,
//!   the file under `~/.pi/agent/sessions/`), when resuming or restarting after a crash.
//! - `--tools read,grep,find,ls`: the `read-only` permission mode (pi has no approval
//!   system; a tool allowlist is its only control, the one its own `--help` suggests for
//!   "read-only mode").
//!
//! Every command the adapter sends carries an id that is deterministic per process
//! (`state-1`, `commands-1`, `t1-prompt`, `t1-state-2`, `t1-abort-1`, …), so a recorded
//! process can be replayed.

use std::ffi::OsString;
use std::path::PathBuf;
use terminull_adapter_sdk::settings::{SettingError, check_flag_value, check_one_of, choose};

use serde_json::{Value, json};

/// What pi may do, chosen per session (init param `permission_mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PermissionMode {
    /// `default`: pi's own default tools (`read`, `bash`, `edit`, `write`), run without
    /// asking: pi has no approval system.
    #[default]
    Default,
    /// `read-only`: only `read`, `grep`, `find` and `ls` (`--tools read,grep,find,ls`).
    ReadOnly,
}

impl PermissionMode {
    /// Every mode's name, as `permission_mode` spells it.
    pub const NAMES: [&'static str; 2] = ["default", "read-only"];

    /// The tools of the read-only mode.
    pub const READ_ONLY_TOOLS: &'static str = "read,grep,find,ls";

    /// The mode for a `permission_mode` value; absent means the default. An unknown
    /// name is refused with a sentence listing the choices.
    pub fn parse(name: Option<&str>) -> Result<Self, SettingError> {
        let choices = [("default", Self::Default), ("read-only", Self::ReadOnly)];
        choose("pi", "permission mode", name, Self::Default, &choices, "")
    }
}

/// The thinking levels `pi --thinking` accepts.
pub const THINKING_LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];

/// Checks the `effort` init param against [`THINKING_LEVELS`].
pub fn check_effort(effort: &str) -> Result<(), SettingError> {
    check_one_of("pi", "effort", effort, &THINKING_LEVELS)
}

/// Checks a value that goes into the command line as a flag's value (a model, a
/// session id): not empty and not starting with `-`, which pi would read as a flag.
pub fn check_value(what: &'static str, value: &str) -> Result<(), SettingError> {
    check_flag_value("pi", what, value)
}

/// What the command line is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The working directory of the process.
    pub cwd: PathBuf,
    /// `--model`, when chosen (`provider/id`, or a pattern pi resolves).
    pub model: Option<String>,
    /// `--thinking`, when chosen; one of [`THINKING_LEVELS`].
    pub thinking: Option<String>,
    /// The tool allowlist.
    pub mode: PermissionMode,
}

/// The arguments after the program name, continuing session `session` when given.
pub fn launch_args(settings: &Settings, session: Option<&str>) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--mode".into(), "rpc".into()];
    if let Some(model) = &settings.model {
        args.extend(["--model".into(), model.into()]);
    }
    if let Some(thinking) = &settings.thinking {
        args.extend(["--thinking".into(), thinking.into()]);
    }
    if settings.mode == PermissionMode::ReadOnly {
        args.extend(["--tools".into(), PermissionMode::READ_ONLY_TOOLS.into()]);
    }
    if let Some(session) = session {
        args.extend(["--session".into(), session.into()]);
    }
    args
}

/// `get_state`.
pub fn get_state(id: &str) -> Value {
    json!({"id": id, "type": "get_state"})
}

/// `get_commands` (prompt templates, skills and extension commands).
pub fn get_commands(id: &str) -> Value {
    json!({"id": id, "type": "get_commands"})
}

/// `prompt` with the message's text and images (`{"type":"image","data":…,"mimeType":…}`).
pub fn prompt(id: &str, text: &str, images: Vec<Value>) -> Value {
    if images.is_empty() {
        json!({"id": id, "type": "prompt", "message": text})
    } else {
        json!({"id": id, "type": "prompt", "message": text, "images": images})
    }
}

/// `abort`: stops the run (and a pending retry); answered once pi is idle.
pub fn abort(id: &str) -> Value {
    json!({"id": id, "type": "abort"})
}

/// The answer that dismisses an extension's dialog (the adapter cannot show one).
pub fn cancel_dialog(id: &str) -> Value {
    json!({"type": "extension_ui_response", "id": id, "cancelled": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn argv_table() {
        let base = Settings { cwd: "/w".into(), model: None, thinking: None, mode: PermissionMode::Default };
        let full = Settings {
            model: Some("mock/mock-claude".into()),
            thinking: Some("high".into()),
            mode: PermissionMode::ReadOnly,
            ..base.clone()
        };
        #[rustfmt::skip]
        let cases: Vec<(&str, &Settings, Option<&str>, Vec<&str>)> = vec![
            ("defaults", &base, None, vec!["--mode", "rpc"]),
            ("continue a session", &base, Some("01a2-x"), vec!["--mode", "rpc", "--session", "01a2-x"]),
            ("every option", &full, Some("s"), vec![
                "--mode", "rpc", "--model", "mock/mock-claude", "--thinking", "high",
                "--tools", "read,grep,find,ls", "--session", "s"]),
        ];
        for (name, settings, session, want) in cases {
            assert_eq!(strings(launch_args(settings, session)), want, "{name}");
        }
    }

    #[test]
    fn permission_modes() {
        assert_eq!(PermissionMode::parse(None), Ok(PermissionMode::Default));
        assert_eq!(PermissionMode::parse(Some("default")), Ok(PermissionMode::Default));
        assert_eq!(PermissionMode::parse(Some("read-only")), Ok(PermissionMode::ReadOnly));
        let err = PermissionMode::parse(Some("yolo")).unwrap_err().to_string();
        assert!(err.contains("`yolo`") && err.contains("default, read-only"), "{err}");
    }

    #[test]
    fn efforts_and_values() {
        for ok in THINKING_LEVELS {
            assert_eq!(check_effort(ok), Ok(()));
        }
        let err = check_effort("max").unwrap_err().to_string();
        assert!(err.contains("off, minimal, low, medium, high, xhigh"), "{err}");
        assert!(check_value("model", "mock/mock-claude").is_ok());
        for bad in ["", " ", "--help", "a\nb"] {
            assert!(check_value("model", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn commands() {
        assert_eq!(get_state("state-1"), json!({"id": "state-1", "type": "get_state"}));
        assert_eq!(get_commands("commands-1"), json!({"id": "commands-1", "type": "get_commands"}));
        assert_eq!(abort("t1-abort-1"), json!({"id": "t1-abort-1", "type": "abort"}));
        assert_eq!(prompt("t1-prompt", "hi", vec![]), json!({"id": "t1-prompt", "type": "prompt", "message": "hi"}));
        let image = json!({"type": "image", "data": "AAA=", "mimeType": "image/png"});
        assert_eq!(prompt("p", "look", vec![image.clone()])["images"], json!([image]));
        assert_eq!(cancel_dialog("u1"), json!({"type": "extension_ui_response", "id": "u1", "cancelled": true}));
    }
}
