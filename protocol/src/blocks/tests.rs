use super::*;
use serde_json::json;

fn missing(block_type: &str, field: &str) -> BlockError {
    BlockError::MissingField { block_type: block_type.into(), field: field.into() }
}

#[test]
fn validate_names_the_field_that_is_wrong() {
    let cases: Vec<(Value, BlockError)> = vec![
        (json!("text"), BlockError::NotAnObject { found: "string" }),
        (json!({"ts": 1.0}), missing("?", "type")),
        (json!({"type": "nope", "ts": 1.0}), BlockError::UnknownType { block_type: "nope".into() }),
        (json!({"type": "text", "id": "a", "text": "hi", "done": true}), missing("text", "ts")),
        (json!({"type": "text", "ts": 1.0, "text": "hi", "done": true}), missing("text", "id")),
        (json!({"type": "plan", "ts": 1.0, "entries": [{"content": "x"}]}), missing("plan", "entries[0].status")),
        (
            json!({"type": "diff", "ts": 1.0, "path": "a", "change": {"format": "replace", "old_text": null}}),
            missing("diff", "change.new_text"),
        ),
    ];
    for (input, want) in cases {
        assert_eq!(validate(input.clone()).unwrap_err(), want, "input {input}");
    }
}

#[test]
fn validate_reports_wrong_types_with_the_field_path() {
    let cases: Vec<(Value, &str)> = vec![
        (json!({"type": 5, "ts": 1.0}), "type"),
        (json!({"type": "text", "ts": "now", "id": "a", "text": "", "done": false}), "ts"),
        (json!({"type": "text", "ts": -1.0, "id": "a", "text": "", "done": false}), "ts"),
        (json!({"type": "text", "ts": 1.0, "seq": -3, "id": "a", "text": "", "done": false}), "seq"),
        (json!({"type": "text", "ts": 1.0, "id": "a", "text": "", "done": "no"}), "done"),
        (
            json!({"type": "tool_call", "ts": 1.0, "id": "t", "name": "Bash", "input": {}, "status": "finished"}),
            "status",
        ),
        (json!({"type": "plan", "ts": 1.0, "entries": [{"content": "x", "status": "later"}]}), "entries[0].status"),
        (json!({"type": "text", "ts": 1.0, "_meta": [], "id": "a", "text": "", "done": false}), "_meta"),
        (json!({"type": "agent_info", "ts": 1.0, "agent_id": "e", "name": "E", "cap_images": "no"}), "cap_images"),
    ];
    for (input, field) in cases {
        match validate(input.clone()) {
            Err(BlockError::InvalidField { field: got, .. }) => assert_eq!(got, field, "input {input}"),
            other => panic!("input {input}: expected InvalidField on {field}, got {other:?}"),
        }
    }
}

#[test]
fn validate_tolerates_unknown_extra_fields() {
    let block =
        validate(json!({"type": "text", "ts": 2.5, "id": "m1", "text": "hi", "done": true, "colour": "red"})).unwrap();
    assert_eq!(block.kind, BlockKind::Text(StreamedText::snapshot("m1", "hi", true)));
    assert_eq!(block.seq, None);
}

#[test]
fn error_messages_name_block_type_and_field() {
    let e = validate(json!({"type": "tool_result", "ts": 1.0, "output": "x"})).unwrap_err();
    assert_eq!(e.to_string(), "block `tool_result`: missing field `tool_call_id`");
}

#[test]
fn block_types_list_matches_the_enum() {
    let schema = schemars::schema_for!(Block);
    let text = serde_json::to_string(&schema).unwrap();
    for t in BLOCK_TYPES {
        assert!(text.contains(&format!("\"const\":\"{t}\"")), "{t} missing from schema");
    }
    assert_eq!(BLOCK_TYPES.len(), 15);
}
