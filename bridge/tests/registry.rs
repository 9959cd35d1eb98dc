//! The registry with real adapter processes: built-ins found next to the executable,
//! drop-ins in `<home>/ext_adapters/`, and each kind of refusal kept apart.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use terminull_bridge::home::{Config, Home};
use terminull_bridge::host::{AdapterEvent, HostedAdapter, launch};
use terminull_bridge::registry::{Refusal, Registry, ScanOptions, Source, scan};
use terminull_protocol::adapter::{self as proto, Empty, StartParams};
use terminull_protocol::blocks::{BlockKind, EndReason, UserMessage};

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn broken_wrapper(dir: &Path, name: &str, mode: &str) -> PathBuf {
    let script = support::workspace().join("tests/fixtures/adapters/broken.py");
    let path = dir.join(name);
    write_script(&path, &format!("#!/bin/sh\nexec python3 '{}' {mode}\n", script.display()));
    path
}

async fn scan_home(home: &Path, exe_dir: PathBuf) -> Registry {
    scan_with(home, Config::default(), exe_dir).await
}

async fn scan_with(home: &Path, config: Config, exe_dir: PathBuf) -> Registry {
    let mut opts = ScanOptions::new(Home::at(home), config);
    opts.exe_dir = Some(exe_dir);
    opts.handshake_timeout = Duration::from_secs(10);
    scan(&opts).await
}

/// The reason of the one refusal `which` picks (`what` names it in a failure).
fn refusal_reason(registry: &Registry, what: &str, which: impl Fn(&Refusal) -> bool) -> String {
    registry
        .refused
        .iter()
        .find(|r| which(r))
        .unwrap_or_else(|| panic!("{what} not refused: {registry:#?}"))
        .reason
        .clone()
}

/// `start` for a session `s1` in `cwd`, with nothing else asked for.
fn start_in(cwd: &Path) -> StartParams {
    StartParams {
        session_id: "s1".into(),
        cwd: Some(cwd.display().to_string()),
        model: None,
        binary: None,
        resume_session_id: None,
        effort: None,
        permission_mode: None,
    }
}

/// What one turn of a hosted adapter produced.
#[derive(Debug, Default)]
struct TurnSeen {
    /// The last finished text.
    text: String,
    /// The last tool result's output.
    tool_output: Option<String>,
    /// The agent session id, when the adapter reported one.
    agent_session_id: Option<String>,
}

/// Sends `text` and reads the adapter's events until the turn ends, `completed`, each
/// event within `within`.
async fn run_turn(hosted: &mut HostedAdapter, text: &str, within: Duration) -> TurnSeen {
    hosted.call::<proto::Send>(&UserMessage { text: text.into(), attachments: vec![] }).await.unwrap();
    let mut seen = TurnSeen::default();
    // The message being streamed, rebuilt from its chunks (appends or snapshots).
    let mut message = terminull_protocol::streamed::Assembly::default();
    loop {
        match tokio::time::timeout(within, hosted.next_event()).await.unwrap() {
            Some(AdapterEvent::Block(b)) => match b.kind {
                BlockKind::ToolResult(r) => seen.tool_output = Some(r.output),
                BlockKind::Text(t) => {
                    if message.is_done() {
                        message = Default::default();
                    }
                    message.apply(&t);
                    if message.is_done() {
                        seen.text = message.text().to_owned();
                    }
                }
                BlockKind::SessionEnd(end) => {
                    assert_eq!(end.reason, EndReason::Completed);
                    return seen;
                }
                _ => {}
            },
            Some(AdapterEvent::AgentSessionId(id)) => seen.agent_session_id = Some(id.as_str().to_owned()),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Starts session `s1` in `cwd` on `hosted`, runs one turn of `text` (see [`run_turn`]),
/// then stops the session and shuts the adapter down: the `start` answer and the turn.
async fn one_turn_session(
    mut hosted: HostedAdapter,
    cwd: &Path,
    text: &str,
    within: Duration,
) -> (proto::StartResult, TurnSeen) {
    let started = hosted.call::<proto::Start>(&start_in(cwd)).await.unwrap();
    let turn = run_turn(&mut hosted, text, within).await;
    hosted.call::<proto::Stop>(&Empty {}).await.unwrap();
    hosted.shutdown().await;
    (started, turn)
}

/// A home whose ext_adapters/ holds: the Python reference adapter (valid), a drop-in
/// reusing the built-in id `echo`, one missing provides_models, and a file that is not
/// executable.
fn mixed_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let ext = home.path().join("ext_adapters");
    std::fs::create_dir_all(&ext).unwrap();
    std::fs::copy(support::workspace().join("examples/ext_adapter_example.py"), ext.join("echo-py")).unwrap();
    write_script(&ext.join("echo-clone"), &format!("#!/bin/sh\nexec '{}'\n", support::echo_rs().display()));
    broken_wrapper(&ext, "no-models", "missing-provides-models");
    std::fs::write(ext.join("notes.py"), "print('not an adapter')\n").unwrap();
    std::fs::write(ext.join("README.md"), "ignored\n").unwrap();
    home
}

#[tokio::test]
async fn valid_drop_ins_register_and_each_refusal_has_its_own_reason() {
    let home = mixed_home();
    let exe_dir = support::echo_only_exe_dir();
    let registry = scan_home(home.path(), exe_dir).await;

    let ids: Vec<_> = registry.agents.iter().map(|a| a.declaration.agent_id.as_str()).collect();
    assert_eq!(ids, ["echo", "echo-py"], "{registry:#?}");
    assert!(matches!(registry.get("echo").unwrap().source, Source::BuiltIn { .. }));
    assert!(matches!(registry.get("echo-py").unwrap().source, Source::DropIn { .. }));
    assert!(registry.get("echo-py").unwrap().detected.installed);

    let reason = |file: &str| refusal_reason(&registry, file, |r| r.path.file_name().unwrap() == file);
    assert!(reason("echo-clone").contains("agent id `echo` is already taken by the built-in adapter"));
    assert!(reason("no-models").contains("provides_models must be set explicitly to true or false"));
    assert!(reason("notes.py").contains("not executable"));
    assert_eq!(registry.refused.len(), 3, "README is skipped, nothing else refused: {registry:#?}");
}

#[tokio::test]
async fn a_registered_python_drop_in_runs_a_session() {
    let home = mixed_home();
    let registry = scan_home(home.path(), support::echo_only_exe_dir()).await;
    let agent = registry.get("echo-py").unwrap();
    let hosted = launch(agent.command.clone(), Duration::from_secs(10)).await.unwrap();
    let (_, turn) = one_turn_session(hosted, home.path(), "hi there", Duration::from_secs(10)).await;
    assert_eq!(turn.text, "You said: hi there");
}

#[tokio::test]
async fn a_missing_ext_adapters_dir_is_not_an_error_and_disabled_agents_are_left_out() {
    let home = tempfile::tempdir().unwrap();
    let exe_dir = support::echo_only_exe_dir();
    let registry = scan_home(home.path(), exe_dir.clone()).await;
    assert_eq!(registry.agents.len(), 1);
    assert!(registry.refused.is_empty());

    let mut opts = ScanOptions::new(Home::at(home.path()), Config::parse("[agents.echo]\ndisabled = true\n").unwrap());
    opts.exe_dir = Some(exe_dir);
    assert!(scan(&opts).await.agents.is_empty());
}

#[test]
fn agents_command_lists_agents_and_refusals() {
    let home = mixed_home();
    // A terminull with only the built-in echo-rs next to it.
    let terminull = support::echo_only_exe_dir().join("terminull");
    let out = assert_cmd::Command::new(&terminull).args(["agents", "--home"]).arg(home.path()).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    for needle in ["echo ", "built-in", "echo-py", "drop-in", "refused drop-in", "not executable", "already taken"] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let out =
        assert_cmd::Command::new(&terminull).args(["agents", "--json", "--home"]).arg(home.path()).assert().success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["agents"].as_array().unwrap().len(), 2);
    assert_eq!(json["refused"].as_array().unwrap().len(), 3);
}

/// A home whose config.toml declares the fake ACP agent of adapters/acp as `fake-acp`,
/// an ACP agent reusing the built-in id `echo`, and one with an invalid id.
fn acp_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let script = support::fake_acp_agent();
    let log = home.path().join("agent.log");
    let config = format!(
        "[acp_agents.fake-acp]\nname = \"Fake ACP\"\ncommand = \"python3\"\nargs = [\"{}\", \"--log\", \"{}\"]\n\
         env = {{ FAKE_ACP_MODE = \"test\" }}\n\n\
         [acp_agents.echo]\ncommand = \"python3\"\nargs = [\"{}\"]\n\n\
         [acp_agents.\"Bad Id\"]\ncommand = \"python3\"\n",
        script.display(),
        log.display(),
        script.display()
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    home
}

async fn scan_acp_home(home: &Path) -> Registry {
    scan_with(home, Home::at(home).load_config().unwrap(), support::acp_exe_dir()).await
}

#[tokio::test]
async fn acp_agents_declared_in_config_register_like_built_ins() {
    let home = acp_home();
    let registry = scan_acp_home(home.path()).await;
    let ids: Vec<_> = registry.agents.iter().map(|a| a.declaration.agent_id.as_str()).collect();
    assert_eq!(ids, ["echo", "fake-acp"], "{registry:#?}");
    let agent = registry.get("fake-acp").unwrap();
    assert_eq!(agent.declaration.display_name, "Fake ACP");
    assert_eq!(agent.declaration.cli_binary.as_deref(), Some("python3"));
    assert!(agent.declaration.capabilities.cap_permissions && agent.declaration.capabilities.cap_interrupt);
    assert!(agent.detected.installed, "{:?}", agent.detected);
    let Source::AcpConfig { path, command } = &agent.source else { panic!("{:?}", agent.source) };
    assert_eq!(path.file_name().unwrap(), "terminull-acp");
    assert_eq!(command[0], "python3");
    assert!(agent.command.env.contains(&("FAKE_ACP_MODE".to_owned(), "test".to_owned())));
    assert!(matches!(registry.get("echo").unwrap().source, Source::BuiltIn { .. }), "the built-in keeps its id");

    let reason = |name: &str| refusal_reason(&registry, name, |r| r.path.display().to_string().contains(name));
    assert!(reason("[acp_agents.echo]").contains("already taken by the built-in adapter"));
    assert!(reason("[acp_agents.Bad Id]").contains("not a valid agent id"));
    assert_eq!(registry.refused.len(), 2, "{registry:#?}");
}

#[tokio::test]
async fn a_session_runs_through_an_acp_agent_declared_only_in_config() {
    let home = acp_home();
    let registry = scan_acp_home(home.path()).await;
    let agent = registry.get("fake-acp").unwrap();
    let hosted = launch(agent.command.clone(), Duration::from_secs(10)).await.unwrap();
    assert_eq!(hosted.declaration().agent_id.as_str(), "fake-acp");
    let (started, turn) = one_turn_session(hosted, home.path(), "fake:tool please", Duration::from_secs(30)).await;
    assert_eq!(started.agent_info.name, "Fake ACP");
    assert!(started.agent_info.slash_commands.iter().any(|c| c.name == "compact"));
    assert!(turn.agent_session_id.as_deref().is_none_or(|id| id == "sess-1"), "{turn:?}");
    assert_eq!(turn.tool_output.as_deref(), Some("hello"));
    assert_eq!(turn.text, "It printed hello.");
    let log = std::fs::read_to_string(home.path().join("agent.log")).unwrap();
    assert!(log.contains("\"method\": \"session/prompt\"") || log.contains("\"method\":\"session/prompt\""), "{log}");
}

#[test]
fn chat_and_agents_commands_work_with_an_acp_agent_declared_in_config() {
    let home = acp_home();
    let terminull = support::acp_exe_dir().join("terminull");
    let out = assert_cmd::Command::new(&terminull).args(["agents", "--home"]).arg(home.path()).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    for needle in ["fake-acp", "Fake ACP", "acp", "ACP agent from config.toml: python3", "refused acp-config"] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let out = assert_cmd::Command::new(&terminull)
        .args(["chat", "fake-acp", "-p", "fake:tool please", "--json", "--home"])
        .arg(home.path())
        .arg("--cwd")
        .arg(home.path())
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    let blocks: Vec<serde_json::Value> = String::from_utf8(out.get_output().stdout.clone())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(blocks[0]["type"], "agent_info");
    assert_eq!(blocks[0]["agent_id"], "fake-acp");
    assert!(blocks.iter().any(|b| b["type"] == "tool_result" && b["output"] == "hello"), "{blocks:#?}");
    let end = blocks.iter().rev().find(|b| b["type"] == "session_end").unwrap();
    assert_eq!(end["reason"], "completed");
}
