use super::*;
use terminull_protocol::blocks::{BlockKind, PermissionOption, StreamedText};

#[test]
fn json_mode_prints_appends_as_they_came() {
    let chunk = |seq, c| Block { seq: Some(seq), ..Block::now(BlockKind::Text(c)) };
    let line = json_line(&chunk(7, StreamedText::append("m", 3, "lo", false)));
    let value: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (value["offset"].as_u64(), value["text"].as_str(), value["seq"].as_u64()),
        (Some(3), Some("lo"), Some(7))
    );
    assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
    let snapshot: serde_json::Value =
        serde_json::from_str(&json_line(&chunk(8, StreamedText::snapshot("m", "hello", true)))).unwrap();
    assert!(snapshot.get("offset").is_none(), "a snapshot has no offset");
}

#[test]
fn permission_answers_pick_the_matching_option() {
    let option = |id: &str, kind| PermissionOption { id: id.into(), label: id.into(), kind };
    let request = PermissionRequest {
        request_id: "p".into(),
        tool: "Write".into(),
        input: serde_json::json!({}),
        options: vec![option("no", PermissionOptionKind::RejectOnce), option("yes", PermissionOptionKind::AllowOnce)],
        tool_call_id: None,
    };
    assert_eq!(choose(&request, PermissionAnswer::Allow).as_deref(), Some("yes"));
    assert_eq!(choose(&request, PermissionAnswer::Deny).as_deref(), Some("no"));
}

#[test]
fn allow_picks_the_allow_once_option_even_when_always_allow_comes_first() {
    // Gemini CLI and Qwen Code list `proceed_always` before `proceed_once`.
    let option = |id: &str, kind| PermissionOption { id: id.into(), label: id.into(), kind };
    let request = PermissionRequest {
        request_id: "p".into(),
        tool: "Shell".into(),
        input: serde_json::json!({"command": "echo hello"}),
        options: vec![
            option("proceed_always", PermissionOptionKind::AllowAlways),
            option("proceed_once", PermissionOptionKind::AllowOnce),
            option("reject_always", PermissionOptionKind::RejectAlways),
            option("cancel", PermissionOptionKind::RejectOnce),
        ],
        tool_call_id: None,
    };
    assert_eq!(choose(&request, PermissionAnswer::Allow).as_deref(), Some("proceed_once"));
    assert_eq!(choose(&request, PermissionAnswer::Deny).as_deref(), Some("cancel"));
    let only_always =
        PermissionRequest { options: vec![option("always", PermissionOptionKind::AllowAlways)], ..request };
    assert_eq!(choose(&only_always, PermissionAnswer::Allow).as_deref(), Some("always"));
    assert_eq!(choose(&only_always, PermissionAnswer::Deny), None);
}
