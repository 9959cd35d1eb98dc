//! `terminull-fake-cli`: plays a recorded agent CLI back to an adapter.
//!
//! Installed under the CLI's name (`claude`, `codex`) in a directory put first on PATH,
//! it reads the recording named by `TERMINULL_FAKE_CLI_SCRIPT` (the format of
//! `terminull_adapter_sdk::tap`) and plays the next recorded process: the N-th start of
//! the fake plays process N, counted in the file `TERMINULL_FAKE_CLI_STATE`. It writes
//! each recorded stdout line at its recorded time, waits for each recorded stdin line
//! (and checks it has the recorded `type` and `subtype`), and exits as the recorded
//! process did. A process the recording saw killed is never finished: the fake waits to
//! be killed too. `<root>` in the recording is replaced by `TERMINULL_FAKE_CLI_ROOT`.
//!
//! `--version` prints the version in `TERMINULL_FAKE_CLI_VERSION` (the adapters' detect
//! probe calls it). Mismatches exit with status 3 and say what differed on stderr.

#![allow(clippy::print_stdout)] // a CLI stand-in: stdout is its output

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;
use terminull_adapter_sdk::tap::{TapEvent, TapRecord};

/// The longest pause the fake keeps from the recording: replays stay quick even when
/// the live run waited on a slow model.
const MAX_GAP: Duration = Duration::from_millis(300);

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("terminull-fake-cli: {error:#}");
            ExitCode::from(3)
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--version") {
        let version = std::env::var("TERMINULL_FAKE_CLI_VERSION").unwrap_or_else(|_| "0.0.0-fake".into());
        println!("{version}");
        return Ok(ExitCode::SUCCESS);
    }
    let script = std::env::var("TERMINULL_FAKE_CLI_SCRIPT").context("TERMINULL_FAKE_CLI_SCRIPT is not set")?;
    let state = std::env::var("TERMINULL_FAKE_CLI_STATE").context("TERMINULL_FAKE_CLI_STATE is not set")?;
    let root = std::env::var("TERMINULL_FAKE_CLI_ROOT").unwrap_or_default();
    let start_no = next_process(&state)?;
    let text = std::fs::read_to_string(&script).with_context(|| format!("reading {script}"))?;
    let mut all = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let record: TapRecord =
            serde_json::from_str(&line.replace("<root>", &root)).with_context(|| format!("{script}:{}", i + 1))?;
        all.push(record);
    }
    // `--version` probes are answered above without a recording, so they do not count.
    let probes: Vec<u64> = all
        .iter()
        .filter_map(|r| match &r.event {
            TapEvent::Spawn { spawn } if spawn.iter().any(|a| a == "--version") => Some(r.proc),
            _ => None,
        })
        .collect();
    let mut procs: Vec<u64> = Vec::new();
    for r in &all {
        if !probes.contains(&r.proc) && !procs.contains(&r.proc) {
            procs.push(r.proc);
        }
    }
    let Some(proc) = usize::try_from(start_no - 1).ok().and_then(|i| procs.get(i)).copied() else {
        bail!("{script} records {} processes; this is start number {start_no} of the fake", procs.len());
    };
    let records: Vec<TapRecord> = all.into_iter().filter(|r| r.proc == proc).collect();
    play(&records, &args, &format!("{state}.waiting"), start_no)
}

/// Counts this start in the state file and returns its number, from 1.
fn next_process(state: &str) -> anyhow::Result<u64> {
    let previous: u64 = std::fs::read_to_string(state).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    std::fs::write(state, (previous + 1).to_string()).with_context(|| format!("writing {state}"))?;
    Ok(previous + 1)
}

/// Plays one recorded process. When the recording ends with the process killed, the
/// fake writes its start number to `waiting` (the rig interrupts a turn then, as the
/// live run did once it had seen all this) and waits to be killed.
fn play(records: &[TapRecord], args: &[String], waiting: &str, start_no: u64) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut stdout = std::io::stdout().lock();
    let start = Instant::now();
    let mut clock = Duration::ZERO;
    let mut last_ms = 0;
    for record in records {
        // Keep the recorded pacing, with long pauses shortened.
        let gap = Duration::from_millis(record.ms.saturating_sub(last_ms)).min(MAX_GAP);
        last_ms = record.ms;
        clock += gap;
        if let Some(wait) = clock.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        match &record.event {
            TapEvent::Spawn { spawn } => {
                if spawn.len() != args.len() {
                    eprintln!("terminull-fake-cli: note: recorded with {spawn:?}, started with {args:?}");
                }
            }
            TapEvent::Out { out } => {
                stdout.write_all(out.as_bytes())?;
                stdout.write_all(b"\n")?;
                stdout.flush()?;
            }
            TapEvent::In { input: expected } => {
                let mut line = String::new();
                if input.read_line(&mut line)? == 0 {
                    // The adapter closed stdin early: a real CLI ends here too.
                    return Ok(ExitCode::SUCCESS);
                }
                check_input(expected, line.trim_end_matches('\n'))?;
                // Time spent waiting for the adapter is not part of the recorded pacing.
                clock = start.elapsed();
            }
            TapEvent::Exit { exit: Some(code), .. } => {
                // A CLI reading stdin exits once the adapter closes it; wait for that
                // (at once for a CLI whose stdin the adapter closed at the start).
                drain(&mut input)?;
                return Ok(ExitCode::from(u8::try_from(*code).unwrap_or(1)));
            }
            // Killed by a signal, or signalled by the adapter (which the CLI then obeyed):
            // the adapter ended it, so wait for the adapter to.
            TapEvent::Exit { exit: None, .. } | TapEvent::SentSignal { .. } => break,
        }
    }
    // The recorded process never exited on its own: it was killed. Wait for that,
    // reading stdin so the adapter's writes do not block.
    std::fs::write(waiting, start_no.to_string()).with_context(|| format!("writing {waiting}"))?;
    drain(&mut input)?;
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Reads stdin to its end.
fn drain(input: &mut impl BufRead) -> std::io::Result<()> {
    let mut sink = String::new();
    while input.read_line(&mut sink)? > 0 {
        sink.clear();
    }
    Ok(())
}

/// The adapter wrote `got` where the recording has `expected`: both must be JSON of the
/// same shape — `type` and `subtype` (stream-json CLIs), `method` and whether it is a
/// result or an error (JSON-RPC) — as ids and texts may differ run to run; or equal text.
fn check_input(expected: &str, got: &str) -> anyhow::Result<()> {
    let shape = |line: &str| -> Option<[Value; 5]> {
        let v: Value = serde_json::from_str(line).ok()?;
        let subtype = v.pointer("/request/subtype").or_else(|| v.pointer("/response/subtype")).cloned();
        Some([
            v.get("type").cloned().unwrap_or(Value::Null),
            subtype.unwrap_or(Value::Null),
            v.get("method").cloned().unwrap_or(Value::Null),
            Value::Bool(v.get("result").is_some()),
            Value::Bool(v.get("error").is_some()),
        ])
    };
    match (shape(expected), shape(got)) {
        (Some(a), Some(b)) if a == b => Ok(()),
        (None, None) if expected == got => Ok(()),
        _ => bail!("stdin differs from the recording:\n  expected {expected}\n  got      {got}"),
    }
}
