//! The `codex` command line of one turn, built from the session's settings. Pure: no
//! I/O, so every flag is unit-tested here.
//!
//! First turn (no thread yet):
//!
//! ```text
//! codex exec --cd=<cwd> --sandbox=<mode> [--image=<file>]… --json --skip-git-repo-check
//!       -c approval_policy="never" [--model=<model>] [-c model_reasoning_effort="<effort>"] -- <prompt>
//! ```
//!
//! Later turns (a thread id is known from `thread.started` or from `resume_session_id`):
//!
//! ```text
//! codex exec --cd=<cwd> --sandbox=<mode> resume [--image=<file>]… --json --skip-git-repo-check
//!       -c approval_policy="never" [--model=<model>] [-c …] <thread_id> -- <prompt>
//! ```
//!
//! Why this shape (checked against codex 0.171.0):
//! - `--cd` and `--sandbox` exist on `codex exec` only; `codex exec resume` refuses them,
//!   but takes them from its parent when they come before the subcommand (the run's
//!   `<cwd>` and `sandbox_mode` in the model's context follow them on resume too).
//! - Values are attached with `=` so that a model name or path beginning with `-` is
//!   never read as a flag.
//! - `--image` takes several values on `codex exec`, so images come before other flags
//!   and never right before a positional argument.
//! - `--` ends the options, so a prompt beginning with `-` is the prompt. A prompt that
//!   is exactly `-` would make codex read the prompt from stdin (which the adapter
//!   closes), so it is sent as ` -`.
//! - `approval_policy="never"`: `codex exec` has no way to ask the user, so it must
//!   never wait for an approval; the sandbox mode is the only permission control.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use terminull_adapter_sdk::settings::{SettingError, choose};

/// How much the agent may do, chosen per session (init param `permission_mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PermissionMode {
    /// `read-only`: commands may read files only (`--sandbox=read-only`).
    ReadOnly,
    /// `workspace-write`: commands may write inside the working directory (and temp
    /// dirs), no network (`--sandbox=workspace-write`). The default.
    #[default]
    WorkspaceWrite,
    /// `ask`: commands may write inside the working directory, and codex asks before
    /// running any command it does not know to be safe and before applying a patch
    /// (approval policy `untrusted`). With the `codex exec` fallback, which cannot ask,
    /// it runs read-only.
    Ask,
    /// `full-access`: no sandbox at all (`--sandbox=danger-full-access`).
    FullAccess,
}

impl PermissionMode {
    /// Every mode's name, as `permission_mode` spells it.
    pub const NAMES: [&'static str; 4] = ["read-only", "workspace-write", "ask", "full-access"];

    /// The mode for a `permission_mode` value; absent means the default. An unknown
    /// name is refused with a sentence listing the choices.
    pub fn parse(name: Option<&str>) -> Result<Self, SettingError> {
        let choices = [
            ("read-only", Self::ReadOnly),
            ("workspace-write", Self::WorkspaceWrite),
            ("ask", Self::Ask),
            ("full-access", Self::FullAccess),
        ];
        choose("codex", "permission mode", name, Self::default(), &choices, "")
    }

    /// The value of codex's `--sandbox` for `codex exec` (which cannot ask: `ask` runs
    /// read-only there).
    pub fn sandbox(self) -> &'static str {
        match self {
            PermissionMode::ReadOnly | PermissionMode::Ask => "read-only",
            PermissionMode::WorkspaceWrite => "workspace-write",
            PermissionMode::FullAccess => "danger-full-access",
        }
    }

    /// The app-server thread's `sandbox`.
    pub fn app_sandbox(self) -> &'static str {
        match self {
            PermissionMode::ReadOnly => "read-only",
            PermissionMode::WorkspaceWrite | PermissionMode::Ask => "workspace-write",
            PermissionMode::FullAccess => "danger-full-access",
        }
    }

    /// The app-server thread's `approvalPolicy`: `on-request` (codex asks when it wants
    /// to leave the sandbox), `untrusted` for `ask`, `never` without a sandbox.
    pub fn approval_policy(self) -> &'static str {
        match self {
            PermissionMode::ReadOnly | PermissionMode::WorkspaceWrite => "on-request",
            PermissionMode::Ask => "untrusted",
            PermissionMode::FullAccess => "never",
        }
    }
}

/// Checks a reasoning effort before it goes into `-c model_reasoning_effort="…"`:
/// 1–32 of `a-z A-Z 0-9 _ -` (codex knows `minimal`, `low`, `medium`, `high`, `xhigh`;
/// the set changes between versions, so only the shape is checked here).
pub fn check_effort(effort: &str) -> Result<(), SettingError> {
    let ok =
        (1..=32).contains(&effort.len()) && effort.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        let note = " (expected e.g. low, medium, high)";
        Err(SettingError::Invalid { agent: "codex", what: "reasoning effort", value: effort.to_owned(), note })
    }
}

/// What every turn's command line is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The working directory (`--cd`, and the process's current directory).
    pub cwd: PathBuf,
    /// The model (`--model`), when chosen.
    pub model: Option<String>,
    /// The reasoning effort (`-c model_reasoning_effort`), when chosen; checked by
    /// [`check_effort`].
    pub effort: Option<String>,
    /// The sandbox.
    pub mode: PermissionMode,
}

/// A TOML basic string for a `-c key=value` override. JSON string escapes (`\"`, `\\`,
/// `\n`, `\uXXXX`) are all valid TOML, so serde_json's encoding is used.
fn toml_string(value: &str) -> String {
    serde_json::Value::String(value.to_owned()).to_string()
}

fn attached(flag: &str, value: impl AsRef<std::ffi::OsStr>) -> OsString {
    let mut arg = OsString::from(flag);
    arg.push("=");
    arg.push(value);
    arg
}

/// The arguments after the program name for one turn: a new thread when `thread_id`
/// is `None`, else a resume of that thread. `images` are files to attach.
pub fn turn_args(settings: &Settings, thread_id: Option<&str>, prompt: &str, images: &[&Path]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["exec".into()];
    args.push(attached("--cd", &settings.cwd));
    args.push(attached("--sandbox", settings.mode.sandbox()));
    if thread_id.is_some() {
        args.push("resume".into());
    }
    for image in images {
        args.push(attached("--image", image));
    }
    args.push("--json".into());
    args.push("--skip-git-repo-check".into());
    args.push("-c".into());
    args.push(format!("approval_policy={}", toml_string("never")).into());
    if let Some(model) = &settings.model {
        args.push(attached("--model", model));
    }
    if let Some(effort) = &settings.effort {
        args.push("-c".into());
        args.push(format!("model_reasoning_effort={}", toml_string(effort)).into());
    }
    if let Some(thread_id) = thread_id {
        args.push(thread_id.into());
    }
    args.push("--".into());
    args.push(if prompt == "-" { " -".into() } else { prompt.into() });
    args
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

    /// (name, settings, thread to resume, prompt, images, expected argv)
    type ArgvCase<'a> = (&'a str, Settings, Option<&'a str>, &'a str, Vec<&'a Path>, Vec<&'a str>);

    #[test]
    fn argv_table() {
        let full = Settings {
            model: Some("gpt-5-codex".into()),
            effort: Some("high".into()),
            mode: PermissionMode::ReadOnly,
            ..settings()
        };
        let png = Path::new("/tmp/x/1.png");
        let jpg = Path::new("/tmp/x/2.jpg");
        #[rustfmt::skip]
        let cases: Vec<ArgvCase<'_>> = vec![
            ("first turn, defaults", settings(), None, "hello", vec![], vec![
                "exec", "--cd=/w/shop", "--sandbox=workspace-write", "--json", "--skip-git-repo-check",
                "-c", "approval_policy=\"never\"", "--", "hello"]),
            ("resume, defaults", settings(), Some("01a2-t"), "again", vec![], vec![
                "exec", "--cd=/w/shop", "--sandbox=workspace-write", "resume", "--json", "--skip-git-repo-check",
                "-c", "approval_policy=\"never\"", "01a2-t", "--", "again"]),
            ("first turn, every option", full.clone(), None, "p", vec![png, jpg], vec![
                "exec", "--cd=/w/shop", "--sandbox=read-only", "--image=/tmp/x/1.png", "--image=/tmp/x/2.jpg",
                "--json", "--skip-git-repo-check", "-c", "approval_policy=\"never\"", "--model=gpt-5-codex",
                "-c", "model_reasoning_effort=\"high\"", "--", "p"]),
            ("resume, every option", full, Some("t"), "p", vec![png], vec![
                "exec", "--cd=/w/shop", "--sandbox=read-only", "resume", "--image=/tmp/x/1.png",
                "--json", "--skip-git-repo-check", "-c", "approval_policy=\"never\"", "--model=gpt-5-codex",
                "-c", "model_reasoning_effort=\"high\"", "t", "--", "p"]),
            ("full access", Settings { mode: PermissionMode::FullAccess, ..settings() }, None, "p", vec![], vec![
                "exec", "--cd=/w/shop", "--sandbox=danger-full-access", "--json", "--skip-git-repo-check",
                "-c", "approval_policy=\"never\"", "--", "p"]),
            ("prompt starting with a dash stays after --", settings(), None, "--help me", vec![], vec![
                "exec", "--cd=/w/shop", "--sandbox=workspace-write", "--json", "--skip-git-repo-check",
                "-c", "approval_policy=\"never\"", "--", "--help me"]),
            ("a lone dash is not read as stdin", settings(), Some("t"), "-", vec![], vec![
                "exec", "--cd=/w/shop", "--sandbox=workspace-write", "resume", "--json", "--skip-git-repo-check",
                "-c", "approval_policy=\"never\"", "t", "--", " -"]),
            ("model starting with a dash stays attached", Settings { model: Some("-m".into()), ..settings() }, None, "p", vec![], vec![
                "exec", "--cd=/w/shop", "--sandbox=workspace-write", "--json", "--skip-git-repo-check",
                "-c", "approval_policy=\"never\"", "--model=-m", "--", "p"]),
        ];
        for (name, s, thread, prompt, images, want) in cases {
            assert_eq!(strings(turn_args(&s, thread, prompt, &images)), want, "{name}");
        }
    }

    #[test]
    fn permission_modes() {
        let cases = [
            (None, Ok("workspace-write")),
            (Some("read-only"), Ok("read-only")),
            (Some("workspace-write"), Ok("workspace-write")),
            (Some("ask"), Ok("read-only")),
            (Some("full-access"), Ok("danger-full-access")),
        ];
        for (name, want) in cases {
            assert_eq!(
                PermissionMode::parse(name).map(PermissionMode::sandbox).map_err(|e| e.to_string()),
                want.map_err(|e: &str| e.to_owned())
            );
        }
        let err = PermissionMode::parse(Some("yolo")).unwrap_err().to_string();
        assert!(err.contains("`yolo`") && err.contains("read-only, workspace-write, ask, full-access"), "{err}");
        assert!(PermissionMode::parse(Some("danger-full-access")).is_err(), "only the adapter's names are accepted");
        let app = |m: PermissionMode| (m.app_sandbox(), m.approval_policy());
        assert_eq!(app(PermissionMode::ReadOnly), ("read-only", "on-request"));
        assert_eq!(app(PermissionMode::WorkspaceWrite), ("workspace-write", "on-request"));
        assert_eq!(app(PermissionMode::Ask), ("workspace-write", "untrusted"));
        assert_eq!(app(PermissionMode::FullAccess), ("danger-full-access", "never"));
    }

    #[test]
    fn efforts() {
        for ok in ["low", "medium", "high", "xhigh", "minimal", "very_high-2"] {
            assert_eq!(check_effort(ok), Ok(()), "{ok}");
        }
        for bad in ["", "high\"", "a b", "hi\ngh", &"x".repeat(33)] {
            assert!(check_effort(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn toml_strings_are_escaped() {
        assert_eq!(toml_string("a\"b\\c\n"), r#""a\"b\\c\n""#);
    }
}
