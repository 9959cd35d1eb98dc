//! The committed JSON Schemas match the Rust types, and a standard JSON Schema
//! validator refuses exactly what the bridge's contract check refuses.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use terminull_protocol::adapter::{check_declaration, required_fields};
use terminull_protocol::schema::{REGENERATE_COMMAND, generate};

fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema")
}

fn committed_files(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = format!("{prefix}{}", path.file_name().unwrap().to_string_lossy());
        if path.is_dir() {
            committed_files(&path, &format!("{name}/"), out);
        } else if name.ends_with(".json") {
            out.insert(name);
        }
    }
}

#[test]
fn committed_schemas_match_the_rust_types() {
    let generated = generate();
    let mut drifted = Vec::new();
    for (rel, contents) in &generated {
        match std::fs::read_to_string(schema_dir().join(rel)) {
            Ok(current) if &current == contents => {}
            Ok(_) => drifted.push(format!("changed: docs/schema/{rel}")),
            Err(_) => drifted.push(format!("missing: docs/schema/{rel}")),
        }
    }
    let mut on_disk = BTreeSet::new();
    committed_files(&schema_dir(), "", &mut on_disk);
    let expected: BTreeSet<_> = generated.iter().map(|(rel, _)| rel.clone()).collect();
    for stale in on_disk.difference(&expected) {
        drifted.push(format!("stale (no longer generated): docs/schema/{stale}"));
    }
    assert!(
        drifted.is_empty(),
        "the JSON Schemas under docs/schema drifted from the Rust types:\n  {}\nregenerate them with:\n  {REGENERATE_COMMAND}",
        drifted.join("\n  ")
    );
}

fn validator(file: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(schema_dir().join(file)).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{file} is not a valid schema: {e}"))
}

fn valid_declaration() -> Value {
    json!({
        "protocol_version": 1, "agent_id": "echo", "display_name": "Echo",
        "cap_images": false, "cap_documents": false, "cap_thinking": false, "cap_permissions": false,
        "cap_subagents": false, "cap_interrupt": false, "cap_input_during_turn": false, "cap_terminal": false,
        "provides_models": false, "provides_usage": false, "lease": "per_turn"
    })
}

/// Declarations the contract check refuses, one problem each (plus the acceptance case).
fn bad_declarations() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for field in required_fields() {
        let mut v = valid_declaration();
        v.as_object_mut().unwrap().remove(field);
        out.push((format!("without {field}"), v));
    }
    let mut three = valid_declaration();
    for f in ["provides_usage", "agent_id", "cap_thinking"] {
        three.as_object_mut().unwrap().remove(f);
    }
    out.push(("without provides_usage, agent_id, cap_thinking".into(), three));
    for (field, value) in [
        ("protocol_version", json!(3)),
        ("protocol_version", json!(0)),
        ("agent_id", json!("Upper")),
        ("agent_id", json!("")),
        ("display_name", json!(" ")),
        ("cap_images", json!("true")),
        ("provides_models", json!(null)),
        ("lease", json!("forever")),
        ("cli_binary", json!(5)),
        ("accepted_init_params", json!(["cwd", "cwd"])),
        ("accepted_init_params", json!(["shoe_size"])),
        ("handoff_hooks", json!(["mirror", "teleport"])),
    ] {
        let mut v = valid_declaration();
        v[field] = value.clone();
        out.push((format!("{field} = {value}"), v));
    }
    out.push(("not an object".into(), json!("echo")));
    out
}

#[test]
fn declaration_schema_and_contract_check_agree() {
    let schema = validator("adapter-declaration.schema.json");
    let good = valid_declaration();
    assert!(schema.is_valid(&good), "{:?}", schema.iter_errors(&good).map(|e| e.to_string()).collect::<Vec<_>>());
    assert!(check_declaration(&good).is_ok());
    let mut full = good.clone();
    full["accepted_init_params"] = json!(["cwd", "model", "binary", "resume_session_id", "on_session_id", "effort"]);
    full["handoff_hooks"] = json!([
        "scan_external_sessions",
        "is_cwd_externally_owned",
        "mirror",
        "latest_sid_for_cwd",
        "terminal_resume_command",
        "release"
    ]);
    full["cli_binary"] = json!("echo");
    assert!(schema.is_valid(&full) && check_declaration(&full).is_ok());
    let mut appends = good.clone();
    appends["protocol_version"] = json!(2);
    assert!(schema.is_valid(&appends) && check_declaration(&appends).is_ok(), "version 2 is accepted too");

    for (what, bad) in bad_declarations() {
        assert!(!schema.is_valid(&bad), "the JSON Schema accepts a declaration {what}");
        assert!(check_declaration(&bad).is_err(), "check_declaration accepts a declaration {what}");
    }
}

#[test]
fn declaration_schema_errors_name_the_three_missing_fields() {
    let schema = validator("adapter-declaration.schema.json");
    let mut bad = valid_declaration();
    for f in ["provides_usage", "agent_id", "cap_thinking"] {
        bad.as_object_mut().unwrap().remove(f);
    }
    let messages: Vec<String> = schema.iter_errors(&bad).map(|e| e.to_string()).collect();
    for f in ["provides_usage", "agent_id", "cap_thinking"] {
        assert!(messages.iter().any(|m| m.contains(f)), "no schema error names {f}: {messages:?}");
    }
}

#[test]
fn block_control_and_relay_schemas_accept_what_the_types_emit() {
    let cases = [
        (
            "block.schema.json",
            json!({"type": "text", "seq": 3, "ts": 1.5, "id": "m", "text": "hi", "done": false}),
            true,
        ),
        ("block.schema.json", json!({"type": "text", "ts": 1.5, "text": "hi", "done": false}), false),
        ("block.schema.json", json!({"type": "sparkle", "ts": 1.5}), false),
        ("control-message.schema.json", json!({"type": "interrupt", "session_id": "s1"}), true),
        ("control-message.schema.json", json!({"type": "interrupt"}), false),
        ("relay-frame.schema.json", json!({"type": "replay_done", "session_id": "s1", "last_seq": 9}), true),
        ("relay-frame.schema.json", json!({"type": "replay_done"}), false),
    ];
    for (file, value, ok) in cases {
        assert_eq!(validator(file).is_valid(&value), ok, "{file}: {value}");
    }
}

#[test]
fn every_method_schema_compiles() {
    for (rel, _) in generate() {
        if rel.ends_with(".schema.json") {
            validator(&rel);
        }
    }
}

fn example(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/declarations").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn example_declarations_are_judged_alike_by_the_check_and_the_schema() {
    let schema = validator("adapter-declaration.schema.json");
    let good = example("echo.json");
    assert!(check_declaration(&good).is_ok() && schema.is_valid(&good));

    let bad = example("echo-missing-fields.json");
    let mut named: Vec<_> = check_declaration(&bad).unwrap_err().into_iter().map(|v| v.field).collect();
    named.sort();
    assert_eq!(named, ["agent_id", "cap_thinking", "provides_usage"]);
    assert_eq!(schema.iter_errors(&bad).count(), 3);
}
