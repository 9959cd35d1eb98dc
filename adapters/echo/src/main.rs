//! `echo-rs`: the built-in `echo` adapter, the smallest whole adapter on the Rust SDK
//! (docs/adapter-sdk.md, "The trait"; the protocol it speaks is docs/adapter-protocol.md).
//! The registry finds it next to `terminull` under this name.
//!
//! Replies "You said: <text>", streamed word by word, and names each attachment it
//! was given (it takes images and other files, so a client's attachments can be
//! tried end to end). A message starting with
//! `slow` streams slowly so an interrupt can be tried; one starting with `ask` first
//! asks permission (options `allow` and `deny`) and, denied, says so instead;
//! `/status`-style usage is counted per session.
//!
//! Two load scenarios for the end-to-end benchmark (`bench/`), chosen by the message:
//! - `bench blocks N SIZE [PACE_US]`: N finished `text` blocks of SIZE bytes, each
//!   under its own id and starting with `t=<unix ns at emit>;` so the receiver can
//!   measure latency; PACE_US microseconds apart (0, the default: as fast as it can).
//! - `bench stream TOTAL CHUNK [PACE_US]`: one answer of TOTAL bytes (`y` repeated)
//!   streamed CHUNK bytes at a time, PACE_US microseconds apart (0, the default: as
//!   fast as it can), each chunk an append of the new bytes, then an empty `done: true`
//!   append. The SDK joins the deltas that follow each other within 20 ms.

use std::process::ExitCode;
use std::time::Duration;

use terminull_adapter_sdk::prelude::*;
use terminull_protocol::blocks::StreamedText;

struct Echo {
    turns: u64,
    words_out: u64,
}

impl Adapter for Echo {
    const AGENT_ID: &'static str = "echo";
    const DISPLAY_NAME: &'static str = "Echo";
    // No agent CLI behind it: detect reports installed.
    const CLI_BINARY: Option<&'static str> = None;
    const ADAPTER_VERSION: Option<&'static str> = Some(env!("CARGO_PKG_VERSION"));
    const CAPS: Caps = caps! {
        supported: [images, documents, permissions, interrupt],
        unsupported: [thinking, subagents, input_during_turn, terminal],
    };
    const LEASE: LeaseKind = LeaseKind::PerTurn;
    const INIT_PARAMS: &'static [InitParam] = &[InitParam::Cwd, InitParam::OnSessionId];

    type Models = NotProvided;
    type Usage = Provided;

    async fn start(init: StartParams, session: &Session) -> Result<(Self, StartInfo), AdapterError> {
        // An echo has no conversation store; a stable id derived from ours shows the hook.
        session.set_agent_session_id(format!("echo-{}", init.session_id)).await.map_err(AdapterError::agent)?;
        Ok((Echo { turns: 0, words_out: 0 }, StartInfo { version: Some("1.0".into()), ..StartInfo::default() }))
    }

    async fn send(&mut self, message: UserMessage, turn: &mut Turn) -> Result<EndReason, AdapterError> {
        self.turns += 1;
        if let Some(args) = message.text.strip_prefix("bench ") {
            return bench(args, turn).await;
        }
        let pace = if message.text.starts_with("slow") { Duration::from_millis(200) } else { Duration::ZERO };
        if message.text.starts_with("ask") {
            let options = vec![
                PermissionOption { id: "allow".into(), label: "Allow".into(), kind: PermissionOptionKind::AllowOnce },
                PermissionOption { id: "deny".into(), label: "Deny".into(), kind: PermissionOptionKind::RejectOnce },
            ];
            let input = serde_json::json!({ "text": message.text });
            match turn.ask_permission("echo", input, options, None).await {
                Ok(choice) if choice == "allow" => {}
                Ok(_) => {
                    let mut text = TextStreamer::new_text(mint_id("msg"));
                    turn.emit(text.push("Denied: nothing echoed.")).await.map_err(AdapterError::agent)?;
                    if let Some(last) = text.finish() {
                        turn.emit(last).await.map_err(AdapterError::agent)?;
                    }
                    return Ok(EndReason::Completed);
                }
                Err(TurnError::Interrupted) => return Ok(EndReason::Interrupted),
                Err(e) => return Err(AdapterError::agent(e)),
            }
        }
        let mut reply = format!("You said: {}", message.text);
        for a in &message.attachments {
            reply.push_str(&format!(" [attached: {} ({}, {} bytes)]", a.name, a.mime_type, base64_len(&a.data)));
        }
        let mut text = TextStreamer::new_text(mint_id("msg"));
        for (i, word) in reply.split_inclusive(' ').enumerate() {
            if turn.is_interrupted() {
                return Ok(EndReason::Interrupted);
            }
            if i > 0 && !pace.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(pace) => {}
                    () = turn.interrupted() => return Ok(EndReason::Interrupted),
                }
            }
            self.words_out += 1;
            turn.emit(text.push(word)).await.map_err(AdapterError::agent)?;
        }
        if let Some(last) = text.finish() {
            turn.emit(last).await.map_err(AdapterError::agent)?;
        }
        Ok(EndReason::Completed)
    }
}

/// The decoded length of standard padded base64 `data` (not checked: the echo only names it).
fn base64_len(data: &str) -> usize {
    let pad = data.bytes().rev().take_while(|&b| b == b'=').count().min(2);
    (data.len() / 4 * 3).saturating_sub(pad)
}

/// The numbers of a `bench` message, or an error naming what was expected.
fn numbers(args: &[&str], at_least: usize) -> Result<Vec<u64>, AdapterError> {
    let parsed: Result<Vec<u64>, _> = args.iter().map(|a| a.parse::<u64>()).collect();
    match parsed {
        Ok(n) if n.len() >= at_least => Ok(n),
        _ => Err(bench_usage(args)),
    }
}

fn bench_usage(args: &[&str]) -> AdapterError {
    AdapterError::agent(format!(
        "bench: expected `blocks N SIZE [PACE_US]` or `stream TOTAL CHUNK [PACE_US]`, got {args:?}"
    ))
}

fn unix_nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// The load scenarios of the end-to-end benchmark (see the module comment).
async fn bench(args: &str, turn: &mut Turn) -> Result<EndReason, AdapterError> {
    let words: Vec<&str> = args.split_whitespace().collect();
    match words.split_first() {
        Some((&"blocks", rest)) => {
            let n = numbers(rest, 2)?;
            let (count, size) = (n[0], n[1] as usize);
            let pace = Duration::from_micros(n.get(2).copied().unwrap_or(0));
            let id_base = mint_id("bench");
            for i in 0..count {
                if turn.is_interrupted() {
                    return Ok(EndReason::Interrupted);
                }
                if i > 0 && !pace.is_zero() {
                    tokio::time::sleep(pace).await;
                }
                // The stamp is taken last so the receiver measures from the emit.
                let mut text = format!("t={};", unix_nanos());
                text.extend(std::iter::repeat_n('x', size.saturating_sub(text.len())));
                let block = BlockKind::Text(StreamedText::snapshot(format!("{id_base}-{i}"), text, true));
                turn.emit(block).await.map_err(AdapterError::agent)?;
            }
            Ok(EndReason::Completed)
        }
        Some((&"stream", rest)) => {
            let n = numbers(rest, 2)?;
            let (total, chunk) = (n[0] as usize, (n[1] as usize).max(1));
            let pace = Duration::from_micros(n.get(2).copied().unwrap_or(0));
            let mut text = TextStreamer::new_text(mint_id("bench"));
            let piece = "y".repeat(chunk);
            let mut sent = 0;
            while sent < total {
                if turn.is_interrupted() {
                    return Ok(EndReason::Interrupted);
                }
                if sent > 0 && !pace.is_zero() {
                    tokio::time::sleep(pace).await;
                }
                let take = chunk.min(total - sent);
                sent += take;
                turn.emit(text.push(&piece[..take])).await.map_err(AdapterError::agent)?;
            }
            if let Some(last) = text.finish() {
                turn.emit(last).await.map_err(AdapterError::agent)?;
            }
            Ok(EndReason::Completed)
        }
        _ => Err(bench_usage(&words)),
    }
}

impl GetUsage for Echo {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(Usage { input_tokens: Some(self.turns), output_tokens: Some(self.words_out), ..Usage::default() })
    }
}

fn main() -> ExitCode {
    serve::<Echo>()
}
