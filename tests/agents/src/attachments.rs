//! An image attachment from the app reaches the model: the message goes through the
//! daemon and the adapter to the real CLI, and the scripted model server's record of
//! the request it received holds the image, byte for byte (docs/agent-tests.md).

use anyhow::{Context, ensure};
use serde_json::Value;
use terminull_protocol::BlockKind;
use terminull_protocol::blocks::{Attachment, EndReason};

use crate::agents::Agent;
use crate::rig::{Mode, Rig, TurnPlan};
use crate::scenarios::{check_turn_contract, render};

/// An 8x8 red PNG.
pub const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEUlEQVR4nGO4o6GBFTEMLQkAe3tLAfuiUfAAAAAASUVORK5CYII=";

/// Sends one message with a PNG attached to `agent` run live from `cli_dir`; checks the
/// turn completed and that a request to the model carried the image as an Anthropic
/// `image` block with the same bytes. Returns the turn's blocks, rendered.
pub async fn image_reaches_the_model(agent: Agent, cli_dir: std::path::PathBuf) -> anyhow::Result<String> {
    let mut rig = Rig::start(agent, Mode::Live { cli_dir }).await?;
    rig.open_session(None).await?;
    let attachment = Attachment { name: "red.png".into(), mime_type: "image/png".into(), data: PNG_BASE64.into() };
    let blocks = rig.turn_with("mock:plain what colour is this image?", vec![attachment], TurnPlan::default()).await?;
    let transcript = render(&blocks);
    check_turn_contract(&blocks).with_context(|| transcript.clone())?;
    let sent = blocks.iter().find_map(|b| match &b.kind {
        BlockKind::UserMessage(m) => Some(m),
        _ => None,
    });
    ensure!(
        sent.is_some_and(|m| m.attachments.len() == 1),
        "the user_message block carries the attachment\n{transcript}"
    );
    let end = blocks.iter().find_map(|b| match &b.kind {
        BlockKind::SessionEnd(e) => Some(e.reason),
        _ => None,
    });
    ensure!(end == Some(EndReason::Completed), "the turn completed\n{transcript}");

    let requests = rig.model_requests().await?;
    let images: Vec<&Value> = requests.iter().flat_map(|r| images_in(&r["body"])).collect();
    ensure!(
        images.iter().any(|i| i["source"]["type"] == "base64"
            && i["source"]["media_type"] == "image/png"
            && i["source"]["data"] == PNG_BASE64),
        "no request to the model carried the image; images seen: {images:?}; paths: {:?}",
        requests.iter().map(|r| r["path"].clone()).collect::<Vec<_>>()
    );
    rig.stop();
    Ok(format!("{transcript}the model received the image ({} request(s) with it)", images.len()))
}

/// The `image` content blocks of an Anthropic Messages request body.
fn images_in(body: &Value) -> Vec<&Value> {
    let messages = body["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    messages.iter().filter_map(|m| m["content"].as_array()).flatten().filter(|c| c["type"] == "image").collect()
}
