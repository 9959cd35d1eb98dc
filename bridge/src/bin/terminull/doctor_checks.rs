//! The checks of `terminull doctor`, each a finding with a plain fix. None of them
//! changes anything: the home, its lock and its socket are only looked at.

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use terminull_bridge::home::{Config, Home};
use terminull_bridge::registry::{self, ScanOptions, Source};
use terminull_protocol::relay::DeviceRecord;

/// How long a network probe (LAN port, relay) may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Clock skew against the relay beyond which pairing offers and tickets misbehave.
const MAX_SKEW_SECS: i64 = 60;

/// Most files with loose permissions listed one by one.
const MAX_LOOSE_FILES: usize = 10;

/// A finding's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// Fine.
    Ok,
    /// Works, but something is missing or worth knowing.
    Warn,
    /// Broken: `doctor` exits non-zero.
    Fail,
    /// Not checked (not configured, or depends on something missing).
    Skip,
}

/// One finding, as `doctor --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    /// The area: `agents`, `home`, `daemon`, `socket`, `lan`, `relay`, `clock`, `devices`.
    pub(crate) area: &'static str,
    /// The outcome.
    pub(crate) status: Status,
    /// What was found, in one sentence.
    pub(crate) message: String,
    /// What to do about it (failures and warnings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fix: Option<String>,
}

impl Check {
    fn new(area: &'static str, status: Status, message: impl Into<String>, fix: Option<String>) -> Self {
        Self { area, status, message: message.into(), fix }
    }
}

/// How to install an agent's CLI (docs/agents.md says more).
fn install_hint(agent_id: &str) -> String {
    let how = match agent_id {
        "claude-code" => "`npm install -g @anthropic-ai/claude-code`",
        "codex" => "`npm install -g @openai/codex`",
        "gemini" => "`npm install -g @google/gemini-cli`",
        "pi" => "`npm install -g @mariozechner/pi-coding-agent`",
        "opencode" => "`npm install -g opencode-ai`",
        "kilo" => "`npm install -g @kilocode/cli`",
        "qwen" => "`npm install -g @qwen-code/qwen-code`",
        "copilot" => "`npm install -g @github/copilot`",
        _ => "its vendor's installer (docs/agents.md)",
    };
    format!(
        "install the CLI with {how}, on the PATH the daemon runs with (`terminull service install` records \
         the current PATH), then check with `terminull agents`; or ignore this if you do not use {agent_id}"
    )
}

/// The adapters: every built-in found next to terminull or on PATH, each agent's CLI
/// and version, and the adapters refused.
pub(crate) async fn agents(home: &Home, config: &Config) -> Vec<Check> {
    let mut out = Vec::new();
    let missing: Vec<_> = crate::version::found_adapters().into_iter().filter(|a| a.path.is_none()).collect();
    if !missing.is_empty() {
        let names: Vec<_> = missing.iter().map(|a| a.executable).collect();
        out.push(Check::new(
            "agents",
            Status::Warn,
            format!("built-in adapters not found next to terminull nor on PATH: {}", names.join(", ")),
            Some("install every binary together: `scripts/install.sh` (docs/install.md)".to_owned()),
        ));
    }
    let registry = registry::scan(&ScanOptions::new(home.clone(), config.clone())).await;
    let mut usable = 0;
    for agent in &registry.agents {
        let id = agent.declaration.agent_id.as_str();
        let d = &agent.detected;
        let from = match &agent.source {
            Source::BuiltIn { .. } => "built-in",
            Source::DropIn { .. } => "drop-in",
            Source::AcpConfig { .. } => "config.toml ACP agent",
        };
        if d.installed {
            if id != "echo" {
                usable += 1;
            }
            let version = d.version.clone().unwrap_or_else(|| "installed".to_owned());
            let at = d.path.as_deref().map(|p| format!(" at {p}")).unwrap_or_default();
            out.push(Check::new("agents", Status::Ok, format!("{id} ({from}): {version}{at}"), None));
        } else {
            let why = d.reason.as_deref().unwrap_or("not installed");
            out.push(Check::new(
                "agents",
                Status::Warn,
                format!("{id} ({from}): its CLI is missing: {why}"),
                Some(install_hint(id)),
            ));
        }
    }
    for r in &registry.refused {
        out.push(Check::new(
            "agents",
            Status::Fail,
            format!("{} adapter {} refused: {}", r.kind, r.path.display(), r.reason),
            Some("fix or remove it as the reason says; `terminull agents` shows the same".to_owned()),
        ));
    }
    if usable == 0 {
        out.push(Check::new(
            "agents",
            Status::Warn,
            "no agent besides the built-in echo is usable",
            Some("install an agent's CLI (docs/agents.md lists them), then `terminull agents`".to_owned()),
        ));
    }
    out
}

/// The home: present, the user's and not writable by others, its state private, its
/// configuration valid. Returns the configuration when it parses.
pub(crate) fn home(home: &Home) -> (Vec<Check>, Option<Config>) {
    let root = home.root();
    let mut out = Vec::new();
    if !root.exists() {
        out.push(Check::new(
            "home",
            Status::Warn,
            format!("{} does not exist yet", root.display()),
            Some("`terminull up` (or `terminull service install`) creates it".to_owned()),
        ));
        return (out, Some(Config::default()));
    }
    match terminull_bridge::home_guard::check_strict(root, None) {
        Ok(()) => out.push(Check::new(
            "home",
            Status::Ok,
            format!("{} is yours and not writable by others", root.display()),
            None,
        )),
        Err(why) => out.push(Check::new(
            "home",
            Status::Fail,
            why,
            Some(format!("`chown $USER {0} && chmod 700 {0}`", root.display())),
        )),
    }
    let loose = loose_paths(root, &home.ext_adapters());
    for (path, mode) in loose.iter().take(MAX_LOOSE_FILES) {
        let secret = is_secret(home, path);
        let what = if secret { "holds secret keys and " } else { "" };
        let target = if path.is_dir() { 0o700 } else { 0o600 };
        out.push(Check::new(
            "home",
            Status::Fail,
            format!("{} {what}is readable by group or others (mode {:o})", path.display(), mode & 0o7777),
            Some(format!(
                "`chmod {target:o} {}` (`terminull up` also makes the home private when it starts)",
                path.display()
            )),
        ));
    }
    if loose.len() > MAX_LOOSE_FILES {
        out.push(Check::new(
            "home",
            Status::Fail,
            format!(
                "{} more paths in {} are readable by group or others",
                loose.len() - MAX_LOOSE_FILES,
                root.display()
            ),
            Some(format!("`chmod -R go-rwx {}`", root.display())),
        ));
    }
    if loose.is_empty() {
        out.push(Check::new("home", Status::Ok, "the state in the home is private (mode 0600/0700)", None));
    }
    let config = match home.load_config() {
        Ok(config) => {
            out.push(Check::new("home", Status::Ok, format!("{} is valid", home.config_file().display()), None));
            Some(config)
        }
        Err(e) => {
            out.push(Check::new(
                "home",
                Status::Fail,
                e.to_string(),
                Some("correct the file as the message says (docs/bridge.md lists its keys)".to_owned()),
            ));
            None
        }
    };
    (out, config)
}

fn is_secret(home: &Home, path: &Path) -> bool {
    path == home.identity_file() || path == home.devices_file() || path.starts_with(home.device_dir())
}

/// Paths under `root` (itself included) that group or others may use, with their modes;
/// `skip` (drop-ins, checked by the registry) and symbolic links are left out. Bounded walk.
fn loose_paths(root: &Path, skip: &Path) -> Vec<(PathBuf, u32)> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    let mut visited = 0usize;
    while let Some(path) = pending.pop() {
        visited += 1;
        if path == skip || visited > 100_000 {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.file_type().is_symlink() || meta.file_type().is_socket() {
            continue;
        }
        if meta.mode() & 0o077 != 0 {
            found.push((path.clone(), meta.mode()));
        }
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            pending.extend(entries.filter_map(Result::ok).map(|e| e.path()));
        }
    }
    found.sort();
    found
}

/// Whether a daemon holds the home's lock: `Some(holder line)` when one does.
fn lock_holder(home: &Home) -> Option<String> {
    let path = terminull_bridge::home_guard::lock_file(home);
    let file = std::fs::File::open(&path).ok()?;
    match file.try_lock_shared() {
        Ok(()) => None,
        Err(std::fs::TryLockError::WouldBlock) => {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let line: String =
                text.lines().next().unwrap_or("").chars().filter(|c| !c.is_control()).take(200).collect();
            Some(if line.is_empty() { "a process".to_owned() } else { line })
        }
        Err(std::fs::TryLockError::Error(_)) => None,
    }
}

/// The daemon and its socket: running or not, a socket that answers, one left over by a
/// daemon that was killed. Returns whether a daemon answers.
pub(crate) async fn socket(home: &Home) -> (Vec<Check>, bool) {
    let path = home.socket();
    let holder = lock_holder(home);
    let shown = path.display();
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(_) => {
            let check = match &holder {
                Some(h) => Check::new(
                    "socket",
                    Status::Fail,
                    format!("a daemon holds the home ({h}) but {shown} does not exist"),
                    Some(
                        "restart it: stop that process, then `terminull up` (or `terminull service status`)".to_owned(),
                    ),
                ),
                None => Check::new(
                    "daemon",
                    Status::Warn,
                    "no daemon is running for this home",
                    Some(
                        "start it: `terminull up` in a terminal, or `terminull service install` to keep it running"
                            .to_owned(),
                    ),
                ),
            };
            return (vec![check], false);
        }
    };
    if !meta.file_type().is_socket() {
        let check = Check::new(
            "socket",
            Status::Fail,
            format!("{shown} exists but is not a socket"),
            Some(format!("remove it: `rm {shown}`, then `terminull up`")),
        );
        return (vec![check], false);
    }
    let connected =
        tokio::time::timeout(PROBE_TIMEOUT, tokio::net::UnixStream::connect(&path)).await.is_ok_and(|r| r.is_ok());
    let mut out = Vec::new();
    match (connected, &holder) {
        (true, _) => out.push(Check::new(
            "daemon",
            Status::Ok,
            format!(
                "the daemon answers on {shown}{}",
                holder.as_deref().map(|h| format!(" ({h})")).unwrap_or_default()
            ),
            None,
        )),
        (false, None) => out.push(Check::new(
            "socket",
            Status::Fail,
            format!("{shown} is left over from a daemon that did not stop cleanly (killed?): nothing answers on it"),
            Some(format!(
                "start the daemon again: `terminull up` replaces the stale socket (or remove it: `rm {shown}`)"
            )),
        )),
        (false, Some(h)) => out.push(Check::new(
            "socket",
            Status::Fail,
            format!("a daemon holds the home ({h}) but does not answer on {shown}"),
            Some(
                "restart it: stop that process (or `systemctl --user restart terminull`), then `terminull up`"
                    .to_owned(),
            ),
        )),
    }
    if meta.mode() & 0o077 != 0 {
        out.push(Check::new(
            "socket",
            Status::Fail,
            format!("{shown} can be opened by group or others (mode {:o})", meta.mode() & 0o7777),
            Some(format!("`chmod 600 {shown}`; a daemon makes it 0600 when it binds it")),
        ));
    }
    (out, connected)
}

/// The LAN server's port answers on loopback, when the daemon serves one.
pub(crate) async fn lan(home: &Home, config: &Config, daemon_up: bool) -> Vec<Check> {
    let from_daemon = std::fs::read_to_string(home.lan_url_file()).ok();
    let port = from_daemon
        .as_deref()
        .and_then(|url| url.trim().rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse::<u16>().ok()))
        .or_else(|| config.lan.as_ref().and_then(|l| l.listen.parse::<std::net::SocketAddr>().ok()).map(|a| a.port()));
    let Some(port) = port else {
        return vec![Check::new("lan", Status::Skip, "no LAN server configured (`terminull up --lan`, `[lan]`)", None)];
    };
    if !daemon_up {
        return vec![Check::new(
            "lan",
            Status::Skip,
            format!("LAN port {port} not probed: no daemon is running"),
            None,
        )];
    }
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    match tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => vec![Check::new("lan", Status::Ok, format!("the LAN server answers on {addr}"), None)],
        Ok(Err(e)) => vec![Check::new(
            "lan",
            Status::Fail,
            format!("the LAN server does not answer on {addr}: {e}"),
            Some(
                "look at the daemon's log (`terminull service logs`): the port may be taken; set `[lan] listen`"
                    .to_owned(),
            ),
        )],
        Err(_) => vec![Check::new(
            "lan",
            Status::Fail,
            format!("the LAN server on {addr} did not answer within {}s", PROBE_TIMEOUT.as_secs()),
            Some("a firewall may drop it, or the daemon is stuck: restart it".to_owned()),
        )],
    }
}

/// The relay answers `/healthz`, and this machine's clock agrees with its `Date` header.
pub(crate) async fn relay(config: &Config) -> Vec<Check> {
    let Some(url) = config.relay.as_ref().map(|r| r.url.clone()) else {
        return vec![
            Check::new("relay", Status::Skip, "no relay configured (`[relay] url`)", None),
            Check::new("clock", Status::Skip, "clock not compared: no relay configured", None),
        ];
    };
    match probe_relay(&url).await {
        Ok((status, date)) if (200..300).contains(&status) => {
            let mut out = vec![Check::new("relay", Status::Ok, format!("{url} answers /healthz"), None)];
            out.push(clock(date.as_deref(), &url));
            out
        }
        Ok((status, date)) => vec![
            Check::new(
                "relay",
                Status::Fail,
                format!("{url} answered /healthz with HTTP {status}"),
                Some("check `[relay] url` in config.toml: it must be a terminull relay's base URL".to_owned()),
            ),
            clock(date.as_deref(), &url),
        ],
        Err(e) => vec![
            Check::new(
                "relay",
                Status::Fail,
                format!("cannot reach the relay {url}: {e}"),
                Some("check the network and `[relay] url` in config.toml; devices on the LAN still work".to_owned()),
            ),
            Check::new("clock", Status::Skip, "clock not compared: the relay did not answer", None),
        ],
    }
}

fn clock(date: Option<&str>, url: &str) -> Check {
    let Some(theirs) = date.and_then(parse_http_date) else {
        return Check::new("clock", Status::Skip, format!("{url} sent no usable Date header"), None);
    };
    let ours = terminull_bridge::devices::unix_now() as i64;
    let skew = ours - theirs;
    if skew.abs() <= MAX_SKEW_SECS {
        Check::new("clock", Status::Ok, format!("clock within {}s of the relay's", skew.abs()), None)
    } else {
        Check::new(
            "clock",
            Status::Fail,
            format!("this clock is {}s {} the relay's", skew.abs(), if skew > 0 { "ahead of" } else { "behind" }),
            Some("turn on time sync: `timedatectl set-ntp true` (Linux) or Date & Time settings (macOS)".to_owned()),
        )
    }
}

/// `GET /healthz` on the relay: the status and the `Date` header.
async fn probe_relay(url: &str) -> Result<(u16, Option<String>), String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (endpoint, mut stream) = terminull_net::transport::connect(url).await.map_err(|e| e.to_string())?;
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: {}\r\nUser-Agent: terminull-doctor\r\nConnection: close\r\n\r\n",
        endpoint.host
    );
    let exchange = async {
        stream.write_all(request.as_bytes()).await?;
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        // The head only: 16 KiB is plenty, and bounds what a hostile server makes us keep.
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(head)
    };
    let head = tokio::time::timeout(PROBE_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer within {}s", PROBE_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| "the answer is not HTTP".to_owned())?;
    let date = lines.take_while(|l| !l.is_empty()).find_map(|l| {
        l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("date")).map(|(_, v)| v.trim().to_owned())
    });
    Ok((status, date))
}

/// The paired devices.
pub(crate) fn devices(home: &Home) -> Vec<Check> {
    let path = home.devices_file();
    match terminull_net::private_file::read_json::<Vec<DeviceRecord>>(&path) {
        Ok(list) => {
            let active: Vec<_> = list.unwrap_or_default().into_iter().filter(|d| !d.revoked).collect();
            if active.is_empty() {
                vec![Check::new(
                    "devices",
                    Status::Warn,
                    "no device is paired",
                    Some("pair your phone: `terminull pair` and open the link it shows".to_owned()),
                )]
            } else {
                let names: Vec<_> = active.iter().map(|d| d.name.as_str()).collect();
                vec![Check::new("devices", Status::Ok, format!("{} paired: {}", active.len(), names.join(", ")), None)]
            }
        }
        Err(e) => vec![Check::new(
            "devices",
            Status::Fail,
            format!("cannot read the paired devices: {e}"),
            Some(format!("restore {} from a backup, or move it away and pair again", path.display())),
        )],
    }
}

/// An HTTP `Date` (RFC 9110 IMF-fixdate, `Wed, 02 Dec 2026 01:22:06 GMT`) as Unix seconds.
pub(crate) fn parse_http_date(text: &str) -> Option<i64> {
    let mut parts = text.split_whitespace().skip(1);
    let day: i64 = parts.next()?.parse().ok()?;
    let month = parts.next()?;
    let year: i64 = parts.next()?.parse().ok()?;
    let time = parts.next()?;
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|m| m.eq_ignore_ascii_case(month))? as i64 + 1;
    let mut hms = time.split(':').map(|v| v.parse::<i64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if !(1..=31).contains(&day) || !(0..24).contains(&h) || !(0..60).contains(&m) || !(0..=60).contains(&s) {
        return None;
    }
    // Days from 1970-01-01 to the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::parse_http_date;

    #[test]
    fn http_dates_parse_to_unix_seconds_and_garbage_does_not() {
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse_http_date("Wed, 02 Dec 2026 01:22:06 GMT"), Some(1_796_174_526));
        assert_eq!(parse_http_date("Tue, 29 Feb 2028 12:00:00 GMT"), Some(1_835_438_400));
        assert_eq!(parse_http_date("yesterday"), None);
        assert_eq!(parse_http_date("Wed, 02 Foo 2026 01:22:06 GMT"), None);
        assert_eq!(parse_http_date("Wed, 02 Dec 2026 25:22:06 GMT"), None);
    }
}
