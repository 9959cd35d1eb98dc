//! `terminull`: the bridge's command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use terminull_adapter_check::conformance::{CheckOptions, check_adapter};
use terminull_adapter_check::recording;
use terminull_bridge::chat::{self, ChatOptions, PermissionAnswer};
use terminull_bridge::daemon_client::Client;
use terminull_bridge::home::Home;
use terminull_bridge::local;
use terminull_bridge::registry::{self, ScanOptions, Source};
use terminull_bridge::service::Service;
use terminull_protocol::control::{self, ControlMessage, ReplyResult};

/// Run AI coding agents on this machine and drive them from another device.
#[derive(Debug, Parser)]
#[command(name = "terminull", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check that this build speaks the terminull protocol correctly.
    SelfCheck {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Tools for adapter authors.
    #[command(subcommand)]
    Adapter(AdapterSubcommand),
    /// Run the bridge daemon in the foreground: adapters, sessions, history, and the
    /// local control socket (`<home>/bridge.sock`).
    Up {
        /// The bridge's home (default: $TERMINULL_HOME, else ~/.terminull).
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        /// Log level (error, warn, info, debug, trace) or a tracing filter.
        #[arg(long, default_value = "info")]
        log_level: String,
        /// Connect to this relay (overrides `[relay] url` in config.toml).
        #[arg(long, value_name = "URL")]
        relay: Option<String>,
        /// Serve devices on the local network at ADDR (default `[lan] listen`, else 0.0.0.0:8478).
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
        lan: Option<String>,
        /// Do not advertise the LAN server by mDNS (`[lan] mdns = false`).
        #[arg(long)]
        no_mdns: bool,
    },
    /// Pair a device: show a QR code and link holding a one-time secret, then wait
    /// for the device and show the short code both sides must match.
    Pair {
        /// The relay the device will use (default: `[relay] url` in config.toml).
        #[arg(long, value_name = "URL")]
        relay: Option<String>,
        /// This bridge's LAN server as the device will reach it (`ws://192.168.1.20:8478`;
        /// default: the address the running daemon serves at). With no relay, pairing
        /// and everything after it stays on the local network.
        #[arg(long, value_name = "URL")]
        lan: Option<String>,
        /// Seconds the offer stays valid.
        #[arg(long, default_value_t = terminull_bridge::devices::DEFAULT_OFFER_TTL_SECS, value_name = "SECS")]
        ttl: u64,
        /// Print the link (and the QR code) and return without waiting.
        #[arg(long)]
        no_wait: bool,
        /// Print `{"link": …, "pairing_id": …, "expires_at": …}` instead of the QR code.
        #[arg(long)]
        json: bool,
        /// The bridge's home.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
    },
    /// List the paired devices, or revoke one.
    Devices {
        /// `revoke <device id>` to revoke.
        #[command(subcommand)]
        action: Option<DevicesAction>,
        /// Print JSON.
        #[arg(long, global = true)]
        json: bool,
        /// The bridge's home.
        #[arg(long, value_name = "DIR", global = true)]
        home: Option<PathBuf>,
    },
    /// This machine as a device of another bridge.
    #[command(subcommand)]
    Device(DeviceCommand),
    /// Talk to an agent: through the running daemon, or an in-process bridge if none runs.
    Chat {
        /// The agent (see `terminull agents`).
        agent: String,
        /// The session's working directory (default: the current one).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// The model, when the agent offers a choice.
        #[arg(long)]
        model: Option<String>,
        /// The agent's permission mode (Claude Code: default, acceptEdits, plan, bypassPermissions;
        /// Codex: read-only, workspace-write, full-access).
        #[arg(long, value_name = "MODE")]
        mode: Option<String>,
        /// Send this prompt, print the turn, and exit (0 only if the turn completed).
        #[arg(short = 'p', long = "prompt")]
        prompt: Option<String>,
        /// Print every block received as one NDJSON line instead of rendering it.
        #[arg(long)]
        json: bool,
        /// Answer permission requests without asking.
        #[arg(long, value_enum)]
        permission: Option<PermissionAnswer>,
        /// The bridge's home.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Continue an existing session: replay its history, then talk.
    Attach {
        /// The session id (see `terminull sessions`).
        session: String,
        /// Print blocks as NDJSON.
        #[arg(long)]
        json: bool,
        /// The bridge's home.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// List sessions, live and in history.
    Sessions {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The bridge's home.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
    },
    /// List the sessions the agents' CLIs started outside terminull (in a terminal),
    /// from each CLI's own session store (docs/session-handoff.md).
    External {
        /// Only this agent.
        #[arg(long)]
        agent: Option<String>,
        /// Only this working directory.
        #[arg(long, value_name = "DIR")]
        cwd: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// The bridge's home.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
    },
    /// Hand an idle session to the agent's CLI in a terminal: terminull lets the agent
    /// go, observes the session from now on, and prints the command to run.
    ContinueInTerminal {
        /// The session id (see `terminull sessions`).
        session: String,
        /// Print JSON (`{argv, cwd, command}`).
        #[arg(long)]
        json: bool,
        /// The bridge's home.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
    },
    /// List the agents this bridge can run: built-ins and drop-ins, whether each
    /// agent's CLI is installed, its capabilities, and the adapters refused and why.
    Agents {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// The bridge's home (default: $TERMINULL_HOME, else ~/.terminull).
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum DevicesAction {
    /// Revoke a device: from its next message on it can do nothing.
    Revoke {
        /// The device id (see `terminull devices`).
        device: String,
    },
}

#[derive(Debug, Subcommand)]
enum DeviceCommand {
    /// Pair with a bridge from the link its `terminull pair` shows.
    Pair {
        /// The pairing link (quote it: it contains `&`).
        link: String,
        /// This device's name, as the bridge will list it.
        #[arg(long, default_value = "terminal")]
        name: String,
        /// This device's home (its keys live in `<home>/device/`).
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        /// Never look for the bridge by mDNS (when the link's addresses do not answer).
        #[arg(long)]
        no_discover: bool,
    },
}

/// Where a client command reaches its bridge.
#[derive(Debug, Clone, Args)]
struct RemoteArgs {
    /// As a paired device (see `terminull device pair`), choose the path by itself: the
    /// bridge's LAN server first (its known address, else found by mDNS), the relay
    /// otherwise, moving between them as they come and go.
    #[arg(long)]
    remote: bool,
    /// Reach the bridge through this relay, as a paired device. With --lan too: LAN
    /// first, this relay as the fallback.
    #[arg(long, value_name = "URL")]
    relay: Option<String>,
    /// Reach the bridge directly at its LAN server (`ws://host:port`), as a paired device.
    #[arg(long, value_name = "URL")]
    lan: Option<String>,
    /// Which paired bridge, when this device paired with several (implies --remote).
    #[arg(long, value_name = "ID")]
    bridge: Option<String>,
}

#[derive(Debug, Subcommand)]
enum AdapterSubcommand {
    /// Run the conformance checks against an adapter executable.
    Check(CheckArgs),
    /// Run a fixed scripted session against an adapter and print its normalised
    /// stdio transcript (JSONL; see docs/transcripts.md).
    Record(RecordArgs),
    /// Drive an adapter with the bridge side of a transcript and compare its answers.
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
struct RecordArgs {
    /// Write the transcript here instead of stdout.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// The adapter executable.
    program: PathBuf,
    /// Its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// The transcript to replay (JSONL).
    transcript: PathBuf,
    /// The adapter executable.
    program: PathBuf,
    /// Its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Seconds to wait for the answer to `initialize`.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    handshake_timeout: f64,
    /// Seconds to wait for other calls (detect, start, send's acknowledgement, …).
    #[arg(long, default_value_t = 20.0, value_name = "SECS")]
    call_timeout: f64,
    /// Seconds to wait for a turn to end with session_end.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    turn_timeout: f64,
    /// Seconds to wait for the process to exit after stop.
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    exit_timeout: f64,
    /// The message sent in the test turn.
    #[arg(long)]
    message: Option<String>,
    /// The adapter executable.
    program: PathBuf,
    /// Its arguments (put `--` before ones that start with `-`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value).with_context(|| format!("--{flag} must be a non-negative number of seconds"))
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    // `up` sets up its own logging from --log-level; the other commands stay quiet.
    if !matches!(cli.command, Command::Up { .. }) {
        quiet_logging();
    }
    dispatch_command(cli)
}

fn quiet_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TERMINULL_LOG")
                // The commands report what they find themselves; log lines would repeat it.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .try_init();
}

fn dispatch_command(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::SelfCheck { json } => self_check(json),
        Command::Adapter(AdapterSubcommand::Check(args)) => adapter_check(args),
        Command::Adapter(AdapterSubcommand::Record(args)) => adapter_record(args),
        Command::Adapter(AdapterSubcommand::Replay(args)) => adapter_replay(args),
        Command::Agents { json, home } => agents(json, home),
        Command::Up { home, log_level, relay, lan, no_mdns } => up(home, &log_level, relay, lan, no_mdns),
        Command::Pair { relay, lan, ttl, no_wait, json, home } => pair(home, relay, lan, ttl, no_wait, json),
        Command::Devices { action, json, home } => devices(home, action, json),
        Command::Device(DeviceCommand::Pair { link, name, home, no_discover }) => {
            device_pair(home, &link, &name, no_discover)
        }
        Command::Chat { agent, cwd, model, mode, prompt, json, permission, home, remote } => {
            let cwd = match cwd {
                Some(c) => c,
                None => std::env::current_dir().context("reading the current directory")?,
            };
            let opts = ChatOptions {
                agent,
                cwd: cwd.display().to_string(),
                model,
                permission_mode: mode,
                prompt,
                json,
                permission,
            };
            with_client(home, remote, |mut client| async move {
                chat::chat(&mut client, &opts).await.map(|ok| (ok, client))
            })
        }
        Command::Attach { session, json, home, remote } => with_client(home, remote, |mut client| async move {
            chat::attach(&mut client, &session, json).await.map(|ok| (ok, client))
        }),
        Command::Sessions { json, home } => sessions(json, home),
        Command::External { agent, cwd, json, home } => external(agent, cwd, json, home),
        Command::ContinueInTerminal { session, json, home } => continue_in_terminal(session, json, home),
    }
}

/// Connects to the daemon of `home`, or starts an in-process bridge when none runs.
async fn client_for(home: &Home) -> anyhow::Result<(Client, Option<Service>)> {
    let socket = home.socket();
    if socket.exists()
        && let Ok(client) = Client::connect(&socket).await
    {
        return Ok((client, None));
    }
    let config = home.load_config()?;
    let scan = ScanOptions::new(home.clone(), config.clone());
    let policy = config.session_policy();
    let service = Service::start(home.clone(), config, scan, policy).await?;
    Ok((Client::in_process(&service), Some(service)))
}

fn with_client<F, Fut>(home: Option<PathBuf>, remote: RemoteArgs, run: F) -> anyhow::Result<ExitCode>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = Result<(bool, Client), terminull_bridge::daemon_client::ClientError>>,
{
    let home = Home::resolve(home)?;
    runtime()?.block_on(async move {
        let (client, service) =
            if remote.remote || remote.relay.is_some() || remote.lan.is_some() || remote.bridge.is_some() {
                (remote_client(&home, &remote).await?, None)
            } else {
                client_for(&home).await?
            };
        let outcome = run(client).await;
        if let Some(service) = service {
            service.shutdown().await;
        }
        let (ok, _client) = outcome?;
        Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
    })
}

fn sessions(json: bool, home: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    runtime()?.block_on(async move {
        let (mut client, service) = client_for(&home).await?;
        let mut kept = Vec::new();
        let result = client.call(ControlMessage::ListSessions(control::ListSessions {}), &mut kept).await;
        if let Some(service) = service {
            service.shutdown().await;
        }
        let ReplyResult::Sessions { sessions } = result? else { anyhow::bail!("unexpected reply to list_sessions") };
        if json {
            write_stdout(&serde_json::to_string_pretty(&sessions)?)?;
        } else {
            let mut out = format!("{:<40} {:<12} {:<19} {:>6}  {}\n", "SESSION", "AGENT", "STATE", "BLOCKS", "CWD");
            for s in &sessions {
                let state = serde_json::to_value(s.state)?.as_str().unwrap_or_default().to_owned();
                out.push_str(&format!(
                    "{:<40} {:<12} {:<19} {:>6}  {}\n",
                    s.session_id, s.agent_id, state, s.last_seq, s.cwd
                ));
            }
            write_stdout(out.trim_end())?;
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn external(agent: Option<String>, cwd: Option<String>, json: bool, home: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    runtime()?.block_on(async move {
        let (mut client, service) = client_for(&home).await?;
        let mut kept = Vec::new();
        let message =
            ControlMessage::ScanExternalSessions(control::ScanExternalSessions { agent: agent.map(Into::into), cwd });
        let result = client.call(message, &mut kept).await;
        if let Some(service) = service {
            service.shutdown().await;
        }
        let ReplyResult::ExternalSessions { sessions } = result? else {
            anyhow::bail!("unexpected reply to scan_external_sessions")
        };
        if json {
            write_stdout(&serde_json::to_string_pretty(&sessions)?)?;
        } else {
            let mut out = format!("{:<12} {:<40} {:>8}  {:<40} {}\n", "AGENT", "SESSION", "MESSAGES", "CWD", "TITLE");
            for s in &sessions {
                let count = s.session.message_count.map_or_else(|| "?".to_owned(), |n| n.to_string());
                out.push_str(&format!(
                    "{:<12} {:<40} {:>8}  {:<40} {}\n",
                    s.agent_id,
                    s.session.agent_session_id,
                    count,
                    s.session.cwd.as_deref().unwrap_or("?"),
                    s.session.title.as_deref().unwrap_or("")
                ));
            }
            write_stdout(out.trim_end())?;
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn continue_in_terminal(session: String, json: bool, home: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    runtime()?.block_on(async move {
        let (mut client, service) = client_for(&home).await?;
        let mut kept = Vec::new();
        let message = ControlMessage::ContinueInTerminal(control::ContinueInTerminal { session_id: session.into() });
        let result = client.call(message, &mut kept).await;
        if let Some(service) = service {
            service.shutdown().await;
        }
        let ReplyResult::TerminalCommand { argv, cwd, command } = result? else {
            anyhow::bail!("unexpected reply to continue_in_terminal")
        };
        if json {
            write_stdout(&serde_json::to_string_pretty(
                &serde_json::json!({"argv": argv, "cwd": cwd, "command": command}),
            )?)?;
        } else {
            write_stdout(&command)?;
        }
        Ok(ExitCode::SUCCESS)
    })
}
/// Opens an encrypted link to a paired bridge, as this home's device: over the given
/// path, or (`--remote`, or both paths given) LAN first with the relay as fallback.
async fn remote_client(home: &Home, remote: &RemoteArgs) -> anyhow::Result<Client> {
    use terminull_client::connection::Connection;
    use terminull_client::failover::{self, Routes};
    let device = terminull_client::home::DeviceHome::at(home.device_dir());
    let record = device.bridge(remote.bridge.as_deref())?;
    let connection = match (&remote.lan, &remote.relay) {
        (Some(lan), None) if !remote.remote => Connection::open_lan(&device, &record, lan).await,
        (None, Some(relay)) if !remote.remote => Connection::open(&device, &record, Some(relay)).await,
        (lan, relay) => {
            let mut routes = Routes::from_record(&record);
            if lan.is_some() || relay.is_some() {
                routes.lan = lan.clone().or(routes.lan);
                routes.relay = relay.clone().or(routes.relay);
            }
            failover::open(&device, &record, routes, Default::default()).await
        }
    };
    let connection = connection.with_context(|| format!("connecting to bridge {}", record.bridge_id))?;
    let mut path = connection.info.path.clone();
    eprintln!("connected to bridge {} over {}", record.bridge_id, *path.borrow());
    tokio::spawn(async move {
        while path.changed().await.is_ok() {
            eprintln!("the link to the bridge moved to {}", *path.borrow());
        }
    });
    Ok(Client::remote(connection))
}

fn pair(
    home: Option<PathBuf>,
    relay: Option<String>,
    lan: Option<String>,
    ttl: u64,
    no_wait: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    use terminull_bridge::devices;
    use terminull_protocol::crypto::pairing::PairingLink;
    let home = Home::resolve(home)?;
    let config = home.load_config()?;
    let relay = relay.or(config.relay.map(|r| r.url));
    // The running daemon's LAN server, as it computed its address at start.
    let lan = lan.or_else(|| std::fs::read_to_string(home.lan_url_file()).ok().map(|u| u.trim().to_owned()));
    let base = match (&relay, &lan) {
        (Some(url), _) | (None, Some(url)) => terminull_net::Endpoint::parse(url)?.http_base(),
        (None, None) => anyhow::bail!(
            "no way for a device to reach this bridge: run `terminull up --lan` (or pass --lan ws://ADDR:PORT), or pass --relay URL / set `[relay] url` in config.toml"
        ),
    };
    let identity = devices::bridge_identity(&home)?;
    let (secret, expires_at) = devices::create_offer(&home, ttl)?;
    let public = identity.public();
    let link = PairingLink { bridge_id: public.bridge_id(), bridge: public.to_wire(), relay, lan, secret, expires_at };
    let url = link.to_url(&base);
    if json {
        write_stdout(
            &serde_json::json!({"link": url, "pairing_id": link.pairing_id(), "expires_at": expires_at}).to_string(),
        )?;
    } else {
        let qr = qrcode::QrCode::new(url.as_bytes()).context("encoding the QR code")?;
        let art = qr.render::<qrcode::render::unicode::Dense1x2>().quiet_zone(true).build();
        write_stdout(&format!(
            "{art}\nScan with the terminull app, or on another computer run:\n  terminull device pair '{url}'\n\nThe offer is valid for {ttl} s and can pair one device. The bridge must be running (`terminull up`) to answer.",
        ))?;
    }
    if no_wait {
        return Ok(ExitCode::SUCCESS);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(ttl);
    while std::time::Instant::now() < deadline {
        if let Some(result) = devices::offer_result(&home, &secret) {
            write_stdout(&format!(
                "Paired \"{}\" ({}).\nShort code: {}  — check that the device shows the same code; if not, run `terminull devices revoke {}`.",
                result.name, result.device_id, result.short_code, result.device_id
            ))?;
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    anyhow::bail!("no device paired within {ttl} s; the offer has expired")
}

fn devices(home: Option<PathBuf>, action: Option<DevicesAction>, json: bool) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    let registry = terminull_bridge::devices::DeviceRegistry::open(&home);
    if let Some(DevicesAction::Revoke { device }) = action {
        let record = registry.revoke(&device)?;
        write_stdout(&format!(
            "revoked {} ({}); it can do nothing from its next message on",
            record.device_id, record.name
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    let (devices, _) = registry.snapshot();
    if json {
        write_stdout(&serde_json::to_string_pretty(&devices)?)?;
    } else {
        let mut out = format!("{:<22} {:<24} {}\n", "DEVICE", "NAME", "STATE");
        for d in &devices {
            out.push_str(&format!(
                "{:<22} {:<24} {}\n",
                d.device_id,
                d.name,
                if d.revoked { "revoked" } else { "active" }
            ));
        }
        write_stdout(out.trim_end())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn device_pair(home: Option<PathBuf>, link: &str, name: &str, no_discover: bool) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    let device = terminull_client::home::DeviceHome::at(home.device_dir());
    let discover = (!no_discover).then_some(terminull_client::mdns::MdnsScope::AllInterfaces);
    let paired = runtime()?.block_on(terminull_client::pairing::pair(&device, link, name, discover))?;
    write_stdout(&format!(
        "Paired with bridge {}.\nShort code: {}  — check that the bridge shows the same code.",
        paired.bridge_id, paired.short_code
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn up(
    home: Option<PathBuf>,
    log_level: &str,
    relay: Option<String>,
    lan: Option<String>,
    no_mdns: bool,
) -> anyhow::Result<ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TERMINULL_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(log_level))
        .context("--log-level")?;
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .try_init();
    let home = Home::resolve(home)?;
    let config = home.load_config()?;
    runtime()?.block_on(async move {
        std::fs::create_dir_all(home.root()).with_context(|| format!("creating {}", home.root().display()))?;
        let scan = ScanOptions::new(home.clone(), config.clone());
        let config_relay = config.relay.as_ref().map(|r| r.url.clone());
        // `--lan` alone takes `[lan] listen`, else the default; `[lan]` alone enables it too.
        let lan_listen = match (lan, config.lan.as_ref()) {
            (Some(addr), _) if !addr.is_empty() => Some(addr),
            (Some(_), Some(c)) | (None, Some(c)) => Some(c.listen.clone()),
            (Some(_), None) => Some("0.0.0.0:8478".to_owned()),
            (None, None) => None,
        };
        let advertise = !no_mdns && config.lan.as_ref().is_none_or(|c| c.mdns);
        let policy = config.session_policy();
        let service = Service::start(home.clone(), config, scan, policy).await?;
        let listener = local::bind(&home.socket()).await?;
        for id in service.revive_pending_work().await {
            tracing::info!(session = %id, "revived: it has messages queued or a terminal to watch");
        }
        tracing::info!("terminull bridge up: home {}, socket {}", home.root().display(), home.socket().display());
        let server = tokio::spawn(local::serve(service.clone(), listener));
        // New or changed drop-ins are picked up without a restart.
        let watcher = tokio::spawn(service.clone().watch_drop_ins(Duration::from_secs(2)));
        let relay_url = relay.or(config_relay);
        let ctx = if relay_url.is_some() || lan_listen.is_some() {
            let identity = terminull_bridge::devices::bridge_identity(&home)?;
            tracing::info!("bridge id {}", identity.public().bridge_id());
            let devices = terminull_bridge::devices::DeviceRegistry::open(&home);
            Some(terminull_bridge::relay_client::context(identity, devices, service.clone()))
        } else {
            None
        };
        let relay_task = match (&relay_url, &ctx) {
            (Some(url), Some(ctx)) => {
                tracing::info!("relay {url}");
                Some(tokio::spawn(terminull_bridge::relay_client::run(
                    ctx.clone(),
                    home.clone(),
                    url.clone(),
                    Default::default(),
                )))
            }
            _ => None,
        };
        let lan_server = match (&lan_listen, &ctx) {
            (Some(listen), Some(ctx)) => {
                let addr: std::net::SocketAddr = listen.parse().with_context(|| format!("LAN address `{listen}`"))?;
                let config = terminull_bridge::lan::LanConfig::new(addr);
                let server = terminull_bridge::lan::start(ctx.clone(), home.clone(), config)
                    .await
                    .with_context(|| format!("binding the LAN server on {addr}"))?;
                if let Some(url) = terminull_bridge::lan::device_url(server.addr()) {
                    let file = home.lan_url_file();
                    std::fs::write(&file, &url).with_context(|| format!("writing {}", file.display()))?;
                }
                Some(server)
            }
            _ => None,
        };
        // Withdrawn (a goodbye packet) when dropped at shutdown.
        let _advertisement = match (&lan_server, &ctx) {
            (Some(server), Some(ctx)) if advertise => {
                use terminull_net::mdns::{self, MdnsScope};
                let advert =
                    terminull_protocol::lan::LanAdvert::new(ctx.identity.public().bridge_id(), server.addr().port());
                let scope =
                    if server.addr().ip().is_loopback() { MdnsScope::LoopbackOnly } else { MdnsScope::AllInterfaces };
                match mdns::advertise(&advert, server.addr().ip(), scope) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        tracing::warn!("cannot advertise the LAN server by mDNS ({e}); devices need its address");
                        None
                    }
                }
            }
            _ => None,
        };
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down");
        server.abort();
        watcher.abort();
        if let Some(task) = relay_task {
            task.abort();
        }
        drop(_advertisement);
        if let Some(server) = lan_server {
            server.stop();
            let _ = std::fs::remove_file(home.lan_url_file());
        }
        service.shutdown().await;
        let _ = std::fs::remove_file(home.socket());
        Ok(ExitCode::SUCCESS)
    })
}

fn agents(json: bool, home: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(home)?;
    let config = home.load_config()?;
    let registry = runtime()?.block_on(registry::scan(&ScanOptions::new(home, config)));
    if json {
        write_stdout(&serde_json::to_string_pretty(&registry).context("encoding the registry")?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = format!("{:<14} {:<20} {:<9} {:<28} {}\n", "AGENT", "NAME", "SOURCE", "DETECTED", "CAPABILITIES");
    for agent in &registry.agents {
        let d = &agent.declaration;
        let source = match agent.source {
            Source::BuiltIn { .. } => "built-in",
            Source::DropIn { .. } => "drop-in",
            Source::AcpConfig { .. } => "acp",
        };
        let detected = match (&agent.detected.installed, &agent.detected.version, &agent.detected.reason) {
            (true, Some(v), _) => v.clone(),
            (true, None, _) => "installed".to_owned(),
            (false, _, Some(why)) => format!("not installed: {why}"),
            (false, _, None) => "not installed".to_owned(),
        };
        out.push_str(&format!(
            "{:<14} {:<20} {:<9} {:<28} {}\n",
            d.agent_id.as_str(),
            d.display_name,
            source,
            detected,
            registry::capability_summary(d)
        ));
        if let Source::DropIn { path } = &agent.source {
            out.push_str(&format!("{:<14} from {}\n", "", path.display()));
        }
        if let Source::AcpConfig { command, .. } = &agent.source {
            out.push_str(&format!("{:<14} ACP agent from config.toml: {}\n", "", command.join(" ")));
        }
        if let Some(note) = d.verification_note() {
            out.push_str(&format!("{:<14} {note}\n", ""));
        }
    }
    if registry.agents.is_empty() {
        out.push_str("(no agents)\n");
    }
    for r in &registry.refused {
        out.push_str(&format!("refused {} {}: {}\n", r.kind, r.path.display(), r.reason));
    }
    write_stdout(out.trim_end())?;
    Ok(ExitCode::SUCCESS)
}

fn adapter_record(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let script = recording::Script::default();
    let entries = runtime()?
        .block_on(recording::record(&args.program, &args.args, &script))
        .with_context(|| format!("recording {}", args.program.display()))?;
    let text = recording::to_jsonl(&entries);
    match args.output {
        Some(path) => std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?,
        None => write_stdout(text.trim_end())?,
    }
    Ok(ExitCode::SUCCESS)
}

fn adapter_replay(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(&args.transcript).with_context(|| format!("reading {}", args.transcript.display()))?;
    let entries = recording::parse_jsonl(&text).with_context(|| format!("parsing {}", args.transcript.display()))?;
    let report = runtime()?
        .block_on(recording::replay(&entries, &args.program, &args.args))
        .with_context(|| format!("replaying against {}", args.program.display()))?;
    write_stdout(&report.to_string())?;
    Ok(if report.is_match() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("starting the runtime")
}

fn adapter_check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let mut opts = CheckOptions::new(args.program, args.args);
    opts.handshake_timeout = seconds(args.handshake_timeout, "handshake-timeout")?;
    opts.call_timeout = seconds(args.call_timeout, "call-timeout")?;
    opts.turn_timeout = seconds(args.turn_timeout, "turn-timeout")?;
    opts.exit_timeout = seconds(args.exit_timeout, "exit-timeout")?;
    if let Some(message) = args.message {
        opts.message = message;
    }
    let report = runtime()?.block_on(check_adapter(opts));
    let out =
        if args.json { serde_json::to_string_pretty(&report).context("encoding the report")? } else { report.render() };
    write_stdout(&out)?;
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn self_check(json: bool) -> anyhow::Result<ExitCode> {
    let report = terminull_adapter_check::self_check::run();
    let out = if json {
        serde_json::to_string_pretty(&report).context("encoding the report")?
    } else {
        let mut text = format!("terminull {} — protocol v{}\n", env!("CARGO_PKG_VERSION"), report.protocol_version);
        for c in &report.checks {
            text.push_str(&format!("{} {:<17} {}\n", if c.ok { "ok  " } else { "FAIL" }, c.name, c.detail));
        }
        let failed = report.checks.iter().filter(|c| !c.ok).count();
        text.push_str(&format!("{} passed, {} failed", report.checks.len() - failed, failed));
        text
    };
    write_stdout(&out)?;
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").context("writing to stdout")
}
