//! The command line's grammar: every command, subcommand and flag (clap derive).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use terminull_bridge::chat::PermissionAnswer;

/// Run AI coding agents on this machine and drive them from another device.
#[derive(Debug, Parser)]
#[command(name = "terminull", version, about)]
pub(crate) struct Cli {
    /// On failure, print every cause and the error's details, not only the one sentence.
    #[arg(short, long, global = true)]
    pub(crate) verbose: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check that this build speaks the terminull protocol correctly.
    #[command(display_order = 12)]
    SelfCheck {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Tools for adapter authors.
    #[command(subcommand)]
    #[command(display_order = 13)]
    Adapter(AdapterSubcommand),
    /// Run the bridge daemon in the foreground: adapters, sessions, history, and the
    /// local control socket (`<home>/bridge.sock`).
    #[command(display_order = 1)]
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
    #[command(display_order = 2)]
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
        /// Print the link (and the QR code) and return without waiting (needs `--yes`:
        /// nobody is left to confirm the short code).
        #[arg(long, requires = "yes")]
        no_wait: bool,
        /// Accept the device without comparing the short code (scripts, tests). The risk:
        /// whoever uses the link first (a photo of the QR code, a leaked link) is paired
        /// and usable at once; without it the device stays refused until you confirm here.
        #[arg(long, alias = "no-confirm")]
        yes: bool,
        /// Print `{"link": …, "pairing_id": …, "expires_at": …}` instead of the QR code.
        #[arg(long)]
        json: bool,
        /// The bridge's home.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
    },
    /// List the paired devices, or revoke one.
    #[command(display_order = 7)]
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
    #[command(display_order = 8)]
    Device(DeviceCommand),
    /// Talk to an agent: through the running daemon, or an in-process bridge if none runs.
    #[command(display_order = 3)]
    Chat {
        /// The agent (see `terminull agents`); optional with --continue or --session.
        #[arg(required_unless_present_any = ["continue_last", "session"])]
        agent: Option<String>,
        /// Go back to the session started last in this directory (of AGENT, when given).
        #[arg(short = 'c', long = "continue", conflicts_with = "session")]
        continue_last: bool,
        /// Go back to this session (see `terminull sessions`).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
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
        /// Answer permission requests without asking: `allow` picks the option that allows
        /// the call once (else the always-allow one), `deny` the one that rejects it once
        /// (else the always-reject one).
        #[arg(long, value_enum)]
        permission: Option<PermissionAnswer>,
        /// The bridge's home.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Continue an existing session: replay its history, then talk.
    #[command(display_order = 4)]
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
    /// A shell on the bridge's machine, in this terminal (docs/terminals.md).
    #[command(display_order = 5)]
    Shell {
        /// The directory to start in (default: the bridge user's home directory).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// The bridge's home.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// List sessions, live and in history.
    #[command(display_order = 5)]
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
    #[command(display_order = 9)]
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
    #[command(display_order = 10)]
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
    #[command(display_order = 6)]
    Agents {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// The bridge's home (default: $TERMINULL_HOME, else ~/.terminull).
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
    },
    /// Run the daemon as a background service: a systemd user unit (Linux) or a
    /// launchd agent (macOS), restarted when it fails.
    #[command(subcommand)]
    Service(crate::service::ServiceCommand),
    /// Check what a working bridge needs (agents, home, socket, LAN, relay, devices,
    /// clock) and say how to fix what is wrong; exits 1 when something failed.
    Doctor(crate::doctor::DoctorArgs),
}

#[derive(Debug, Subcommand)]
pub(crate) enum DevicesAction {
    /// Revoke a device: from its next message on it can do nothing.
    Revoke {
        /// The device id (see `terminull devices`).
        device: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum DeviceCommand {
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
pub(crate) struct RemoteArgs {
    /// As a paired device (see `terminull device pair`), choose the path by itself: the
    /// bridge's LAN server first (its known address, else found by mDNS), the relay
    /// otherwise, moving between them as they come and go.
    #[arg(long)]
    pub(crate) remote: bool,
    /// Reach the bridge through this relay, as a paired device. With --lan too: LAN
    /// first, this relay as the fallback.
    #[arg(long, value_name = "URL")]
    pub(crate) relay: Option<String>,
    /// Reach the bridge directly at its LAN server (`ws://host:port`), as a paired device.
    #[arg(long, value_name = "URL")]
    pub(crate) lan: Option<String>,
    /// Which paired bridge, when this device paired with several (implies --remote).
    #[arg(long, value_name = "ID")]
    pub(crate) bridge: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AdapterSubcommand {
    /// Run the conformance checks against an adapter executable.
    Check(CheckArgs),
    /// Run a fixed scripted session against an adapter and print its normalised
    /// stdio transcript (JSONL; see docs/transcripts.md).
    Record(RecordArgs),
    /// Drive an adapter with the bridge side of a transcript and compare its answers.
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RecordArgs {
    /// Write the transcript here instead of stdout.
    #[arg(long, short)]
    pub(crate) output: Option<PathBuf>,
    /// The adapter executable.
    pub(crate) program: PathBuf,
    /// Its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The transcript to replay (JSONL).
    pub(crate) transcript: PathBuf,
    /// The adapter executable.
    pub(crate) program: PathBuf,
    /// Its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Seconds to wait for the answer to `initialize`.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub(crate) handshake_timeout: f64,
    /// Seconds to wait for other calls (detect, start, send's acknowledgement, …).
    #[arg(long, default_value_t = 20.0, value_name = "SECS")]
    pub(crate) call_timeout: f64,
    /// Seconds to wait for a turn to end with session_end.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub(crate) turn_timeout: f64,
    /// Seconds to wait for the process to exit after stop.
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    pub(crate) exit_timeout: f64,
    /// The message sent in the test turn.
    #[arg(long)]
    pub(crate) message: Option<String>,
    /// The adapter executable.
    pub(crate) program: PathBuf,
    /// Its arguments (put `--` before ones that start with `-`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) args: Vec<String>,
}

pub(crate) fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value).with_context(|| format!("--{flag} must be a non-negative number of seconds"))
}
