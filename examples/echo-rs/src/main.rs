//! `echo-rs`: the spec's EchoAdapter (developer-docs §2.2) with the Rust SDK.
//!
//! Replies "You said: <text>", streamed word by word. A message starting with
//! `slow` streams slowly so an interrupt can be tried; one starting with `ask` first
//! asks permission (options `allow` and `deny`) and, denied, says so instead;
//! `/status`-style usage is counted per session.

use std::process::ExitCode;
use std::time::Duration;

use terminull_adapter_sdk::prelude::*;

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
    const CAPS: Caps = Caps {
        images: false,
        documents: false,
        thinking: false,
        permissions: true,
        subagents: false,
        interrupt: true,
        input_during_turn: false,
        terminal: false,
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
        let reply = format!("You said: {}", message.text);
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

impl GetUsage for Echo {
    async fn get_usage(&mut self) -> Result<Usage, AdapterError> {
        Ok(Usage { input_tokens: Some(self.turns), output_tokens: Some(self.words_out), ..Usage::default() })
    }
}

fn main() -> ExitCode {
    serve::<Echo>()
}
