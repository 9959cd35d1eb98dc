//! The files `terminull service install` writes: a systemd user unit (Linux) and a
//! launchd agent property list (macOS), both running `terminull up` in the background,
//! restarted when it fails. Pure text generation, so any OS can print either one.

use std::path::{Path, PathBuf};

/// The systemd unit's name.
pub(crate) const SYSTEMD_UNIT: &str = "terminull.service";

/// The launchd agent's label (and its plist's file name, plus `.plist`).
pub(crate) const LAUNCHD_LABEL: &str = "dev.terminull.bridge";

/// What the service runs and with which environment.
#[derive(Debug, Clone)]
pub(crate) struct ServiceSpec {
    /// The `terminull` executable (absolute).
    pub(crate) exe: PathBuf,
    /// The bridge's home (absolute), passed as `--home`.
    pub(crate) home: PathBuf,
    /// Extra arguments of `terminull up` (`--relay URL`, `--lan ADDR`).
    pub(crate) up_args: Vec<String>,
    /// The PATH the daemon gets: the one `service install` ran with, so the agents'
    /// CLIs found in the terminal are found by the service too.
    pub(crate) path_env: String,
    /// Where launchd writes the daemon's output (systemd uses the journal).
    pub(crate) log_file: PathBuf,
}

impl ServiceSpec {
    /// The daemon's command line.
    pub(crate) fn argv(&self) -> Vec<String> {
        let mut argv =
            vec![self.exe.display().to_string(), "up".to_owned(), "--home".to_owned(), self.home.display().to_string()];
        argv.extend(self.up_args.iter().cloned());
        argv
    }
}

/// One word of a systemd command line or assignment: `%` and `$` doubled (specifiers and
/// variable expansion), quoted when it holds spaces, quotes or backslashes.
fn systemd_word(word: &str) -> String {
    let escaped = word.replace('%', "%%").replace('$', "$$");
    if !escaped.is_empty() && !escaped.chars().any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';')) {
        return escaped;
    }
    let mut out = String::from("\"");
    for c in escaped.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The systemd user unit.
pub(crate) fn systemd_unit(spec: &ServiceSpec) -> String {
    let exec: Vec<String> = spec.argv().iter().map(|w| systemd_word(w)).collect();
    format!(
        "# Written by `terminull service install`; remove with `terminull service uninstall`.\n\
         [Unit]\n\
         Description=terminull bridge: runs AI coding agents for your paired devices\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={}\n\
         Environment={}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         # Stops sessions cleanly on SIGTERM; after this, SIGKILL.\n\
         TimeoutStopSec=30\n\
         StandardOutput=journal\n\
         StandardError=journal\n\
         SyslogIdentifier=terminull\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exec.join(" "),
        systemd_word(&format!("PATH={}", spec.path_env)),
    )
}

fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Not allowed in XML 1.0 at all: dropped rather than producing an invalid plist.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// The launchd agent's property list.
pub(crate) fn launchd_plist(spec: &ServiceSpec) -> String {
    let args: String = spec.argv().iter().map(|a| format!("        <string>{}</string>\n", xml_escape(a))).collect();
    let log = xml_escape(&spec.log_file.display().to_string());
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20   <key>Label</key>\n\
         \x20   <string>{LAUNCHD_LABEL}</string>\n\
         \x20   <key>ProgramArguments</key>\n\
         \x20   <array>\n\
         {args}\
         \x20   </array>\n\
         \x20   <key>EnvironmentVariables</key>\n\
         \x20   <dict>\n\
         \x20       <key>PATH</key>\n\
         \x20       <string>{}</string>\n\
         \x20   </dict>\n\
         \x20   <key>RunAtLoad</key>\n\
         \x20   <true/>\n\
         \x20   <key>KeepAlive</key>\n\
         \x20   <dict>\n\
         \x20       <key>SuccessfulExit</key>\n\
         \x20       <false/>\n\
         \x20   </dict>\n\
         \x20   <key>ThrottleInterval</key>\n\
         \x20   <integer>5</integer>\n\
         \x20   <key>ProcessType</key>\n\
         \x20   <string>Background</string>\n\
         \x20   <key>StandardOutPath</key>\n\
         \x20   <string>{log}</string>\n\
         \x20   <key>StandardErrorPath</key>\n\
         \x20   <string>{log}</string>\n\
         </dict>\n\
         </plist>\n",
        xml_escape(&spec.path_env),
    )
}

/// `$XDG_CONFIG_HOME/systemd/user/terminull.service` (default `~/.config/...`).
pub(crate) fn systemd_unit_path(user_home: &Path) -> PathBuf {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty() && Path::new(v).is_absolute())
        .map(PathBuf::from)
        .unwrap_or_else(|| user_home.join(".config"));
    config.join("systemd/user").join(SYSTEMD_UNIT)
}

/// `~/Library/LaunchAgents/dev.terminull.bridge.plist`.
pub(crate) fn launchd_plist_path(user_home: &Path) -> PathBuf {
    user_home.join("Library/LaunchAgents").join(format!("{LAUNCHD_LABEL}.plist"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(exe: &str) -> ServiceSpec {
        ServiceSpec {
            exe: PathBuf::from(exe),
            home: PathBuf::from("/home/a b/.terminull"),
            up_args: vec!["--relay".into(), "wss://relay.example/x?a=1&b=2".into()],
            path_env: "/usr/bin:/opt/100%".into(),
            log_file: PathBuf::from("/tmp/log"),
        }
    }

    #[test]
    fn unit_words_with_spaces_percent_and_dollar_are_quoted_and_escaped() {
        let unit = systemd_unit(&spec("/opt/$HOME/terminull"));
        assert!(unit.contains("ExecStart=/opt/$$HOME/terminull up --home \"/home/a b/.terminull\" --relay"), "{unit}");
        assert!(unit.contains("Environment=PATH=/usr/bin:/opt/100%%\n"), "{unit}");
        assert!(unit.contains("Restart=on-failure\n"), "{unit}");
    }

    #[test]
    fn plist_escapes_ampersands_and_drops_control_characters() {
        let plist = launchd_plist(&spec("/usr/bin/terminull\u{1}"));
        assert!(plist.contains("<string>wss://relay.example/x?a=1&amp;b=2</string>"), "{plist}");
        assert!(plist.contains("<string>/usr/bin/terminull</string>"), "{plist}");
    }
}
