//! The `files` and `git` controls: their `op` and fields sit beside `session_id`, and a
//! missing or wrong field is named like any control's.

use serde_json::json;

use terminull_protocol::control::{ControlError, ControlMessage, parse};

#[test]
fn files_and_git_fields_sit_beside_the_session_and_a_missing_one_is_named() {
    let c = parse(json!({"type": "files", "id": "f1", "session_id": "s", "op": "read_text", "path": "a.rs"})).unwrap();
    let ControlMessage::Files(files) = &c.message else { panic!("{c:?}") };
    assert_eq!(files.request, terminull_protocol::files::FilesRequest::ReadText { path: "a.rs".into() });
    assert_eq!(c.message.session_id().map(|s| s.0), Some("s".to_owned()));
    let g = parse(json!({"type": "git", "session_id": "s", "op": "status"})).unwrap();
    assert_eq!(g.message.message_type(), "git");
    for (input, field) in [
        (json!({"type": "files", "session_id": "s", "op": "read_text"}), "path"),
        (json!({"type": "files", "op": "list"}), "session_id"),
        (json!({"type": "git", "session_id": "s", "op": "discard", "path": "a"}), "confirmed"),
    ] {
        match parse(input.clone()) {
            Err(ControlError::InvalidField { field: got, .. }) => assert_eq!(got, field, "{input}"),
            other => panic!("{input}: expected an error naming {field}, got {other:?}"),
        }
    }
    assert!(matches!(
        parse(json!({"type": "git", "session_id": "s", "op": "force_push"})),
        Err(ControlError::InvalidField { .. })
    ));
}
