//! JSON Schemas generated from the Rust types: the one schema source.
//!
//! `cargo run -p terminull-protocol --bin terminull-schema -- docs/schema` writes them;
//! a test regenerates them and fails on any drift from the committed files.

use schemars::{JsonSchema, Schema, schema_for};
use serde_json::json;

use crate::adapter::{METHODS, PROTOCOL_VERSION, method_schemas};

/// The command that regenerates the committed schemas, printed by the drift check.
pub const REGENERATE_COMMAND: &str = "cargo run -p terminull-protocol --bin terminull-schema -- docs/schema";

/// Every generated file: `(path relative to docs/schema, contents)`, sorted by path.
pub fn generate() -> Vec<(String, String)> {
    let mut files = vec![
        top::<crate::adapter::Declaration>(
            "adapter-declaration",
            "The result of `initialize`: what an adapter is and can do.",
        ),
        top::<crate::blocks::Block>("block", "One block of the session stream (bridge → app)."),
        top::<crate::control::Control>("control-message", "One control message (app → bridge)."),
        top::<crate::control::BridgeMessage>("bridge-message", "One message bridge → client on the local socket."),
        top::<crate::relay::RelayFrame>("relay-frame", "One frame on the relay WebSocket."),
    ];
    for (method, part, schema) in method_schemas() {
        let name = format!("adapter/{method}.{part}");
        files.push((
            format!("{name}.schema.json"),
            render(schema, &name, &format!("`{part}` of the adapter method `{method}`.")),
        ));
    }
    let table = json!({
        "protocol_version": PROTOCOL_VERSION,
        "methods": METHODS,
    });
    files.push(("adapter/methods.json".to_owned(), pretty(&table)));
    files.sort();
    files
}

fn top<T: JsonSchema>(name: &str, description: &str) -> (String, String) {
    (format!("{name}.schema.json"), render(schema_for!(T), name, description))
}

fn render(mut schema: Schema, name: &str, description: &str) -> String {
    schema.insert(
        "$id".to_owned(),
        json!(format!("https://terminull.dev/schema/v{PROTOCOL_VERSION}/{name}.schema.json")),
    );
    // The type's own doc comment is kept when there is one; otherwise say what the file is.
    if !schema.as_object().is_some_and(|o| o.contains_key("description")) {
        schema.insert("description".to_owned(), json!(description));
    }
    pretty(schema.as_value())
}

fn pretty(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}
