//! `terminull chat` in a real terminal: each test runs it inside tmux (a private
//! server per test, a fixed 100x40 window), types with `send-keys` and reads the
//! screen with `capture-pane`, polling with generous deadlines. Every screen a test
//! looked at is saved under `target/tmp/tmux-captures/<test>.txt` for a person to read.
//! The built-in echo adapter answers "You said: …"; `slow …` streams a word every
//! 200 ms and `ask …` asks permission first.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long any one expected screen may take to appear.
const DEADLINE: Duration = Duration::from_secs(60);

/// A tmux server of this test's own, with one window running a command.
struct Tmux {
    socket: String,
    name: &'static str,
}

impl Tmux {
    /// Runs `terminull ARGS` (the copy next to the echo adapter) in `cwd` with `env`;
    /// when it exits the window shows `EXITED rc=N` and stays open.
    fn start(name: &'static str, cwd: &Path, env: &[(&str, &str)], args: &[&str]) -> Tmux {
        let socket = format!("terminull-test-{}-{name}", std::process::id());
        let exe = support::echo_only_exe_dir().join("terminull");
        let env: String = env.iter().map(|(k, v)| format!("{k}='{v}' ")).collect();
        let args: String = args.iter().map(|a| format!(" '{a}'")).collect();
        let command = format!("{env}'{}'{args}; echo EXITED rc=$?; sleep 600", exe.display());
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "40", "-c"])
            .arg(cwd)
            .arg(command)
            .env_remove("TMUX")
            .status()
            .expect("running tmux");
        assert!(status.success(), "tmux new-session failed");
        Tmux { socket, name }
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux").args(["-L", &self.socket]).args(args).output().expect("running tmux")
    }

    /// Presses keys (tmux key names: `Enter`, `C-c`, `C-d`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
    }

    /// Types `text` literally.
    fn type_text(&self, text: &str) {
        assert!(self.tmux(&["send-keys", "-t", "0", "-l", text]).status.success());
    }

    /// The screen: `-J` joins lines the terminal wrapped, `-e` keeps colour escapes.
    fn capture(&self, flags: &[&str]) -> String {
        let mut args = vec!["capture-pane", "-p", "-t", "0"];
        args.extend_from_slice(flags);
        String::from_utf8_lossy(&self.tmux(&args).stdout).into_owned()
    }

    /// Polls the screen until `done` holds; saves and returns it. Fails with the last
    /// screen after [`DEADLINE`].
    fn wait_for(&self, what: &str, flags: &[&str], done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture(flags);
            if done(&screen) {
                self.save(&screen);
                return screen;
            }
            if start.elapsed() > DEADLINE {
                self.save(&screen);
                panic!("{}: waited {DEADLINE:?} for {what}; the screen:\n{screen}", self.name);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_text(&self, text: &str) -> String {
        self.wait_for(&format!("`{text}`"), &["-J"], |s| s.contains(text))
    }

    fn save(&self, screen: &str) {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tmux-captures");
        std::fs::create_dir_all(&dir).expect("the captures dir");
        std::fs::write(dir.join(format!("{}.txt", self.name)), screen).expect("saving the capture");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// A fresh home and working directory.
fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

fn chat(name: &'static str, home: &Path, cwd: &Path, env: &[(&str, &str)], extra: &[&str]) -> Tmux {
    let home = home.to_str().unwrap();
    let mut args = vec!["chat"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--home", home]);
    let tmux = Tmux::start(name, cwd, env, &args);
    tmux.wait_text("Ctrl-D leaves");
    tmux
}

fn lines(screen: &str) -> Vec<&str> {
    screen.lines().map(str::trim_end).collect()
}

#[test]
fn ctrl_c_at_idle_leaves_on_the_second_press_without_enter() {
    let (home, cwd) = dirs();
    let t = chat("ctrl_c_at_idle", home.path(), cwd.path(), &[], &["echo"]);
    t.type_text("hi");
    t.keys(&["Enter"]);
    t.wait_text("You said: hi");
    t.keys(&["C-c"]);
    t.wait_text("Ctrl-C again to leave");
    t.keys(&["C-c"]);
    let screen = t.wait_text("EXITED rc=");
    assert!(screen.contains("EXITED rc=0"), "{screen}");
    assert!(screen.contains("terminull chat --continue"), "the way back is shown: {screen}");
}

#[test]
fn ctrl_c_during_a_reply_interrupts_the_turn() {
    let (home, cwd) = dirs();
    let t = chat("ctrl_c_during_reply", home.path(), cwd.path(), &[], &["echo"]);
    t.type_text("slow one two three four five six seven eight nine ten eleven twelve");
    t.keys(&["Enter"]);
    t.wait_text("You said: slow one");
    t.keys(&["C-c"]);
    let screen = t.wait_text("turn ended: interrupted");
    let reply = lines(&screen).into_iter().find(|l| l.starts_with("You said:")).unwrap_or_default();
    assert!(!reply.contains("twelve"), "the reply stopped: {screen}");
    assert!(!screen.contains("EXITED"), "one press does not leave: {screen}");
}

#[test]
fn a_line_typed_during_a_streaming_reply_does_not_split_it() {
    let (home, cwd) = dirs();
    let t = chat("typed_during_reply", home.path(), cwd.path(), &[], &["echo"]);
    let words = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen";
    t.type_text(&format!("slow {words}"));
    t.keys(&["Enter"]);
    t.wait_text("You said: slow one");
    t.type_text("typed meanwhile");
    t.keys(&["Enter"]);
    let during = t.capture(&["-J"]);
    let reply = lines(&during).into_iter().find(|l| l.starts_with("You said:")).unwrap_or_default().to_owned();
    assert!(!reply.contains("fifteen"), "typed while the reply still streamed: {during}");
    let screen = t.wait_text("You said: typed meanwhile");
    let shown = lines(&screen);
    let reply = shown.iter().position(|l| *l == format!("You said: slow {words}"));
    let typed = shown.iter().position(|l| *l == "❯ typed meanwhile");
    assert!(reply.is_some() && typed.is_some(), "the reply is one line, the typed line its own: {screen}");
    assert!(reply < typed, "the typed line comes after the reply: {screen}");
}

#[test]
fn input_is_not_echoed_twice() {
    let (home, cwd) = dirs();
    let t = chat("no_double_echo", home.path(), cwd.path(), &[], &["echo"]);
    t.type_text("hello there");
    t.keys(&["Enter"]);
    let screen = t.wait_text("You said: hello there");
    let echoes = lines(&screen).iter().filter(|l| l.contains("hello there") && !l.contains("You said")).count();
    assert_eq!(echoes, 1, "{screen}");
}

#[test]
fn continue_reattaches_to_the_same_session() {
    let (home, cwd) = dirs();
    let first = chat("continue_first", home.path(), cwd.path(), &[], &["echo"]);
    first.type_text("remember me");
    first.keys(&["Enter"]);
    let screen = first.wait_text("You said: remember me");
    let session = screen
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .map(|id| id.trim().to_owned())
        .expect("the session id is shown at start");
    first.keys(&["C-d"]);
    let left = first.wait_text("EXITED rc=");
    assert!(left.contains(&format!("terminull attach {session}")), "{left}");
    drop(first);

    let again = chat("continue_again", home.path(), cwd.path(), &[], &["--continue"]);
    let screen = again.wait_text("You said: remember me");
    assert!(screen.contains(&format!("session {session}")), "the same session: {screen}");
    again.type_text("and more");
    again.keys(&["Enter"]);
    again.wait_text("You said: and more");
}

#[test]
fn a_permission_prompt_shows_a_300_character_command_whole() {
    let (home, cwd) = dirs();
    let t = chat("permission_300", home.path(), cwd.path(), &[], &["echo"]);
    let long: String = (0..60).map(|i| format!("w{i:03}")).collect::<Vec<_>>().join(" ");
    assert!(long.len() >= 290);
    let message = format!("ask {long} end");
    t.type_text(&message);
    t.keys(&["Enter"]);
    let screen = t.wait_text("allow? [y/N]");
    assert!(screen.contains(&format!("  {message}")), "the whole command, joined across wraps: {screen}");
    t.type_text("y");
    t.keys(&["Enter"]);
    let screen = t.wait_text(&format!("You said: {message}"));
    assert!(screen.contains("allow? [y/N] y — allowed"), "the answer is on the record: {screen}");
    assert_eq!(screen.matches("allow? [y/N]").count(), 1, "the question once, with its answer: {screen}");
}

#[test]
fn no_color_gives_no_escape_codes() {
    let (home, cwd) = dirs();
    let t = chat("no_color", home.path(), cwd.path(), &[("NO_COLOR", "1")], &["echo"]);
    t.type_text("some **bold** and `code`");
    t.keys(&["Enter"]);
    let screen = t.wait_for("the reply", &["-e"], |s| s.contains("You said:"));
    assert!(!screen.contains('\u{1b}'), "no escape codes with NO_COLOR: {screen:?}");
    assert!(screen.contains("You said: some **bold** and `code`"), "{screen}");

    // The same with colour on does colour: the check above would catch one.
    let (home, cwd) = dirs();
    let t = chat("with_color", home.path(), cwd.path(), &[], &["echo"]);
    t.type_text("some **bold** and `code`");
    t.keys(&["Enter"]);
    let screen = t.wait_for("the reply", &["-e"], |s| s.contains("You said:"));
    assert!(screen.contains('\u{1b}'), "colours without NO_COLOR: {screen:?}");
}

#[test]
fn an_error_is_one_plain_sentence_even_with_rust_backtrace() {
    let (home, cwd) = dirs();
    let home = home.path().to_str().unwrap().to_owned();
    let t = Tmux::start(
        "error_sentence",
        cwd.path(),
        &[("RUST_BACKTRACE", "1")],
        &["chat", "no-such-agent", "-p", "x", "--home", &home],
    );
    let screen = t.wait_text("EXITED rc=");
    let shown: Vec<&str> = lines(&screen).into_iter().filter(|l| !l.is_empty()).collect();
    assert_eq!(shown.len(), 2, "one sentence, then the exit: {screen}");
    assert!(shown[0].starts_with("terminull: no agent `no-such-agent`"), "{screen}");
    assert!(shown[0].contains("terminull agents"), "says what to do: {screen}");
    assert!(!screen.contains("UnknownAgent") && !screen.contains("backtrace"), "{screen}");
    assert_eq!(shown[1], "EXITED rc=1");
}

#[test]
fn up_arrow_recalls_the_line_sent_before() {
    let (home, cwd) = dirs();
    let t = chat("history", home.path(), cwd.path(), &[], &["echo"]);
    t.type_text("first line");
    t.keys(&["Enter"]);
    t.wait_text("You said: first line");
    t.keys(&["Up"]);
    t.wait_for("the recalled line at the prompt", &["-J"], |s| {
        s.lines().map(str::trim_end).rfind(|l| !l.is_empty()) == Some("❯ first line")
    });
}

#[test]
fn verbose_errors_add_the_causes_and_details() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(support::echo_only_exe_dir().join("terminull"))
        .args(["-v", "chat", "no-such-agent", "-p", "x", "--home"])
        .arg(home.path())
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.lines().next().unwrap_or_default().starts_with("terminull: no agent"), "{err}");
    assert!(err.contains("details: ") && err.contains("UnknownAgent"), "the details name the code: {err}");
}
