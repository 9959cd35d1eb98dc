//! Checks an adapter's [`SessionFiles`] against a session its agent recorded (the
//! fixtures under `tests/fixtures/handoff/`, each a run of the same mock script), so that
//! every adapter's handoff tests ask the same questions the same way.

use std::path::{Path, PathBuf};

use terminull_protocol::adapter::{
    LatestSidForCwdParams, MirrorParams, MirrorResult, ScanExternalSessionsParams, TerminalResumeCommandParams,
};
use terminull_protocol::blocks::Block;

use super::{ProcInfo, SessionFiles};

/// The blocks, by type, of the recorded turn prompted `mock:tool please`.
pub const TOOL_TURN: [&str; 8] =
    ["user_message", "thinking", "text", "tool_call", "tool_result", "thinking", "text", "session_end"];

/// The blocks, by type, of the recorded turn prompted `mock:plain second`.
pub const PLAIN_TURN: [&str; 3] = ["user_message", "text", "session_end"];

/// The recorded prompt that titles a session.
pub const FIRST_PROMPT: &str = "mock:tool please";

/// The types of `blocks`.
pub fn types(blocks: &[Block]) -> Vec<&'static str> {
    blocks.iter().map(Block::block_type).collect()
}

/// `args` as a command line.
pub fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// A process running `args` from `exe` in `cwd`, not terminull's.
pub fn process(exe: &str, args: &[&str], cwd: Option<&str>) -> ProcInfo {
    ProcInfo {
        pid: 1,
        ppid: 0,
        exe: Some(exe.to_owned()),
        argv: argv(args),
        cwd: cwd.map(PathBuf::from),
        marked: false,
    }
}

/// Checks the recorded session `id` that ran in `cwd`, under `root`: a scan lists it with
/// its directory and first prompt (and not for another directory), it is the
/// directory's latest, a mirror from the cursor a full mirror returned reads nothing
/// more, and ids from the bridge are not trusted (see [`check_hostile_ids`]). Returns
/// the full mirror.
pub fn check_recorded<S: SessionFiles>(sessions: &S, root: &Path, cwd: &str, id: &str) -> MirrorResult {
    let all = sessions.scan(root, &ScanExternalSessionsParams { cwd: None, limit: None });
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].agent_session_id.as_str(), id);
    assert_eq!(all[0].cwd.as_deref(), Some(cwd));
    assert_eq!(all[0].title.as_deref(), Some(FIRST_PROMPT));
    let elsewhere = ScanExternalSessionsParams { cwd: Some("/elsewhere".into()), limit: None };
    assert!(sessions.scan(root, &elsewhere).is_empty());
    let head = sessions.latest(root, &LatestSidForCwdParams { cwd: cwd.into() });
    assert_eq!(head.agent_session_id.as_ref().map(|s| s.as_str()), Some(id));
    let params = mirror_params(cwd, id);
    let read = sessions.read_mirror(root, &params).expect("the recorded session mirrors");
    assert!(read.blocks.iter().all(|b| b.meta.as_ref().is_some_and(|m| m["mirrored"] == true)));
    let again = MirrorParams { cursor: Some(read.cursor.clone()), ..params };
    assert_eq!(types(&sessions.read_mirror(root, &again).unwrap().blocks), Vec::<&str>::new());
    check_hostile_ids(sessions, root, cwd);
    read
}

/// Checks that ids from the bridge are not trusted: one that would leave the directory
/// is refused and gets no resume command, and an unknown one is an error naming it.
pub fn check_hostile_ids<S: SessionFiles>(sessions: &S, root: &Path, cwd: &str) {
    for escaping in ["../x", "../../etc/passwd", "a/b", ""] {
        assert!(sessions.read_mirror(root, &mirror_params(cwd, escaping)).is_err(), "{escaping}");
        let resume = TerminalResumeCommandParams { agent_session_id: escaping.into(), cwd: None };
        assert!(sessions.resume_command(&resume).is_err(), "{escaping}");
    }
    let unknown = "deadbeef-0000";
    let missing = sessions.read_mirror(root, &mirror_params(cwd, unknown)).unwrap_err();
    assert!(missing.message.contains(unknown), "{missing:?}");
}

/// Checks [`SessionFiles::drives`]: each command line with whether it may drive
/// session `sid`.
pub fn check_drives<S: SessionFiles>(sid: Option<&str>, cases: &[(&[&str], bool)]) {
    for (args, expected) in cases {
        assert_eq!(S::drives(&argv(args), sid), *expected, "{args:?} driving {sid:?}");
    }
}

/// The resume command of session `id`.
pub fn resume_argv<S: SessionFiles>(sessions: &S, id: &str) -> Vec<String> {
    let params = TerminalResumeCommandParams { agent_session_id: id.into(), cwd: Some("/w".into()) };
    let command = sessions.resume_command(&params).unwrap();
    assert_eq!(command.cwd.as_deref(), Some("/w"));
    command.argv
}

/// An agent's state directory in a temporary directory, holding one recorded session
/// file: `contents` at `<dir>/<file>`.
pub fn home_with(dir: &str, file: &str, contents: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("a temporary directory");
    let dir = home.path().join(dir);
    std::fs::create_dir_all(&dir).expect("the session directory");
    std::fs::write(dir.join(file), contents).expect("the session file");
    home
}

/// The parameters of a mirror of session `id` in `cwd` from its start.
pub fn mirror_params(cwd: &str, id: &str) -> MirrorParams {
    MirrorParams { cwd: cwd.into(), agent_session_id: id.into(), cursor: None }
}

/// Overwrites session `id`'s transcript with `garbage` and returns what a mirror reads
/// of it: a hostile file gives what could be read, never a panic.
pub fn mirror_of_garbage<S: SessionFiles>(sessions: &S, root: &Path, cwd: &str, id: &str, garbage: &str) -> Vec<Block> {
    let path = sessions.session_path(root, cwd, id).expect("the session's transcript");
    std::fs::write(path, garbage).expect("the garbage written");
    sessions.read_mirror(root, &mirror_params(cwd, id)).expect("garbage is skipped, not an error").blocks
}
