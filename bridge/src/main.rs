//! `terminull`: the bridge's command line.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

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
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::SelfCheck { json } => {
            let report = terminull_bridge::self_check::run();
            let out = if json {
                serde_json::to_string_pretty(&report).context("encoding the report")?
            } else {
                let mut text =
                    format!("terminull {} — protocol v{}\n", env!("CARGO_PKG_VERSION"), report.protocol_version);
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
    }
}

fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").context("writing to stdout")
}
