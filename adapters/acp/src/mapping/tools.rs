//! A tool call's state as the agent's updates build it up, and the blocks it becomes.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct ToolState {
    pub(super) block_id: ToolCallId,
    pub(super) name: String,
    pub(super) title: Option<String>,
    pub(super) kind: Option<String>,
    pub(super) raw_input: Option<Value>,
    pub(super) locations: Vec<Value>,
    pub(super) content: Vec<Value>,
    pub(super) raw_output: Option<Value>,
    /// The last `tool_call` block sent (`None`: not shown yet).
    pub(super) shown: Option<ToolCall>,
    pub(super) finished: bool,
    pub(super) refused: bool,
}

pub(super) fn merge(tool: &mut ToolState, f: &ToolCallFields, whole: bool) {
    let set = |target: &mut Option<String>, value: &Option<String>| {
        if value.is_some() || whole {
            target.clone_from(value);
        }
    };
    set(&mut tool.title, &f.title);
    set(&mut tool.kind, &f.kind);
    if f.name.is_some() || f.kind.is_some() || tool.name.is_empty() {
        tool.name = tool_name(f.name.as_deref(), tool.kind.as_deref());
    }
    // An empty input in an update does not erase the one known (agents announce a call
    // with `{}` and complete it later).
    let keeps_known =
        f.raw_input.as_ref().is_some_and(is_empty_input) && tool.raw_input.as_ref().is_some_and(|r| !is_empty_input(r));
    if (f.raw_input.is_some() || whole) && !keeps_known {
        tool.raw_input.clone_from(&f.raw_input);
    }
    if f.raw_output.is_some() || whole {
        tool.raw_output.clone_from(&f.raw_output);
    }
    if let Some(content) = &f.content {
        tool.content.clone_from(content);
    } else if whole {
        tool.content.clear();
    }
    if let Some(locations) = &f.locations {
        tool.locations.clone_from(locations);
    } else if whole {
        tool.locations.clear();
    }
}

fn is_empty_input(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

pub(super) fn tool_name(name: Option<&str>, kind: Option<&str>) -> String {
    name.or(kind).filter(|n| !n.trim().is_empty()).unwrap_or("tool").to_owned()
}

pub(super) fn tool_block(tool: &ToolState, status: ToolStatus) -> ToolCall {
    let input = match &tool.raw_input {
        Some(raw) => bounded_input(raw.clone()),
        None if !tool.locations.is_empty() => json!({"locations": location_paths(&tool.locations)}),
        None => json!({}),
    };
    ToolCall {
        id: tool.block_id.clone(),
        name: tool.name.clone(),
        input,
        status,
        parent_id: None,
        title: tool.title.as_ref().map(|t| bounds::bounded_chars(t, limits::TITLE_CHARS)),
    }
}

/// Closes a call: its diffs (when it succeeded), the call re-sent with its final
/// status, then its result.
pub(super) fn finish_tool(tool: &mut ToolState, status: ToolStatus, note: Option<&str>, out: &mut Vec<BlockKind>) {
    tool.finished = true;
    let mut skipped_diffs = Vec::new();
    if status == ToolStatus::Done {
        let diffs = tool.content.iter().filter(|c| c.get("type").and_then(Value::as_str) == Some("diff"));
        for (n, item) in diffs.enumerate() {
            match diff_block(item, &tool.block_id) {
                Some(diff) if n < limits::DIFFS_PER_CALL => out.push(BlockKind::Diff(diff)),
                _ => skipped_diffs.push(item.get("path").and_then(Value::as_str).unwrap_or("?").to_owned()),
            }
        }
    }
    out.push(BlockKind::ToolCall(tool_block(tool, status)));
    let mut output = match note {
        Some(note) => note.to_owned(),
        None => tool_output(tool),
    };
    if !skipped_diffs.is_empty() {
        output.push_str(&format!("\n(diffs not shown: {})", skipped_diffs.join(", ")));
    }
    out.push(BlockKind::ToolResult(ToolResult {
        tool_call_id: tool.block_id.clone(),
        output: truncate(output, limits::OUTPUT_BYTES),
        is_error: status == ToolStatus::Error,
    }));
}

/// The result text: the text of the call's content items, else its raw output, else
/// the files its diffs changed.
pub(super) fn tool_output(tool: &ToolState) -> String {
    let mut parts = Vec::new();
    let mut changed = Vec::new();
    for item in &tool.content {
        match item.get("type").and_then(Value::as_str) {
            Some("content") => parts.extend(item.get("content").and_then(content_text)),
            Some("diff") => changed.extend(item.get("path").and_then(Value::as_str).map(|p| format!("Changed {p}"))),
            Some("terminal") => {
                let id = item.get("terminalId").and_then(Value::as_str).unwrap_or("?");
                parts.push(format!("[terminal {id}]"));
            }
            _ => {}
        }
    }
    if parts.is_empty() {
        match &tool.raw_output {
            Some(Value::String(s)) => parts.push(s.clone()),
            Some(Value::Null) | None => {}
            Some(other) => parts.push(other.to_string()),
        }
    }
    if parts.is_empty() {
        parts = changed;
    }
    parts.join("\n")
}

fn diff_block(item: &Value, call: &ToolCallId) -> Option<Diff> {
    let path = item.get("path")?.as_str()?.to_owned();
    let new_text = item.get("newText")?.as_str()?.to_owned();
    let old_text = item.get("oldText").and_then(Value::as_str).map(str::to_owned);
    if new_text.len() > limits::DIFF_BYTES || old_text.as_ref().is_some_and(|t| t.len() > limits::DIFF_BYTES) {
        return None;
    }
    Some(Diff { path, change: DiffChange::Replace { old_text, new_text }, tool_call_id: Some(call.clone()) })
}
