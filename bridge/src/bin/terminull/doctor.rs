//! `terminull doctor`: what a user checks when something does not work, each failure
//! with a plain fix; exits 1 when anything failed (docs/bridge.md).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use terminull_bridge::home::Home;

use crate::doctor_checks::{self, Check, Status};
use crate::{runtime, write_stdout};

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print `{"home", "ok", "checks": [{area, status, message, fix}]}` instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// The bridge's home (default: $TERMINULL_HOME, else ~/.terminull).
    #[arg(long, value_name = "DIR")]
    pub(crate) home: Option<PathBuf>,
}

pub(crate) fn doctor(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let home = Home::resolve(args.home)?;
    let checks = runtime()?.block_on(run_checks(&home));
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    if args.json {
        let report = serde_json::json!({
            "home": home.root(),
            "ok": failed == 0,
            "checks": checks,
        });
        write_stdout(&serde_json::to_string_pretty(&report).context("encoding the report")?)?;
    } else {
        write_stdout(&render(&home, &checks))?;
    }
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn run_checks(home: &Home) -> Vec<Check> {
    let (mut checks, config) = doctor_checks::home(home);
    let config = config.unwrap_or_default();
    checks.extend(doctor_checks::agents(home, &config).await);
    let (socket, daemon_up) = doctor_checks::socket(home).await;
    checks.extend(socket);
    checks.extend(doctor_checks::lan(home, &config, daemon_up).await);
    checks.extend(doctor_checks::relay(&config).await);
    checks.extend(doctor_checks::devices(home));
    checks
}

fn render(home: &Home, checks: &[Check]) -> String {
    let mut out = format!("terminull doctor: home {}\n", home.root().display());
    for c in checks {
        let tag = match c.status {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        };
        out.push_str(&format!("{tag:<5} {:<8} {}\n", c.area, c.message));
        if let Some(fix) = &c.fix
            && c.status != Status::Ok
        {
            out.push_str(&format!("{:<14} fix: {fix}\n", ""));
        }
    }
    let count = |s| checks.iter().filter(|c| c.status == s).count();
    out.push_str(&format!(
        "{} failed, {} warnings, {} ok, {} skipped",
        count(Status::Fail),
        count(Status::Warn),
        count(Status::Ok),
        count(Status::Skip)
    ));
    out
}
