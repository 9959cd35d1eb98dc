//! The tests of [`super`]: real `sh` children, their process groups and stdio.

use super::*;
use bytes::BytesMut;

#[test]
fn stderr_quotes_keep_the_last_meaningful_lines_within_bounds() {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(describe_exit(Some(ExitStatus::from_raw(1 << 8))), "with status 1");
    assert_eq!(describe_exit(Some(ExitStatus::from_raw(9))), "on signal 9");
    assert_eq!(describe_exit(None), "(exit status unknown)");
    assert_eq!(quote_stderr("a\n\nb\n"), "a\nb");
    let backtrace =
        "Error: no rollout found\n\nStack backtrace:\n   0: <unknown>\n  12: main\n      at src/main.rs:3\n";
    assert_eq!(quote_stderr(backtrace), "Error: no rollout found");
    let many: String = (0..40).map(|i| format!("line {i}\n")).collect();
    assert!(quote_stderr(&many).starts_with("line 28\n") && quote_stderr(&many).ends_with("line 39"));
    let wide = "é".repeat(5000);
    assert_eq!(quote_stderr(&wide).chars().count(), STDERR_LINE_CHARS + 1);
    let tall: String = (0..12).map(|_| format!("{}\n", "x".repeat(239))).collect();
    assert!(quote_stderr(&tall).len() <= STDERR_QUOTE_BYTES + "…".len());
}
use serde_json::json;
use tokio_util::codec::Decoder;

fn sh(script: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script);
    cmd
}

fn opts(lines: Lines, max_line_bytes: usize) -> SpawnOptions {
    SpawnOptions { lines, max_line_bytes, ..SpawnOptions::default() }
}

#[tokio::test]
async fn a_child_is_marked_as_terminulls_and_gets_the_pwd_of_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    // `env`, not a shell: a shell would fix PWD up by itself.
    let mut cmd = Command::new("env");
    cmd.current_dir(dir.path());
    let (_process, rx) = AgentProcess::spawn(cmd, opts(Lines::Text, 64 * 1024)).unwrap();
    let lines: Vec<String> = collect(rx)
        .await
        .into_iter()
        .filter_map(|item| match item {
            Ok(Value::String(line)) => Some(line),
            _ => None,
        })
        .collect();
    let var = |name: &str| lines.iter().find_map(|l| l.strip_prefix(&format!("{name}=")).map(str::to_owned));
    let pwd = var("PWD").expect("PWD is set");
    assert_eq!(Path::new(&pwd), std::fs::canonicalize(dir.path()).unwrap());
    assert!(var(crate::SESSION_MARKER_ENV).is_some_and(|m| !m.is_empty()), "{lines:?}");
}

async fn collect(mut rx: LineReceiver) -> Vec<LineItem> {
    let mut items = Vec::new();
    // Generous bound: only there to turn a hang into a failure.
    while let Some(item) = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await.expect("stdout hung") {
        items.push(item);
    }
    items
}

/// True when `pid` no longer exists (or is a zombie that merely awaits reaping).
#[cfg(target_os = "linux")]
fn is_gone(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[cfg(target_os = "linux")]
async fn wait_gone(pid: u64) -> bool {
    for _ in 0..400 {
        if is_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

#[tokio::test]
async fn json_lines_arrive_in_order_with_bad_lines_as_error_items() {
    let script = r#"
        echo '{"n":1}'
        echo 'npm WARN deprecated'
        echo
        head -c 5000 /dev/zero | tr '\0' x; echo
        printf '{"n":2}'
    "#;
    let (mut p, rx) = AgentProcess::spawn(sh(script), opts(Lines::Json, 1024)).unwrap();
    let items = collect(rx).await;
    assert_eq!(items.len(), 4, "{items:?}");
    assert_eq!(items[0], Ok(json!({"n": 1})));
    match &items[1] {
        Err(LineError::NotJson { line: 2, preview, .. }) => assert_eq!(preview, "npm WARN deprecated"),
        other => panic!("expected NotJson on line 2, got {other:?}"),
    }
    assert_eq!(items[2], Err(LineError::TooLong { line: 4, length: 5000, max: 1024 }));
    assert_eq!(items[3], Ok(json!({"n": 2})), "a last line without newline counts");
    assert!(p.wait().await.unwrap().success());
}

#[tokio::test]
async fn text_mode_yields_strings_keeps_blank_lines_and_survives_bad_bytes() {
    let script = r#"
        printf 'plain line\r\n\n'
        printf '\377bad utf8\n'
        head -c 5000 /dev/zero | tr '\0' x; echo
        printf 'last'
    "#;
    let (mut p, rx) = AgentProcess::spawn(sh(script), opts(Lines::Text, 1024)).unwrap();
    let items = collect(rx).await;
    assert_eq!(
        items,
        vec![
            Ok(json!("plain line")),
            Ok(json!("")),
            Ok(json!("\u{FFFD}bad utf8")),
            Err(LineError::TooLong { line: 4, length: 5000, max: 1024 }),
            Ok(json!("last")),
        ]
    );
    assert!(p.wait().await.unwrap().success());
}

#[tokio::test]
async fn writes_reach_the_child_and_closing_stdin_ends_it() {
    let (mut p, rx) =
        AgentProcess::spawn(sh("while read -r l; do echo \"got $l\"; done"), opts(Lines::Text, 1024)).unwrap();
    p.write_line("hello").await.unwrap();
    p.write_json(&json!({"a": [1, 2]})).await.unwrap();
    let outcome = p.shutdown(Duration::from_secs(10)).await;
    assert_eq!(outcome.stage, ShutdownStage::Exited);
    assert!(outcome.status.is_some_and(|s| s.success()), "{outcome:?}");
    assert_eq!(collect(rx).await, vec![Ok(json!("got hello")), Ok(json!("got {\"a\":[1,2]}"))]);
    assert!(matches!(p.write_line("late").await, Err(WriteError::StdinClosed { .. })));
}

#[tokio::test]
async fn stderr_tail_is_bounded_in_lines_and_holds_the_last_ones() {
    let script = r#"i=1; while [ $i -le 500 ]; do echo "err line $i" >&2; i=$((i+1)); done; exit 3"#;
    let options = SpawnOptions { stderr_tail_lines: 10, ..SpawnOptions::default() };
    let (mut p, _rx) = AgentProcess::spawn(sh(script), options).unwrap();
    let status = p.wait().await.unwrap();
    assert_eq!(status.code(), Some(3));
    let want: Vec<String> = (491..=500).map(|i| format!("err line {i}")).collect();
    assert_eq!(p.stderr_tail(), want.join("\n"));
}

#[tokio::test]
async fn stderr_lines_are_forwarded_to_a_watcher_and_dropped_when_it_is_full() {
    let script = r#"i=1; while [ $i -le 5 ]; do echo "err line $i" >&2; i=$((i+1)); done"#;
    let (tx, mut lines) = tokio::sync::mpsc::channel(3);
    let options = SpawnOptions { stderr_lines: Some(tx), ..SpawnOptions::default() };
    let (mut p, _rx) = AgentProcess::spawn(sh(script), options).unwrap();
    p.wait().await.unwrap();
    let mut seen = Vec::new();
    while let Ok(line) = lines.try_recv() {
        seen.push(line);
    }
    assert_eq!(seen, ["err line 1", "err line 2", "err line 3"], "the watcher's channel holds 3; the rest are dropped");
    assert!(p.stderr_tail().ends_with("err line 5"), "the tail has every line");
}

#[tokio::test]
async fn stderr_tail_is_bounded_in_bytes_and_marks_over_long_lines() {
    let script = r#"
        head -c 500 /dev/zero | tr '\0' y >&2; echo >&2
        i=1; while [ $i -le 50 ]; do echo "err line $i" >&2; i=$((i+1)); done
        head -c 500 /dev/zero | tr '\0' z >&2; echo >&2
    "#;
    let options = SpawnOptions { stderr_tail_bytes: 64, ..SpawnOptions::default() };
    let (mut p, _rx) = AgentProcess::spawn(sh(script), options).unwrap();
    p.wait().await.unwrap();
    let tail = p.stderr_tail();
    assert!(tail.len() <= 64 + 10, "tail too big: {tail:?}");
    assert!(!tail.contains("yyy") && !tail.contains("zzz"), "{tail:?}");
    let last = tail.lines().last().unwrap();
    assert!(last.contains("too long") && last.contains("500 bytes"), "{tail:?}");
    assert!(tail.lines().all(|l| l.len() <= 64));
}

#[tokio::test]
async fn spawning_a_missing_program_is_a_typed_error() {
    let err = AgentProcess::spawn(Command::new("/nonexistent/terminull-agent"), SpawnOptions::default())
        .map(|_| ())
        .unwrap_err();
    let SpawnError::Spawn { program, source } = &err;
    assert_eq!(program, "/nonexistent/terminull-agent");
    assert_eq!(source.kind(), io::ErrorKind::NotFound);
    assert!(err.to_string().contains("could not start"));
}

/// Spawns `script`, which starts a grandchild and first prints `{"grandchild": <pid>}`:
/// the process, the rest of its lines and the grandchild's pid.
#[cfg(target_os = "linux")]
async fn spawn_with_grandchild(script: &str) -> (AgentProcess, LineReceiver, u64) {
    let (p, mut rx) = AgentProcess::spawn(sh(script), SpawnOptions::default()).unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await.unwrap().unwrap().unwrap();
    (p, rx, first["grandchild"].as_u64().unwrap())
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn shutdown_kills_a_child_that_ignores_sigterm_and_its_grandchild() {
    // The shell ignores SIGTERM and so does its `sleep` (an ignored signal stays
    // ignored across exec); neither reads stdin. Only SIGKILL to the group ends both.
    let script = r#"trap '' TERM; sleep 1000 & echo "{\"grandchild\": $!}"; wait"#;
    let (mut p, rx, grandchild) = spawn_with_grandchild(script).await;
    assert!(!is_gone(grandchild));
    let leader = u64::from(p.pid());

    let outcome = tokio::time::timeout(Duration::from_secs(60), p.shutdown(Duration::from_millis(300)))
        .await
        .expect("shutdown hung");
    assert_eq!(outcome.stage, ShutdownStage::Killed);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(outcome.status.and_then(|s| s.signal()), Some(9));
    assert!(wait_gone(leader).await, "child {leader} still alive");
    assert!(wait_gone(grandchild).await, "grandchild {grandchild} still alive");
    assert_eq!(collect(rx).await, vec![], "stdout closed once the group died");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn shutdown_sweeps_a_grandchild_left_behind_by_a_child_that_exited() {
    // The shell exits at end of input but leaves `sleep` running in its group.
    let script = r#"sleep 1000 & echo "{\"grandchild\": $!}"; cat >/dev/null"#;
    let (mut p, _rx, grandchild) = spawn_with_grandchild(script).await;

    let outcome =
        tokio::time::timeout(Duration::from_secs(60), p.shutdown(Duration::from_secs(5))).await.expect("shutdown hung");
    assert_eq!(outcome.stage, ShutdownStage::Exited);
    assert!(outcome.status.is_some_and(|s| s.success()), "{outcome:?}");
    assert!(wait_gone(grandchild).await, "grandchild {grandchild} still alive");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn kill_group_and_drop_end_the_whole_group() {
    let script = r#"sleep 1000 & echo "{\"grandchild\": $!}"; wait"#;
    let (mut p, _rx, grandchild) = spawn_with_grandchild(script).await;
    p.kill_group().unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), p.wait()).await.unwrap().unwrap();
    assert!(!status.success());
    assert!(wait_gone(grandchild).await);

    let (p, _rx, grandchild) = spawn_with_grandchild(script).await;
    let leader = u64::from(p.pid());
    drop(p);
    assert!(wait_gone(leader).await);
    assert!(wait_gone(grandchild).await);
}

#[test]
fn text_codec_discards_an_over_long_line_arriving_in_pieces() {
    let mut codec = LineCodec::new(16);
    let mut buf = BytesMut::new();
    for _ in 0..10 {
        buf.extend_from_slice(&[b'a'; 10]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(buf.len() <= 16 + 10);
    }
    buf.extend_from_slice(b"aaaa\nok\n");
    assert_eq!(
        codec.decode(&mut buf).unwrap().map(text_line),
        Some(Err(LineError::TooLong { line: 1, length: 104, max: 16 }))
    );
    assert_eq!(codec.decode(&mut buf).unwrap().map(text_line), Some(Ok("ok".to_owned())));
    assert_eq!(codec.decode_eof(&mut buf).unwrap(), None);
}

#[test]
fn tail_truncates_a_single_line_longer_than_the_byte_cap_on_a_char_boundary() {
    let mut tail = StderrTail::new(10, 5);
    tail.push("ab€cd".to_owned()); // € is 3 bytes: "ab€" is 5 bytes
    assert_eq!(tail.joined(), "ab€");
    tail.push("x".to_owned());
    assert_eq!(tail.joined(), "x");
    let mut none = StderrTail::new(0, 100);
    none.push("dropped".to_owned());
    assert_eq!(none.joined(), "");
}

#[test]
fn signalling_a_group_that_does_not_exist_reports_false_and_refuses_our_own() {
    // pid_max on Linux is at most 2^22; this group cannot exist.
    assert!(!signal_group(i32::MAX as u32, None).unwrap());
    assert!(signal_group(0, Some(Signal::SIGKILL)).is_err());
    assert!(signal_group(1, None).is_err());
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_setsid_grandchild_holding_stdout_neither_hides_the_exit_nor_survives_the_tree() {
    // The grandchild leaves the group and the session, keeps stdout and stderr, and
    // outlives the child, which exits at once.
    let script = r#"setsid sleep 1000 & echo "{\"grandchild\": $!}"; exit 7"#;
    let (mut p, mut rx, grandchild) = spawn_with_grandchild(script).await;
    let status = tokio::time::timeout(Duration::from_secs(10), p.exited()).await.expect("exit not noticed").unwrap();
    assert_eq!(status.code(), Some(7));
    // stdout stays open: the grandchild holds it.
    assert!(tokio::time::timeout(Duration::from_millis(300), rx.recv()).await.is_err(), "stdout closed early");
    assert!(tree::tree_pids(p.tree_tag()).contains(&(grandchild as u32)), "the grandchild is in the tree");
    p.kill_tree().unwrap();
    assert!(wait_gone(grandchild).await, "grandchild {grandchild} still alive");
    assert_eq!(collect(rx).await, vec![], "stdout closed once the tree died");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn shutdown_and_drop_sweep_a_grandchild_that_left_the_group() {
    let script = r#"setsid sleep 1000 & echo "{\"grandchild\": $!}"; cat >/dev/null"#;
    let (mut p, _rx, grandchild) = spawn_with_grandchild(script).await;
    let outcome =
        tokio::time::timeout(Duration::from_secs(60), p.shutdown(Duration::from_secs(1))).await.expect("shutdown hung");
    assert_eq!(outcome.stage, ShutdownStage::Exited);
    assert!(wait_gone(grandchild).await, "grandchild {grandchild} still alive after shutdown");

    let (p, _rx, grandchild) = spawn_with_grandchild(script).await;
    drop(p);
    assert!(wait_gone(grandchild).await, "grandchild {grandchild} still alive after drop");
}
