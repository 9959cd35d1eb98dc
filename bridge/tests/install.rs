//! Installing terminull as a user would (docs/install.md): `scripts/install.sh` into a
//! fresh prefix and HOME, the `.deb` cargo-deb builds installed with dpkg, and the
//! relay's Dockerfile. The binaries come from this build's target directory
//! (`--from-target`), so the tests never run a release build.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use terminull_bridge::registry::{ACP_HOST, BUILT_INS};

/// `target/<profile>`: where this build's binaries are.
fn profile_dir() -> PathBuf {
    support::workspace_bin("terminull", "terminull-bridge").parent().unwrap().to_path_buf()
}

/// Every binary an install must put on PATH: the CLI, the relay, the ACP host and each
/// built-in adapter the daemon looks for next to itself.
fn expected_binaries() -> BTreeSet<String> {
    let mut all: BTreeSet<String> = BUILT_INS.iter().map(|b| b.executable.to_owned()).collect();
    all.extend(["terminull", "terminull-relay", ACP_HOST].map(str::to_owned));
    all
}

/// Makes sure every binary is built (a per-crate test run builds only the bridge's).
fn require_built() {
    for name in expected_binaries() {
        support::workspace_bin(&name, &format!("the package of {name}"));
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Runs `terminull args` found on `path` (plus the system's directories), in `home`.
fn from_path(bin_dir: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new("terminull")
        .args(args)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .current_dir(home)
        .output()
        .unwrap_or_else(|e| panic!("running terminull {args:?} from PATH {}: {e}", bin_dir.display()))
}

/// `--version`, `agents` and `chat echo -p hi` work from PATH, and `--version` names
/// the protocol versions and finds every built-in adapter next to itself.
fn assert_usable_from_path(bin_dir: &Path, home: &Path) {
    let version = from_path(bin_dir, home, &["--version"]);
    let shown = text(&version);
    assert!(version.status.success(), "{shown}");
    assert!(shown.starts_with(&format!("terminull {}\n", env!("CARGO_PKG_VERSION"))), "{shown}");
    assert!(shown.contains("adapter v2") && shown.contains("device/relay v3"), "{shown}");
    let all = expected_binaries().len() - 2;
    assert!(shown.contains(&format!("adapters: {all} of {all} found")), "{shown}");
    assert!(shown.contains(&bin_dir.join("echo-rs").display().to_string()), "{shown}");

    let agents = from_path(bin_dir, home, &["agents"]);
    let listed = text(&agents);
    assert!(agents.status.success(), "{listed}");
    assert!(listed.lines().any(|l| l.starts_with("echo ")), "{listed}");
    assert!(listed.contains("claude-code"), "{listed}");

    let chat = from_path(bin_dir, home, &["chat", "echo", "-p", "hi"]);
    let said = text(&chat);
    assert!(chat.status.success(), "{said}");
    assert!(said.contains("You said: hi"), "{said}");
}

#[test]
fn install_script_and_deb_list_exactly_the_binaries_the_bridge_needs() {
    let listed =
        Command::new("bash").arg(support::workspace().join("scripts/install.sh")).arg("--list").output().unwrap();
    assert!(listed.status.success(), "{}", text(&listed));
    let script: BTreeSet<String> = String::from_utf8(listed.stdout).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(script, expected_binaries(), "scripts/install.sh's BINARIES and the registry's built-ins differ");
    let manifest = std::fs::read_to_string(support::workspace().join("bridge/Cargo.toml")).unwrap();
    for name in expected_binaries() {
        assert!(
            manifest.contains(&format!("[\"target/release/{name}\", \"usr/bin/\", \"755\"]")),
            "bridge/Cargo.toml's [package.metadata.deb] assets lack {name}"
        );
    }
}

#[test]
fn installed_into_a_fresh_home_and_prefix_the_commands_work_from_path() {
    require_built();
    let dir = tempfile::tempdir().unwrap();
    let (home, prefix) = (dir.path().join("home"), dir.path().join("prefix"));
    std::fs::create_dir_all(&home).unwrap();
    let install = Command::new("bash")
        .arg(support::workspace().join("scripts/install.sh"))
        .arg("--from-target")
        .arg(profile_dir())
        .arg("--prefix")
        .arg(&prefix)
        .env("HOME", &home)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let said = text(&install);
    assert!(install.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "installed {} binaries into {}",
            expected_binaries().len(),
            prefix.join("bin").display()
        )),
        "{said}"
    );
    assert!(said.contains("is not on PATH; add it"), "{said}");
    let installed: BTreeSet<String> = std::fs::read_dir(prefix.join("bin"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(installed, expected_binaries());
    assert_usable_from_path(&prefix.join("bin"), &home);
}

#[test]
fn install_script_from_a_target_missing_a_binary_names_it_and_installs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::copy(support::workspace_bin("terminull", "terminull-bridge"), target.join("terminull")).unwrap();
    let out = Command::new("bash")
        .arg(support::workspace().join("scripts/install.sh"))
        .args(["--from-target".as_ref(), target.as_os_str(), "--prefix".as_ref(), dir.path().join("p").as_os_str()])
        .output()
        .unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("echo-rs (cargo build -p terminull-echo)"), "{said}");
    assert!(!dir.path().join("p").exists(), "{said}");
}

/// Whether `cargo deb` is installed; in CI it must be (scripts/install-test-deps.sh).
fn cargo_deb_available() -> bool {
    let found = Command::new("cargo").args(["deb", "--version"]).output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(std::env::var_os("CI").is_none(), "cargo-deb is missing: scripts/install-test-deps.sh installs it");
        #[allow(clippy::print_stdout, reason = "the skip's reason belongs in the test output")]
        {
            println!("skipped: cargo-deb is not installed (scripts/install-test-deps.sh installs it)");
        }
    }
    found
}

#[test]
fn the_deb_holds_every_binary_and_installs_with_dpkg_into_a_root() {
    if !cargo_deb_available() {
        return;
    }
    require_built();
    let dir = tempfile::tempdir().unwrap();
    let deb = dir.path().join("terminull.deb");
    // cargo-deb packages `target/release/*`: a staging target directory whose `release/`
    // holds this build's binaries, stripped (`strip -o`, quick) so that packing them
    // stays quick too. cargo-deb itself neither builds nor strips (`--no-build --no-strip`).
    let stage = dir.path().join("target");
    std::fs::create_dir_all(stage.join("release")).unwrap();
    for name in expected_binaries() {
        let (from, to) = (profile_dir().join(&name), stage.join("release").join(&name));
        let stripped = Command::new("strip").arg("-o").arg(&to).arg(&from).status().is_ok_and(|s| s.success());
        if !stripped {
            std::fs::copy(&from, &to).unwrap();
        }
    }
    let build = Command::new("cargo")
        .args(["deb", "-p", "terminull-bridge", "--no-build", "--no-strip", "--fast", "--output"])
        .arg(&deb)
        .env("CARGO_TARGET_DIR", &stage)
        .current_dir(support::workspace())
        .output()
        .unwrap();
    assert!(build.status.success(), "cargo deb: {}", text(&build));

    let contents = Command::new("dpkg-deb").arg("--contents").arg(&deb).output().unwrap();
    let listing = text(&contents);
    for name in expected_binaries() {
        assert!(listing.contains(&format!("./usr/bin/{name}\n")), "{name} missing from the .deb:\n{listing}");
    }

    // Root here (CI runs as root): the real `dpkg -i`, into a private root directory so
    // the machine's /usr stays untouched. Not root: unpacked with `dpkg -x` instead.
    let root = dir.path().join("root");
    let is_root = nix_uid() == 0;
    let install = if is_root {
        for d in ["var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
        // --force-depends: the empty root has no libc6 package to satisfy $auto's depends.
        Command::new("dpkg")
            .arg(format!("--root={}", root.display()))
            .args(["--force-depends", "--log=/dev/null", "-i"])
            .arg(&deb)
            .output()
            .unwrap()
    } else {
        Command::new("dpkg").arg("-x").arg(&deb).arg(&root).output().unwrap()
    };
    assert!(install.status.success(), "dpkg: {}", text(&install));
    #[allow(clippy::print_stdout, reason = "states how the package was installed")]
    {
        println!("installed the .deb with {}", if is_root { "dpkg --root -i (as root)" } else { "dpkg -x (not root)" });
    }
    if is_root {
        let status = std::fs::read_to_string(root.join("var/lib/dpkg/status")).unwrap();
        assert!(status.contains("Package: terminull\nStatus: install ok installed"), "{status}");
    }
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    assert_usable_from_path(&root.join("usr/bin"), &home);
}

fn nix_uid() -> u32 {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The relay's Dockerfile, linted (no container engine runs here): multi-stage, the final
/// stage runs as a non-root user, has a HEALTHCHECK on /healthz and EXPOSEs the port the
/// relay listens on.
#[test]
fn relay_dockerfile_is_multi_stage_non_root_with_a_healthcheck() {
    let file = std::fs::read_to_string(support::workspace().join("relay/Dockerfile")).unwrap();
    // Joined continuation lines, comments dropped.
    let joined = file.replace("\\\n", " ");
    let lines: Vec<&str> = joined.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let stages: Vec<usize> =
        lines.iter().enumerate().filter(|(_, l)| l.to_ascii_uppercase().starts_with("FROM ")).map(|(i, _)| i).collect();
    assert!(stages.len() >= 2, "not multi-stage: {stages:?}");
    assert!(lines[stages[0]].to_ascii_uppercase().contains(" AS "), "the build stage is not named");
    let last = &lines[*stages.last().unwrap()..];
    let instruction =
        |name: &'static str| last.iter().filter(move |l| l.to_ascii_uppercase().starts_with(&format!("{name} ")));
    assert!(instruction("COPY").any(|l| l.contains("--from=")), "the final stage copies nothing from the build");
    let user = instruction("USER").next_back().expect("the final stage sets USER");
    let who = user[5..].split(':').next().unwrap().trim();
    assert!(who != "root" && who != "0", "the final stage runs as {who}");
    let health = instruction("HEALTHCHECK").next().expect("a HEALTHCHECK");
    assert!(health.contains("CMD") && health.contains("/healthz"), "{health}");
    let expose = instruction("EXPOSE").next().expect("an EXPOSE");
    let port = expose[7..].trim();
    assert!(health.contains(&format!(":{port}/healthz")), "the health check probes another port than {port}");
    assert!(
        last.iter().any(|l| l.contains(&format!("TERMINULL_RELAY_LISTEN=0.0.0.0:{port}"))),
        "the relay does not listen on the exposed port {port} on every interface"
    );
    assert!(instruction("ENTRYPOINT").any(|l| l.contains("terminull-relay")), "no ENTRYPOINT runs the relay");
}
