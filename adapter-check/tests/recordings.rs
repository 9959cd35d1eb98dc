//! Golden stdio recordings of the three example adapters (`tests/transcripts/*.jsonl`):
//! each is replayed against its adapter and must match; a tampered recording must be
//! reported as a mismatch naming the entry; and the normalisation rules, one by one.
//!
//! To re-record the golden files after an intended change to an example adapter or to
//! the script: `TERMINULL_UPDATE_TRANSCRIPTS=1 cargo test -p terminull-adapter-check --test recordings`.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use terminull_adapter_check::recording::{
    Entry, MismatchKind, Normalizer, RecordingError, ReplayOptions, Script, UPDATE_ENV, normalize, parse_jsonl, record,
    replay, replay_with, to_jsonl,
};
use tokio::sync::OnceCell;

fn golden_path(name: &str) -> PathBuf {
    support::workspace().join("tests/transcripts").join(format!("{name}.jsonl"))
}

fn example(name: &str) -> (PathBuf, Vec<String>) {
    let (_, program, args) =
        support::examples().into_iter().find(|(n, _, _)| *n == name).unwrap_or_else(|| panic!("no example {name}"));
    (program, args)
}

fn updating() -> bool {
    std::env::var(UPDATE_ENV).is_ok_and(|v| v == "1")
}

/// The golden transcript `name`. With `TERMINULL_UPDATE_TRANSCRIPTS=1` it is first
/// re-recorded, once per test run, before any test reads it.
async fn load_golden(name: &str) -> Vec<Entry> {
    static RECORDED: LazyLock<Mutex<HashMap<String, Arc<OnceCell<()>>>>> = LazyLock::new(Default::default);
    let path = golden_path(name);
    if updating() {
        let cell = RECORDED.lock().unwrap().entry(name.to_owned()).or_default().clone();
        cell.get_or_init(|| async {
            let (program, args) = example(name);
            let entries = record(&program, &args, &Script::default()).await.unwrap_or_else(|e| panic!("{name}: {e}"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, to_jsonl(&entries)).unwrap();
        })
        .await;
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (record it with {UPDATE_ENV}=1)", path.display()));
    parse_jsonl(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Replays the golden transcript against its adapter, and checks that a fresh
/// recording still gives exactly the golden file.
async fn check_golden(name: &str) -> Vec<Entry> {
    let (program, args) = example(name);
    let golden = load_golden(name).await;
    let report = replay(&golden, &program, &args).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(report.is_match(), "{name}: {report}\n(re-record with {UPDATE_ENV}=1 if the change is intended)");
    assert_eq!(report.entries, golden.len());
    assert_eq!(report.sent + report.matched, golden.len());
    assert!(report.exit_status.is_some_and(|s| s.success()), "{name}: {report:?}");

    let again = record(&program, &args, &Script::default()).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(to_jsonl(&again), to_jsonl(&golden), "{name}: a fresh recording differs from the golden file");
    golden
}

/// The methods of the requests in a transcript, in order.
fn methods(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .filter_map(|e| match e {
            Entry::ToAdapter(m) => m["method"].as_str().map(str::to_owned),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn echo_rs_matches_its_golden_transcript() {
    // provides_usage, not provides_models; accepts cwd and on_session_id.
    let golden = check_golden("echo-rs").await;
    assert_eq!(methods(&golden), ["initialize", "detect", "start", "send", "get_usage", "stop"]);
    let text = to_jsonl(&golden);
    assert!(text.contains(r#""cwd":"<cwd>""#) && text.contains("<agent-session-1>"), "{text}");
}

#[tokio::test]
async fn echo_py_matches_its_golden_transcript() {
    // provides_models and provides_usage; accepts model and effort too.
    let golden = check_golden("echo-py").await;
    assert_eq!(methods(&golden), ["initialize", "detect", "list_models", "start", "send", "get_usage", "stop"]);
    let start = golden.iter().find_map(|e| e.msg().filter(|m| m["method"] == "start")).unwrap();
    assert_eq!(
        start["params"],
        json!({"session_id": "transcript-session", "cwd": "<cwd>", "model": "echo-1", "effort": "medium"})
    );
}

#[tokio::test]
async fn echo_node_matches_its_golden_transcript() {
    let golden = check_golden("echo-node").await;
    assert_eq!(methods(&golden), ["initialize", "detect", "start", "send", "stop"]);
}

#[tokio::test]
async fn every_golden_transcript_has_the_turn_and_stored_normalised() {
    for name in ["echo-rs", "echo-py", "echo-node"] {
        let golden = load_golden(name).await;
        let text = to_jsonl(&golden);
        assert_eq!(streamed_text(&golden), "You said: hello transcript", "{name}: {text}");
        assert!(text.contains(r#""type":"session_end""#), "{name}");
        assert!(text.contains(r#""id":"<id-1>""#), "{name}: text ids are numbered");
        assert!(!text.contains("/tmp"), "{name}: the temporary cwd leaked");
        for entry in &golden {
            if let Some(ts) = entry.msg().and_then(|m| m.pointer("/params/block/ts")) {
                assert_eq!(ts, &json!(0), "{name}: {entry}");
            }
        }
        assert_eq!(parse_jsonl(&text).unwrap(), golden, "{name}: JSONL round trip");
    }
}

/// The text the transcript's `text` chunks rebuild (snapshots from the version 1
/// examples, appends from the SDK's).
fn streamed_text(entries: &[Entry]) -> String {
    let mut message = terminull_protocol::streamed::Assembly::default();
    for block in entries.iter().filter_map(|e| e.msg()?.pointer("/params/block")) {
        if block["type"] == "text" {
            let chunk = serde_json::from_value(block.clone()).expect("a text chunk");
            message.apply(&chunk);
        }
    }
    message.text().to_owned()
}

/// The index of the `done: true` text chunk in a transcript.
fn final_text_entry(entries: &[Entry]) -> usize {
    entries
        .iter()
        .position(|e| {
            e.msg().is_some_and(|m| {
                m.pointer("/params/block/type") == Some(&json!("text")) && m["params"]["block"]["done"] == true
            })
        })
        .expect("a done text chunk")
}

#[tokio::test]
async fn an_altered_reply_is_a_mismatch_naming_the_entry() {
    let (program, args) = example("echo-node");
    let mut altered = load_golden("echo-node").await;
    let index = final_text_entry(&altered);
    let Entry::FromAdapter(msg) = &mut altered[index] else { panic!("not a from_adapter entry") };
    msg["params"]["block"]["text"] = json!("You said: goodbye transcript");

    let report = replay(&altered, &program, &args).await.unwrap();
    assert!(!report.is_match());
    let mismatch = report.mismatch.as_ref().unwrap();
    assert_eq!(mismatch.entry, index);
    let MismatchKind::Different { expected, actual, path } = &mismatch.kind else { panic!("{mismatch}") };
    assert_eq!(path, "/params/block/text");
    assert_eq!(expected, &altered[index]);
    assert_eq!(actual.msg().unwrap()["params"]["block"]["text"], "You said: hello transcript");
    assert_eq!(report.matched + report.sent, index, "everything before the entry matched");
    let shown = report.to_string();
    assert!(shown.contains(&format!("entry {index} (transcript line {})", index + 1)), "{shown}");
    assert!(shown.contains("goodbye transcript") && shown.contains("/params/block/text"), "{shown}");
}

#[tokio::test]
async fn an_altered_request_shows_up_in_the_answers() {
    // The prompt changed: the first chunk that carries it is the first difference.
    let (program, args) = example("echo-py");
    let mut altered = load_golden("echo-py").await;
    let send = altered.iter().position(|e| e.msg().is_some_and(|m| m["method"] == "send")).unwrap();
    let Entry::ToAdapter(msg) = &mut altered[send] else { panic!("not a to_adapter entry") };
    msg["params"]["text"] = json!("hello transcripts");

    let report = replay(&altered, &program, &args).await.unwrap();
    let mismatch = report.mismatch.expect("a mismatch");
    assert!(mismatch.entry > send, "{mismatch}");
    assert!(
        matches!(&mismatch.kind, MismatchKind::Different { path, .. } if path == "/params/block/text"),
        "{mismatch}"
    );
    assert!(mismatch.to_string().contains("hello transcripts"), "{mismatch}");
}

#[tokio::test]
async fn a_line_the_adapter_never_writes_and_an_adapter_that_does_not_exit_are_mismatches() {
    let (program, args) = example("echo-node");
    let golden = load_golden("echo-node").await;
    let opts = ReplayOptions { line_timeout: Duration::from_secs(5), exit_timeout: Duration::from_secs(1) };

    // One more expected line after the answer to stop: the adapter exits instead.
    let mut longer = golden.clone();
    longer.push(Entry::FromAdapter(json!({"jsonrpc": "2.0", "method": "stream", "params": {}})));
    let report = replay_with(&longer, &program, &args, &opts).await.unwrap();
    let mismatch = report.mismatch.expect("a mismatch");
    assert_eq!(mismatch.entry, golden.len());
    assert!(matches!(mismatch.kind, MismatchKind::Closed { .. }), "{mismatch}");

    // Without stop and its answer the adapter keeps running: it must exit, and does not.
    let shorter = &golden[..golden.len() - 2];
    let report = replay_with(shorter, &program, &args, &opts).await.unwrap();
    let mismatch = report.mismatch.expect("a mismatch");
    assert_eq!(mismatch.entry, shorter.len());
    assert!(matches!(mismatch.kind, MismatchKind::NoExit { .. }), "{mismatch}");
    assert!(mismatch.to_string().contains("did not exit"), "{mismatch}");
}

#[tokio::test]
async fn a_stdout_line_that_is_not_json_is_recorded_raw_and_compared() {
    // A shell "adapter" that prints a banner, then answers initialize with an error.
    let script = r#"echo "starting in $(pwd)"; read -r line; echo '{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"no"}}'; cat >/dev/null"#;
    let args = vec!["-c".to_owned(), script.to_owned()];
    let err = record("sh", &args, &Script::default()).await.unwrap_err();
    assert!(matches!(err, RecordingError::Initialize { .. }), "{err}");

    let transcript = vec![
        Entry::ToAdapter(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"})),
        Entry::FromAdapterRaw(format!("starting in {}", std::env::current_dir().unwrap().display())),
        Entry::FromAdapter(json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "no"}})),
    ];
    let opts = ReplayOptions { line_timeout: Duration::from_secs(10), exit_timeout: Duration::from_millis(300) };
    let report = replay_with(&transcript, "sh", &args, &opts).await.unwrap();
    // Everything matched; the shell then waits for end of input and is reported for it.
    assert_eq!(report.matched, 2, "{report}");
    assert!(matches!(report.mismatch.unwrap().kind, MismatchKind::NoExit { .. }));

    let mut wrong = transcript.clone();
    wrong[1] = Entry::FromAdapterRaw("starting".into());
    let report = replay_with(&wrong, "sh", &args, &opts).await.unwrap();
    let mismatch = report.mismatch.unwrap();
    assert_eq!(mismatch.entry, 1);
    assert!(matches!(&mismatch.kind, MismatchKind::Different { path, .. } if path.is_empty()), "{mismatch}");
}

#[tokio::test]
async fn an_adapter_that_cannot_start_is_an_error() {
    let err = replay(&[], "/nonexistent/terminull-adapter", &[]).await.unwrap_err();
    assert!(matches!(err, RecordingError::Spawn(_)), "{err}");
    let err = record("/nonexistent/terminull-adapter", &[], &Script::default()).await.unwrap_err();
    assert!(err.to_string().contains("could not start"), "{err}");
}

// ── normalisation and the format ─────────────────────────────────────────────────────

fn stream(block: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "stream", "params": {"block": block}})
}

#[test]
fn timestamps_become_zero_wherever_they_are() {
    let cwd = Path::new("/work/session");
    let mut n = Normalizer::new(cwd);
    let msg = json!({"jsonrpc": "2.0", "id": 4, "result": {
        "sessions": [{"agent_session_id": "a", "updated_at": 1767225000.5}],
        "frame": {"server_ts": 17, "ts": 3.25},
        "note": {"ts": "not a number"}
    }});
    let out = n.from_adapter(&msg);
    assert_eq!(out["result"]["sessions"][0]["updated_at"], 0);
    assert_eq!(out["result"]["frame"], json!({"server_ts": 0, "ts": 0}));
    assert_eq!(out["result"]["note"]["ts"], "not a number", "only numbers are timestamps");
    assert_eq!(out["id"], 4, "request ids are kept");
}

#[test]
fn block_ids_are_numbered_by_first_appearance_and_references_follow_them() {
    let mut n = Normalizer::new(Path::new("/w"));
    let lines = [
        stream(json!({"type": "thinking", "ts": 1.0, "id": "th-9", "text": "hm", "done": true})),
        stream(
            json!({"type": "tool_call", "ts": 1.0, "id": "call-x", "name": "Bash", "input": {}, "status": "running"}),
        ),
        stream(json!({"type": "permission_request", "ts": 1.0, "request_id": "perm-7", "tool": "Bash", "input": {},
            "options": [], "tool_call_id": "call-x"})),
        stream(json!({"type": "tool_call", "ts": 1.0, "id": "call-y", "parent_id": "call-x", "name": "Task",
            "input": {}, "status": "running"})),
        stream(json!({"type": "tool_result", "ts": 1.0, "tool_call_id": "call-x", "output": "ok", "is_error": false})),
        stream(json!({"type": "text", "ts": 1.0, "id": "th-9", "text": "same id as the thinking", "done": true})),
        stream(json!({"type": "progress", "ts": 1.0, "id": "p", "message": "m", "done": false})),
        stream(json!({"type": "bg_task", "ts": 1.0, "id": "bg", "title": "t", "status": "running"})),
        stream(json!({"type": "error", "ts": 1.0, "message": "m", "recoverable": true, "code": "id-ish"})),
    ];
    let out: Vec<Value> = lines.iter().map(|l| n.from_adapter(l)["params"]["block"].clone()).collect();
    assert_eq!(out[0]["id"], "<id-1>");
    assert_eq!(out[1]["id"], "<id-2>");
    assert_eq!(out[2]["request_id"], "<id-3>");
    assert_eq!(out[2]["tool_call_id"], "<id-2>");
    assert_eq!(out[3]["id"], "<id-4>");
    assert_eq!(out[3]["parent_id"], "<id-2>");
    assert_eq!(out[4]["tool_call_id"], "<id-2>");
    assert_eq!(out[5]["id"], "<id-1>");
    assert_eq!(out[6]["id"], "<id-5>");
    assert_eq!(out[7]["id"], "<id-6>");
    assert_eq!(out[8]["code"], "id-ish", "other strings are left alone");

    // The bridge's answer to the permission request names it by its placeholder, and
    // de-normalising turns it back into this run's id.
    let answer = json!({"jsonrpc": "2.0", "id": 9, "method": "permission_response",
        "params": {"request_id": "perm-7", "option_id": "allow"}});
    let normal = n.to_adapter(&answer);
    assert_eq!(normal["params"]["request_id"], "<id-3>");
    assert_eq!(n.denormalize(&normal), answer);
}

#[test]
fn ids_outside_blocks_and_list_models_ids_are_kept() {
    let mut n = Normalizer::new(Path::new("/w"));
    let models = json!({"jsonrpc": "2.0", "id": 3, "result": {"models": [{"id": "echo-1", "name": "Echo 1"}]}});
    assert_eq!(n.from_adapter(&models), models);
    let info = json!({"jsonrpc": "2.0", "id": 4, "result": {"agent_info": {"agent_id": "echo", "name": "Echo"}}});
    assert_eq!(n.from_adapter(&info), info);
}

#[test]
fn agent_session_ids_get_their_own_numbering() {
    let mut n = Normalizer::new(Path::new("/w"));
    let a = n.from_adapter(&json!({"jsonrpc": "2.0", "method": "session_id", "params": {"agent_session_id": "u-1"}}));
    let b = n.from_adapter(&json!({"jsonrpc": "2.0", "method": "session_id", "params": {"agent_session_id": "u-2"}}));
    assert_eq!(a["params"]["agent_session_id"], "<agent-session-1>");
    assert_eq!(b["params"]["agent_session_id"], "<agent-session-2>");
    let start = n.to_adapter(&json!({"jsonrpc": "2.0", "id": 2, "method": "start",
        "params": {"session_id": "s", "resume_session_id": "u-1"}}));
    assert_eq!(start["params"]["resume_session_id"], "<agent-session-1>");
    assert_eq!(start["params"]["session_id"], "s", "the bridge's own session id is kept");
}

#[test]
fn the_cwd_becomes_a_placeholder_inside_any_string_and_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let mut n = Normalizer::new(cwd);
    let c = cwd.display().to_string();
    let start = json!({"jsonrpc": "2.0", "id": 2, "method": "start", "params": {"session_id": "s", "cwd": c}});
    let normal = n.to_adapter(&start);
    assert_eq!(normal["params"]["cwd"], "<cwd>");
    assert_eq!(n.denormalize(&normal), start);
    let msg = n.from_adapter(&stream(json!({"type": "tool_result", "ts": 1.0, "tool_call_id": "t",
        "output": format!("ls {c}/src\n{c}/src/main.rs"), "is_error": false})));
    assert_eq!(msg["params"]["block"]["output"], "ls <cwd>/src\n<cwd>/src/main.rs");
    assert_eq!(n.raw(&format!("log: in {c}")), "log: in <cwd>");
}

#[test]
fn detect_path_and_version_are_placeholders_only_in_detects_answer() {
    let mut n = Normalizer::new(Path::new("/w"));
    n.to_adapter(&json!({"jsonrpc": "2.0", "id": 2, "method": "detect"}));
    n.to_adapter(&json!({"jsonrpc": "2.0", "id": 3, "method": "start", "params": {"session_id": "s"}}));
    let detect = n.from_adapter(&json!({"jsonrpc": "2.0", "id": 2,
        "result": {"installed": true, "path": "/usr/bin/acme", "version": "2.4.1"}}));
    assert_eq!(detect["result"], json!({"installed": true, "path": "<path>", "version": "<version>"}));
    let bare = json!({"jsonrpc": "2.0", "id": 5, "result": {"installed": false}});
    assert_eq!(n.from_adapter(&bare), bare, "absent fields stay absent");
    let start = json!({"jsonrpc": "2.0", "id": 3, "result": {"agent_info": {"version": "2.4.1"}}});
    assert_eq!(n.from_adapter(&start), start, "start's version is the adapter's, kept");
}

#[test]
fn normalize_applies_the_rules_to_a_whole_run() {
    let cwd = Path::new("/tmp/run-1");
    let raw = vec![
        Entry::ToAdapter(json!({"jsonrpc": "2.0", "id": 1, "method": "start", "params": {"cwd": "/tmp/run-1"}})),
        Entry::FromAdapterRaw("banner from /tmp/run-1".into()),
        Entry::FromAdapter(stream(json!({"type": "text", "ts": 9.5, "id": "m-abc", "text": "x", "done": true}))),
    ];
    let normal = normalize(&raw, cwd);
    assert_eq!(
        to_jsonl(&normal),
        concat!(
            r#"{"dir":"to_adapter","msg":{"id":1,"jsonrpc":"2.0","method":"start","params":{"cwd":"<cwd>"}}}"#,
            "\n",
            r#"{"dir":"from_adapter","raw":"banner from <cwd>"}"#,
            "\n",
            r#"{"dir":"from_adapter","msg":{"jsonrpc":"2.0","method":"stream","params":{"block":{"done":true,"id":"<id-1>","text":"x","ts":0,"type":"text"}}}}"#,
            "\n",
        )
    );
}

#[test]
fn jsonl_round_trips_and_bad_lines_are_named() {
    let entries = vec![
        Entry::ToAdapter(json!({"jsonrpc": "2.0", "id": 1, "method": "stop"})),
        Entry::FromAdapterRaw("not \"json\"\twith a tab".into()),
        Entry::FromAdapter(json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
    ];
    let text = to_jsonl(&entries);
    assert_eq!(text.lines().count(), 3);
    assert_eq!(parse_jsonl(&text).unwrap(), entries);
    assert_eq!(parse_jsonl(&format!("\n{text}\n\n")).unwrap(), entries, "blank lines are skipped");

    for (bad, problem) in [
        (r#"{"dir":"to_adapter","raw":"x"}"#, "never `raw`"),
        (r#"{"dir":"from_adapter"}"#, "needs `msg` or `raw`"),
        (r#"{"dir":"from_adapter","msg":{},"raw":"x"}"#, "not both"),
        (r#"{"dir":"sideways","msg":{}}"#, "unknown variant"),
        (r#"{"dir":"to_adapter","msg":{},"extra":1}"#, "unknown field"),
        ("not json", "expected"),
    ] {
        let err = parse_jsonl(&format!("{}{bad}\n", to_jsonl(&entries[..1]))).unwrap_err();
        let RecordingError::Parse { line, problem: got } = &err else { panic!("{err}") };
        assert_eq!(*line, 2, "{bad}");
        assert!(got.contains(problem), "{bad}: {got}");
        assert!(err.to_string().starts_with("transcript line 2: "), "{err}");
    }
}

#[tokio::test]
async fn appends_split_differently_from_the_recording_still_match() {
    // The golden file holds the answer as one joined append; a recording that splits it
    // word by word (as a slower adapter run would) must match the same adapter.
    let (program, args) = example("echo-rs");
    let golden = load_golden("echo-rs").await;
    let index = final_text_entry(&golden);
    let Entry::FromAdapter(joined) = &golden[index] else { panic!("not a from_adapter entry") };
    let text = joined["params"]["block"]["text"].as_str().unwrap().to_owned();
    assert_eq!(joined["params"]["block"]["offset"], 0, "the golden file joins the whole answer");
    let mut split = golden[..index].to_vec();
    let mut offset = 0;
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    for (i, word) in words.iter().enumerate() {
        let mut piece = joined.clone();
        piece["params"]["block"]["offset"] = json!(offset);
        piece["params"]["block"]["text"] = json!(word);
        piece["params"]["block"]["done"] = json!(i + 1 == words.len());
        split.push(Entry::FromAdapter(piece));
        offset += word.len();
    }
    split.extend_from_slice(&golden[index + 1..]);
    let report = replay(&split, &program, &args).await.unwrap();
    assert!(report.is_match(), "{report}");

    // A piece that does not add up is still a mismatch, reported inside the run.
    let mut wrong = split.clone();
    let Entry::FromAdapter(last_word) = &mut wrong[index + words.len() - 1] else { panic!() };
    last_word["params"]["block"]["text"] = json!("transcripts");
    let report = replay(&wrong, &program, &args).await.unwrap();
    let mismatch = report.mismatch.expect("a wrong piece is reported");
    assert!((index..index + words.len()).contains(&mismatch.entry), "{mismatch}");
}
