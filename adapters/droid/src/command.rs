//! The `droid exec` command line of one turn, built from the session's settings. Pure:
//! no I/O, so every flag is unit-tested here.
//!
//! ```text
//! droid exec -o stream-json --cwd <cwd> [-m <model>] [-r <effort>] [--auto <low|medium|high>]
//!            [-s <session id> | --fork <session id>] -- <prompt>
//! ```
//!
//! - `-s <id>` continues a session in place; droid fetches it from Factory's cloud, so
//!   it needs a login and the network (offline it exits 1 with no output at all).
//!   `--fork <id>` copies the session's local history into a new session and works
//!   offline; the adapter uses it once `-s` failed (see docs/adapters/droid.md).
//! - `--` ends the options, so a prompt beginning with `-` is the prompt. A prompt
//!   longer than [`MAX_ARGV_PROMPT_BYTES`] does not fit in one argument (Linux caps one
//!   at 128 KiB); it is written to droid's stdin instead, which droid reads when no
//!   prompt is given.
//! - The permission mode is droid's autonomy level: none (read-only, droid's default)
//!   or `--auto low|medium|high`. `--skip-permissions-unsafe` is not offered.

use std::ffi::OsString;
use std::path::PathBuf;
use terminull_adapter_sdk::settings::{SettingError, check_flag_value, check_one_of, choose};

/// Prompts up to this size go on the command line; longer ones through stdin.
pub const MAX_ARGV_PROMPT_BYTES: usize = 96 * 1024;

/// droid's autonomy level, chosen per session (init param `permission_mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PermissionMode {
    /// `read-only`: droid's default; reading, listing and read-only commands only.
    #[default]
    ReadOnly,
    /// `low` (`--auto low`): also file creation and edits outside system directories.
    Low,
    /// `medium` (`--auto medium`): also package installs, builds, local git operations.
    Medium,
    /// `high` (`--auto high`): also running arbitrary code, git push, deployments.
    High,
}

impl PermissionMode {
    /// Every mode's name, as `permission_mode` spells it.
    pub const NAMES: [&'static str; 4] = ["read-only", "low", "medium", "high"];

    /// The mode for a `permission_mode` value; absent means the default. An unknown
    /// name is refused with a sentence listing the choices.
    pub fn parse(name: Option<&str>) -> Result<Self, SettingError> {
        let choices =
            [("read-only", Self::ReadOnly), ("low", Self::Low), ("medium", Self::Medium), ("high", Self::High)];
        let note = " (droid's autonomy levels; --skip-permissions-unsafe is not offered)";
        choose("droid", "permission mode", name, Self::ReadOnly, &choices, note)
    }

    /// The value of `--auto`, when there is one.
    pub fn auto(self) -> Option<&'static str> {
        match self {
            PermissionMode::ReadOnly => None,
            PermissionMode::Low => Some("low"),
            PermissionMode::Medium => Some("medium"),
            PermissionMode::High => Some("high"),
        }
    }
}

/// The reasoning efforts `droid exec -r` knows (which ones a model supports varies).
pub const EFFORTS: [&str; 8] = ["off", "none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// Checks the `effort` init param against [`EFFORTS`].
pub fn check_effort(effort: &str) -> Result<(), SettingError> {
    check_one_of("droid", "effort", effort, &EFFORTS)
}

/// Checks a value that goes into the command line as a flag's value (a model, a
/// session id): not empty and not starting with `-`, which droid would read as a flag.
pub fn check_value(what: &'static str, value: &str) -> Result<(), SettingError> {
    check_flag_value("droid", what, value)
}

/// What every turn's command line is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The working directory (`--cwd`, and the process's current directory).
    pub cwd: PathBuf,
    /// `-m`, when chosen (`custom:<model>` for a custom model).
    pub model: Option<String>,
    /// `-r`, when chosen.
    pub effort: Option<String>,
    /// The autonomy level.
    pub mode: PermissionMode,
}

/// Which session a turn continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continue<'a> {
    /// A new session.
    New,
    /// `-s <id>`: the same session (needs Factory's cloud).
    Resume(&'a str),
    /// `--fork <id>`: a new session with the history of `<id>` (local).
    Fork(&'a str),
}

/// The arguments after the program name for one turn, and whether the prompt goes to
/// stdin (it is then not among the arguments).
pub fn turn_args(settings: &Settings, session: Continue<'_>, prompt: &str) -> (Vec<OsString>, bool) {
    let mut args: Vec<OsString> = vec!["exec".into(), "-o".into(), "stream-json".into()];
    args.extend(["--cwd".into(), settings.cwd.clone().into_os_string()]);
    if let Some(model) = &settings.model {
        args.extend(["-m".into(), model.into()]);
    }
    if let Some(effort) = &settings.effort {
        args.extend(["-r".into(), effort.into()]);
    }
    if let Some(level) = settings.mode.auto() {
        args.extend(["--auto".into(), level.into()]);
    }
    match session {
        Continue::New => {}
        Continue::Resume(id) => args.extend(["-s".into(), id.into()]),
        Continue::Fork(id) => args.extend(["--fork".into(), id.into()]),
    }
    let on_stdin = prompt.len() > MAX_ARGV_PROMPT_BYTES || prompt.trim().is_empty();
    if !on_stdin {
        args.extend(["--".into(), prompt.into()]);
    }
    (args, on_stdin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings { cwd: "/w/shop".into(), model: None, effort: None, mode: PermissionMode::default() }
    }

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn argv_table() {
        let full = Settings {
            model: Some("custom:mock-claude".into()),
            effort: Some("high".into()),
            mode: PermissionMode::Medium,
            ..settings()
        };
        #[rustfmt::skip]
        let cases: Vec<(&str, Settings, Continue<'_>, &str, Vec<&str>)> = vec![
            ("new session, defaults", settings(), Continue::New, "hello", vec![
                "exec", "-o", "stream-json", "--cwd", "/w/shop", "--", "hello"]),
            ("resume", settings(), Continue::Resume("s-1"), "again", vec![
                "exec", "-o", "stream-json", "--cwd", "/w/shop", "-s", "s-1", "--", "again"]),
            ("fork", settings(), Continue::Fork("s-1"), "again", vec![
                "exec", "-o", "stream-json", "--cwd", "/w/shop", "--fork", "s-1", "--", "again"]),
            ("every option", full, Continue::Resume("s"), "p", vec![
                "exec", "-o", "stream-json", "--cwd", "/w/shop", "-m", "custom:mock-claude", "-r", "high",
                "--auto", "medium", "-s", "s", "--", "p"]),
            ("a prompt starting with a dash stays after --", settings(), Continue::New, "-v please", vec![
                "exec", "-o", "stream-json", "--cwd", "/w/shop", "--", "-v please"]),
        ];
        for (name, s, session, prompt, want) in cases {
            let (args, on_stdin) = turn_args(&s, session, prompt);
            assert_eq!(strings(args), want, "{name}");
            assert!(!on_stdin, "{name}");
        }
        let long = "x".repeat(MAX_ARGV_PROMPT_BYTES + 1);
        let (args, on_stdin) = turn_args(&settings(), Continue::New, &long);
        assert!(on_stdin);
        assert_eq!(strings(args), ["exec", "-o", "stream-json", "--cwd", "/w/shop"]);
    }

    #[test]
    fn permission_modes() {
        let cases = [
            (None, Ok(None)),
            (Some("read-only"), Ok(None)),
            (Some("low"), Ok(Some("low"))),
            (Some("medium"), Ok(Some("medium"))),
            (Some("high"), Ok(Some("high"))),
        ];
        for (name, want) in cases {
            assert_eq!(
                PermissionMode::parse(name).map(PermissionMode::auto).map_err(|e| e.to_string()),
                want.map_err(|e: &str| e.to_owned())
            );
        }
        let err = PermissionMode::parse(Some("skip-permissions-unsafe")).unwrap_err().to_string();
        assert!(err.contains("read-only, low, medium, high"), "{err}");
    }

    #[test]
    fn efforts_and_values() {
        for ok in EFFORTS {
            assert_eq!(check_effort(ok), Ok(()));
        }
        assert!(check_effort("extreme").unwrap_err().to_string().contains("off, none, minimal"));
        assert!(check_value("model", "custom:mock-claude").is_ok());
        for bad in ["", "-m", "a\nb"] {
            assert!(check_value("model", bad).is_err(), "{bad:?}");
        }
    }
}
