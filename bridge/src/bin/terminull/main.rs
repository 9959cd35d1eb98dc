//! `terminull`: the bridge's command line.

mod adapter;
mod args;
mod daemon;
mod doctor;
mod doctor_checks;
mod errors;
mod pairing;
mod service;
mod service_unit;
mod sessions;
mod shell;
mod version;

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use terminull_bridge::chat::{self, ChatOptions};

use crate::args::{AdapterSubcommand, Cli, Command, DeviceCommand};

fn main() -> ExitCode {
    if let Some(text) = version::requested() {
        return match write_stdout(&text) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                errors::report(&error, false);
                ExitCode::FAILURE
            }
        };
    }
    let cli = Cli::parse();
    let verbose = cli.verbose;
    // `up` sets up its own logging from --log-level; the other commands stay quiet.
    if !matches!(cli.command, Command::Up { .. }) {
        quiet_logging();
    }
    match dispatch_command(cli) {
        Ok(code) => code,
        Err(error) => {
            errors::report(&error, verbose);
            ExitCode::FAILURE
        }
    }
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
        Command::SelfCheck { json } => adapter::self_check(json),
        Command::Adapter(AdapterSubcommand::Check(args)) => adapter::check(args),
        Command::Adapter(AdapterSubcommand::Record(args)) => adapter::record(args),
        Command::Adapter(AdapterSubcommand::Replay(args)) => adapter::replay(args),
        Command::Agents { json, home } => daemon::agents(json, home),
        Command::Up { home, log_level, relay, lan, no_mdns } => daemon::up(home, &log_level, relay, lan, no_mdns),
        Command::Pair { relay, lan, ttl, no_wait, yes, json, home } => {
            pairing::pair(home, relay, lan, ttl, pairing::Confirm { no_wait, yes }, json)
        }
        Command::Devices { action, json, home } => pairing::devices(home, action, json),
        Command::Device(DeviceCommand::Pair { link, name, home, no_discover }) => {
            pairing::device_pair(home, &link, &name, no_discover)
        }
        Command::Chat { agent, continue_last, session, cwd, model, mode, prompt, json, permission, home, remote } => {
            let cwd = match cwd {
                Some(c) => c,
                None => std::env::current_dir().context("reading the current directory")?,
            };
            let target = match (continue_last, session) {
                (_, Some(id)) => chat::Target::Session(id),
                (true, None) => chat::Target::Continue,
                (false, None) => chat::Target::New,
            };
            let history_file =
                terminull_bridge::home::Home::resolve(home.clone()).ok().map(|h| h.root().join("chat-history"));
            let opts = ChatOptions {
                agent,
                target,
                cwd: cwd.display().to_string(),
                model,
                permission_mode: mode,
                prompt,
                json,
                permission,
                history_file,
            };
            sessions::with_client(home, remote, |mut client| async move {
                chat::chat(&mut client, &opts).await.map(|ok| (ok, client))
            })
        }
        Command::Attach { session, json, home, remote } => {
            sessions::with_client(home, remote, |mut client| async move {
                chat::attach(&mut client, &session, json).await.map(|ok| (ok, client)).map_err(chat::ChatError::from)
            })
        }
        Command::Shell { cwd, home, remote } => shell::shell(home, cwd, remote),
        Command::Sessions { json, home } => sessions::list(json, home),
        Command::External { agent, cwd, json, home } => sessions::external(agent, cwd, json, home),
        Command::ContinueInTerminal { session, json, home } => sessions::continue_in_terminal(session, json, home),
        Command::Service(command) => service::service(command),
        Command::Doctor(args) => doctor::doctor(args),
    }
}

/// This process's command line, for the home's lock file (bounded).
pub(crate) fn command_line() -> String {
    let line = std::env::args().collect::<Vec<_>>().join(" ");
    line.chars().take(200).collect()
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("starting the runtime")
}

pub(crate) fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").context("writing to stdout")
}
