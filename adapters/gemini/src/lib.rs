//! The terminull adapter for [Gemini CLI](https://github.com/google-gemini/gemini-cli),
//! a thin profile on the ACP host (`terminull-acp`): it runs `gemini --acp --skip-trust`
//! and speaks the Agent Client Protocol with it. Why ACP and not `--output-format
//! stream-json`, and what is Gemini-specific, is written down in
//! `docs/adapters/gemini.md`.

#![warn(missing_docs)]

use std::ffi::OsString;
use terminull_acp::profile::{self, AcpProfile, AfterLoad, Launch, Settings, Via};
use terminull_adapter_sdk::prelude::*;

pub mod handoff;
mod repair;
mod store;

/// Gemini CLI's approval modes, as its ACP session modes name them.
pub const PERMISSION_MODES: &[&str] = &["default", "autoEdit", "yolo", "plan"];

/// The Gemini CLI profile.
#[derive(Debug)]
pub struct Gemini;

impl AcpProfile for Gemini {
    const AGENT_ID: &'static str = "gemini";
    const DISPLAY_NAME: &'static str = "Gemini CLI";
    const CLI_BINARY: Option<&'static str> = Some("gemini");
    const VERIFIED_AGAINST: Option<&'static str> = Some("0.61.0");
    // images: promptCapabilities: image, audio, embeddedContext.
    const CAPS: Caps = caps! {
        supported: [images, documents, thinking, permissions, interrupt],
        unsupported: [subagents, input_during_turn, terminal],
    };
    const PERMISSION_MODES: Option<&'static [&'static str]> = Some(PERMISSION_MODES);
    const REWRITE_THOUGHT: terminull_acp::mapping::ChunkRewrite = rewrite_thought;
    const HANDOFF_HOOKS: &'static [HandoffHook] = terminull_adapter_sdk::handoff::PERSISTENT_HOOKS;

    fn handoff() -> Option<impl Handoff> {
        Some(handoff::GeminiSessions)
    }

    /// Keeps Gemini CLI's `session/load` from wiping or orphaning the session's chat
    /// files ([`repair`]).
    fn prepare_load(cwd: &std::path::Path, session_id: &str) -> Option<AfterLoad> {
        let root = handoff::GeminiSessions::HOME.find()?;
        let (cwd, id) = (cwd.display().to_string(), session_id.to_owned());
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64();
        repair::before_load(&root, &cwd, &id, now);
        Some(Box::new(move || repair::remove_empty_files(&root, &cwd, &id)))
    }

    fn launch(settings: &Settings) -> Result<Launch, AdapterError> {
        let program = profile::program(settings, "gemini", "Gemini CLI")?;
        Ok(Launch { program, args: args(settings), env: env() })
    }

    /// The model is a command-line flag: Gemini CLI takes any model name there, while its
    /// ACP model list names only the ones it advertises.
    fn model_via(_: &str) -> Via {
        Via::CommandLine
    }
}

/// `gemini --acp --skip-trust [--model=<model>]`.
pub fn args(settings: &Settings) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--acp".into(), "--skip-trust".into()];
    if let Some(model) = &settings.model {
        args.push(format!("--model={model}").into());
    }
    args
}

/// `GEMINI_PTY_INFO=child_process`: Gemini CLI then finds no PTY and runs shell
/// commands as plain child processes. With a PTY (its default in `--acp` mode, where
/// `tools.shell.enableInteractiveShell` defaults to true) 0.61 keeps a command's output
/// as a terminal snapshot, which its ACP side cannot put in a tool call's content: the
/// call completes with `content: []` while the model gets the output. Without one, the
/// output is the call's text content, whatever the user's settings say. Nothing is lost:
/// over ACP nobody can type into an interactive command anyway.
pub fn env() -> Vec<(OsString, OsString)> {
    vec![("GEMINI_PTY_INFO".into(), "child_process".into())]
}

/// Gemini CLI sends each thought chunk as `**subject**\n` + the chunk's text, trimmed
/// (the subject empty after the first chunk of a thought). This rebuilds the thought:
/// a new subject starts a paragraph with it as a bold heading, the chunks of one
/// thought are joined with the space the trimming removed.
pub fn rewrite_thought(so_far: &str, chunk: &str) -> String {
    let (subject, body) = match chunk.strip_prefix("**").and_then(|rest| rest.split_once("**")) {
        Some((subject, body)) => (subject.trim(), body.trim_start_matches('\n')),
        None => ("", chunk),
    };
    let mut out = String::new();
    if !subject.is_empty() && last_subject(so_far) != Some(subject) {
        if !so_far.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&format!("**{subject}**\n"));
    } else if needs_space(so_far, body) {
        out.push(' ');
    }
    out.push_str(body);
    out
}

fn last_subject(text: &str) -> Option<&str> {
    text.lines().rev().map(str::trim).find_map(|l| l.strip_prefix("**").and_then(|l| l.strip_suffix("**")))
}

fn needs_space(before: &str, next: &str) -> bool {
    let (Some(last), Some(first)) = (before.chars().last(), next.chars().next()) else { return false };
    !last.is_whitespace()
        && !first.is_whitespace()
        && !matches!(first, '.' | ',' | ';' | ':' | '!' | '?' | ')' | ']' | '\'')
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn rebuild(chunks: &[&str]) -> String {
        let mut text = String::new();
        for chunk in chunks {
            let delta = rewrite_thought(&text, chunk);
            text.push_str(&delta);
        }
        text
    }

    #[test]
    fn thoughts_are_rebuilt_from_geminis_subject_and_trimmed_chunks() {
        assert_eq!(
            rebuild(&["****\nThe", "****\nuser", "****\nwants", "****\nme.", "****\nOk"]),
            "The user wants me. Ok"
        );
        assert_eq!(
            rebuild(&["**Planning**\nI will look", "****\nat it.", "**Running**\nNow run", "**Running**\nit"]),
            "**Planning**\nI will look at it.\n\n**Running**\nNow run it"
        );
        assert_eq!(rebuild(&["plain text", "more"]), "plain text more");
    }

    #[test]
    fn the_command_line_is_acp_mode_without_the_trust_prompt() {
        let settings = Settings {
            cwd: PathBuf::from("/"),
            binary: Some("/opt/gemini".into()),
            model: Some("gemini-2.5-flash".into()),
            permission_mode: None,
        };
        assert_eq!(args(&settings), ["--acp", "--skip-trust", "--model=gemini-2.5-flash"].map(OsString::from));
        assert_eq!(args(&Settings::default()), ["--acp", "--skip-trust"].map(OsString::from));
    }

    #[test]
    fn shell_commands_run_without_a_pty_so_their_output_reaches_the_call() {
        let launch = Gemini::launch(&Settings { binary: Some("/opt/gemini".into()), ..Settings::default() }).unwrap();
        assert_eq!(launch.env, [(OsString::from("GEMINI_PTY_INFO"), OsString::from("child_process"))]);
    }

    #[test]
    fn permission_modes_are_set_over_acp_and_the_model_on_the_command_line() {
        assert_eq!(Gemini::permission_mode_via("yolo"), Via::Acp("yolo".into()));
        assert_eq!(Gemini::model_via("gemini-2.5-pro"), Via::CommandLine);
    }
}
