//! `terminull adapter …` and `terminull self-check`: the adapter conformance checker,
//! recording and replay.

use std::process::ExitCode;

use anyhow::Context;
use terminull_adapter_check::conformance::{CheckOptions, check_adapter};
use terminull_adapter_check::recording;

use crate::args::{CheckArgs, RecordArgs, ReplayArgs, seconds};
use crate::{runtime, write_stdout};

pub(crate) fn record(args: RecordArgs) -> anyhow::Result<ExitCode> {
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

pub(crate) fn replay(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(&args.transcript).with_context(|| format!("reading {}", args.transcript.display()))?;
    let entries = recording::parse_jsonl(&text).with_context(|| format!("parsing {}", args.transcript.display()))?;
    let report = runtime()?
        .block_on(recording::replay(&entries, &args.program, &args.args))
        .with_context(|| format!("replaying against {}", args.program.display()))?;
    write_stdout(&report.to_string())?;
    Ok(if report.is_match() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

pub(crate) fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
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

pub(crate) fn self_check(json: bool) -> anyhow::Result<ExitCode> {
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
