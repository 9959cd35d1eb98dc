//! Checking what `start` receives before it reaches an agent's command line: the
//! choices an init param may take, values that become a flag's argument, the working
//! directory and the CLI to run. Every refusal is a [`SettingError`], which the bridge
//! receives as `INVALID_PARAMS` with a sentence for the user.

use std::path::PathBuf;
use std::time::Duration;

use crate::adapter::AdapterError;
use crate::detect::detect_cli;

/// Why an init param was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// Not one of the values the agent takes.
    #[error("unknown {what} `{value}` for {agent}; choose one of: {choices}{note}")]
    Unknown {
        /// The agent (`codex`).
        agent: &'static str,
        /// The setting (`permission mode`).
        what: &'static str,
        /// What was given.
        value: String,
        /// The values it may take, comma-separated.
        choices: String,
        /// More for the user, after the choices (may be empty).
        note: &'static str,
    },
    /// A value the command line cannot carry (empty, read as a flag, several lines, or
    /// not of the agent's shape).
    #[error("invalid {what} {value:?} for {agent}{note}")]
    Invalid {
        /// The agent.
        agent: &'static str,
        /// The setting (`model`, `session id`).
        what: &'static str,
        /// What was given.
        value: String,
        /// More for the user (may be empty).
        note: &'static str,
    },
}

impl From<SettingError> for AdapterError {
    fn from(e: SettingError) -> Self {
        AdapterError::invalid(e)
    }
}

/// The value of a setting that takes one of `choices` (name, value): `default` when
/// absent; an unknown name is refused with a sentence listing the names (and `note`).
pub fn choose<T: Copy>(
    agent: &'static str,
    what: &'static str,
    name: Option<&str>,
    default: T,
    choices: &[(&'static str, T)],
    note: &'static str,
) -> Result<T, SettingError> {
    let Some(name) = name else { return Ok(default) };
    choices.iter().find(|(n, _)| *n == name).map(|(_, v)| *v).ok_or_else(|| SettingError::Unknown {
        agent,
        what,
        value: name.to_owned(),
        choices: choices.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        note,
    })
}

/// Checks that `value` is one of `allowed`.
pub fn check_one_of(
    agent: &'static str,
    what: &'static str,
    value: &str,
    allowed: &[&'static str],
) -> Result<(), SettingError> {
    let choices: Vec<(&'static str, ())> = allowed.iter().map(|a| (*a, ())).collect();
    choose(agent, what, Some(value), (), &choices, "")
}

/// Checks an optional init param that takes one of `choices` as given (an agent's
/// own names, passed on as they are); absent stays absent.
pub fn check_choice(
    agent: &'static str,
    what: &'static str,
    value: Option<String>,
    choices: &[&'static str],
) -> Result<Option<String>, SettingError> {
    if let Some(v) = &value {
        check_one_of(agent, what, v, choices)?;
    }
    Ok(value)
}

/// Checks a value that goes into the command line as a flag's value (a model, a
/// session id): not empty, not starting with `-` (the agent would read a flag) and on
/// one line.
pub fn check_flag_value(agent: &'static str, what: &'static str, value: &str) -> Result<(), SettingError> {
    if value.trim().is_empty() || value.starts_with('-') || value.contains('\n') {
        Err(SettingError::Invalid { agent, what, value: value.to_owned(), note: "" })
    } else {
        Ok(())
    }
}

/// The session's working directory: the `cwd` init param (made absolute), or the
/// adapter's own; it must be a directory.
pub fn working_dir(cwd: Option<&str>) -> Result<PathBuf, AdapterError> {
    let cwd = match cwd {
        Some(cwd) => PathBuf::from(cwd),
        None => std::env::current_dir().map_err(|e| AdapterError::agent(format!("no working directory: {e}")))?,
    };
    let cwd = std::path::absolute(&cwd).unwrap_or(cwd);
    if !cwd.is_dir() {
        return Err(AdapterError::invalid(format!("the working directory {} is not a directory", cwd.display())));
    }
    Ok(cwd)
}

/// The agent CLI a session runs: the `binary` init param, or `default` when it is
/// absent or blank.
pub fn binary(given: Option<String>, default: &str) -> String {
    given.filter(|b| !b.trim().is_empty()).unwrap_or_else(|| default.to_owned())
}

/// The agent CLI to run as a path: the `binary` init param, else `name` found on
/// `PATH`; when it is not there, the error says to install `display_name`.
pub fn program_on_path(binary: Option<&str>, name: &str, display_name: &str) -> Result<PathBuf, AdapterError> {
    match binary.filter(|b| !b.trim().is_empty()) {
        Some(binary) => Ok(PathBuf::from(binary)),
        None => which::which(name).map_err(|_| {
            AdapterError::agent(format!(
                "`{name}` was not found on PATH; install {display_name} or give the path of its binary"
            ))
        }),
    }
}

/// Checks that `binary` runs (`<binary> --version`, at most `timeout`) and returns its
/// version line; when it does not, the error names `agent` and says why.
pub async fn require_cli(binary: &str, agent: &str, timeout: Duration) -> Result<Option<String>, AdapterError> {
    let detected = detect_cli(binary, timeout).await;
    if !detected.installed {
        let reason = detected.reason.unwrap_or_else(|| format!("`{binary}` cannot be run"));
        return Err(AdapterError::agent(format!("{agent} is not available: {reason}")));
    }
    Ok(detected.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_are_named_in_the_refusal() {
        let choices = [("read-only", 0), ("low", 1)];
        assert_eq!(choose("droid", "permission mode", None, 9, &choices, ""), Ok(9));
        assert_eq!(choose("droid", "permission mode", Some("low"), 9, &choices, ""), Ok(1));
        let refused = choose("droid", "permission mode", Some("max"), 9, &choices, " (note)").unwrap_err();
        assert_eq!(
            refused.to_string(),
            "unknown permission mode `max` for droid; choose one of: read-only, low (note)"
        );
        assert_eq!(AdapterError::from(refused).code, terminull_protocol::jsonrpc::codes::INVALID_PARAMS);
        let effort = check_one_of("pi", "effort", "huge", &["low", "high"]).unwrap_err();
        assert_eq!(effort.to_string(), "unknown effort `huge` for pi; choose one of: low, high");
        assert_eq!(check_choice("X", "m", Some("plan".into()), &["plan"]), Ok(Some("plan".into())));
        assert_eq!(check_choice("X", "m", None, &["plan"]), Ok(None));
        assert!(check_choice("X", "m", Some("yolo".into()), &["plan"]).is_err());
    }

    #[test]
    fn flag_values_must_not_look_like_flags() {
        assert!(check_flag_value("pi", "model", "anthropic/claude").is_ok());
        for bad in ["", "  ", "--yolo", "a\nb"] {
            let e = check_flag_value("pi", "model", bad).unwrap_err();
            assert_eq!(e.to_string(), format!("invalid model {bad:?} for pi"));
        }
    }

    #[test]
    fn the_working_directory_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(working_dir(Some(dir.path().to_str().unwrap())).unwrap(), dir.path());
        let gone = dir.path().join("gone");
        assert!(working_dir(Some(gone.to_str().unwrap())).unwrap_err().message.contains("is not a directory"));
        assert_eq!(binary(Some(" ".into()), "codex"), "codex");
        assert_eq!(binary(Some("/opt/codex".into()), "codex"), "/opt/codex");
        assert_eq!(program_on_path(Some("/opt/x"), "x", "X").unwrap(), PathBuf::from("/opt/x"));
        let missing = program_on_path(None, "surely-not-an-agent-cli", "Nothing").unwrap_err();
        assert!(missing.message.contains("install Nothing"), "{}", missing.message);
    }
}
