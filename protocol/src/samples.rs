//! One well-formed value of every block type, for self-checks, benchmarks and tests
//! in other crates. Built from the types, so it cannot drift from them.

use serde_json::json;

use crate::blocks::*;
use crate::capabilities::Capabilities;
use crate::commands::universal_slash_commands;

/// One block of every type in [`BLOCK_TYPES`] order, stamped with `ts` but no `seq`.
pub fn one_of_each_block(ts: f64) -> Vec<Block> {
    let kinds = vec![
        BlockKind::AgentInfo(AgentInfo {
            agent_id: "echo".into(),
            name: "Echo".into(),
            version: Some("1.0".into()),
            model: None,
            capabilities: Capabilities {
                cap_images: false,
                cap_documents: false,
                cap_thinking: false,
                cap_permissions: false,
                cap_subagents: false,
                cap_interrupt: true,
                cap_input_during_turn: false,
                cap_terminal: false,
                provides_models: false,
                provides_usage: false,
            },
            slash_commands: universal_slash_commands(),
        }),
        BlockKind::UserMessage(UserMessage { text: "list the files".into(), attachments: vec![] }),
        BlockKind::Text(StreamedText { id: "m1".into(), text: "Here they are:".into(), done: true }),
        BlockKind::Thinking(StreamedText { id: "r1".into(), text: "I should run ls.".into(), done: true }),
        BlockKind::ToolCall(ToolCall {
            id: "t1".into(),
            name: "Bash".into(),
            input: json!({"command": "ls"}),
            status: ToolStatus::Done,
            parent_id: None,
            title: Some("List files".into()),
        }),
        BlockKind::ToolResult(ToolResult {
            tool_call_id: "t1".into(),
            output: "Cargo.toml\nsrc\n".into(),
            is_error: false,
        }),
        BlockKind::PermissionRequest(PermissionRequest {
            request_id: "p1".into(),
            tool: "Write".into(),
            input: json!({"file_path": "notes.md"}),
            options: vec![
                PermissionOption { id: "allow".into(), label: "Allow".into(), kind: PermissionOptionKind::AllowOnce },
                PermissionOption { id: "deny".into(), label: "Deny".into(), kind: PermissionOptionKind::RejectOnce },
            ],
            tool_call_id: Some("t2".into()),
        }),
        BlockKind::Plan(Plan {
            entries: vec![PlanEntry { content: "List the files".into(), status: PlanStatus::Completed }],
        }),
        BlockKind::Diff(Diff {
            path: "notes.md".into(),
            change: DiffChange::Replace { old_text: None, new_text: "hello\n".into() },
            tool_call_id: Some("t2".into()),
        }),
        BlockKind::Progress(Progress {
            id: "g1".into(),
            message: "indexing".into(),
            current: Some(3),
            total: Some(10),
            done: false,
        }),
        BlockKind::BgTask(BgTask {
            id: "b1".into(),
            title: "cargo build".into(),
            status: BgTaskStatus::Running,
            output: None,
        }),
        BlockKind::Error(ErrorBlock {
            message: "model overloaded".into(),
            recoverable: true,
            code: Some("model_error".into()),
        }),
        BlockKind::SessionSummary(SessionSummary {
            title: Some("List files".into()),
            usage: Some(Usage {
                input_tokens: Some(120),
                output_tokens: Some(40),
                cost_usd: Some(0.0012),
                ..Usage::default()
            }),
        }),
        BlockKind::SessionState(SessionStateNotice {
            state: Ownership::Parked,
            message: Some("a terminal drives this session".into()),
            owner_pid: Some(4242),
            queued: 1,
            resume_command: None,
        }),
        BlockKind::SessionEnd(SessionEnd { reason: EndReason::Completed, usage: None, message: None }),
    ];
    kinds.into_iter().map(|kind| Block { seq: None, ts, meta: None, kind }).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn samples_cover_every_block_type_in_order_and_validate() {
        let blocks = super::one_of_each_block(1.5);
        let types: Vec<_> = blocks.iter().map(|b| b.block_type()).collect();
        assert_eq!(types, crate::blocks::BLOCK_TYPES);
        for b in blocks {
            assert_eq!(crate::blocks::validate(serde_json::to_value(&b).unwrap()).unwrap(), b);
        }
    }
}
