//! `terminull service`: the systemd user unit and the launchd agent it writes, shown by
//! `--dry-run` (nothing written, nothing run), the unit verified by `systemd-analyze
//! verify --user` and the plist parsed by Python's plistlib (no plutil off macOS).

use std::path::Path;
use std::process::{Command, Output};

use assert_cmd::cargo::cargo_bin;

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `terminull service <args>` with HOME (and XDG_CONFIG_HOME) in `dir`.
fn service(dir: &Path, args: &[&str]) -> Output {
    Command::new(cargo_bin("terminull"))
        .arg("service")
        .args(args)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("TERMINULL_HOME")
        .env("PATH", "/opt/agents/bin:/usr/bin:/bin")
        .output()
        .unwrap()
}

/// The file a dry run prints between its `----` lines, and where it would write it.
fn written(stdout: &str) -> (String, String) {
    let first = stdout.lines().next().unwrap();
    let path =
        first.strip_prefix("would write ").and_then(|p| p.strip_suffix(':')).unwrap_or_else(|| panic!("{stdout}"));
    let body = stdout.split("----\n").nth(1).unwrap_or_else(|| panic!("{stdout}"));
    (path.to_owned(), body.to_owned())
}

#[test]
fn install_dry_run_prints_the_unit_and_the_commands_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = service(dir.path(), &["install", "--systemd", "--dry-run", "--relay", "wss://relay.example"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", text(&out));
    let (path, unit) = written(&said);
    assert_eq!(path, dir.path().join("config/systemd/user/terminull.service").display().to_string());
    let exe = cargo_bin("terminull").display().to_string();
    let home = dir.path().join(".terminull").display().to_string();
    assert!(unit.contains(&format!("ExecStart={exe} up --home {home} --relay wss://relay.example\n")), "{unit}");
    for line in [
        "Restart=on-failure",
        "StandardOutput=journal",
        "Environment=PATH=/opt/agents/bin:/usr/bin:/bin",
        "WantedBy=default.target",
    ] {
        assert!(unit.contains(&format!("{line}\n")), "{line} missing:\n{unit}");
    }
    assert!(said.contains("would run: systemctl --user daemon-reload\n"), "{said}");
    assert!(said.contains("would run: systemctl --user enable --now terminull.service\n"), "{said}");
    assert!(said.contains("loginctl enable-linger $USER"), "{said}");
    assert!(!dir.path().join("config").exists(), "a dry run wrote something");
}

#[test]
fn the_generated_unit_passes_systemd_analyze_verify() {
    let dir = tempfile::tempdir().unwrap();
    let out = service(dir.path(), &["install", "--systemd", "--dry-run", "--lan", "127.0.0.1:8478"]);
    assert!(out.status.success(), "{}", text(&out));
    let (_, unit) = written(&String::from_utf8_lossy(&out.stdout));
    let file = dir.path().join("terminull.service");
    std::fs::write(&file, &unit).unwrap();
    // A user manager in test mode needs a runtime directory, never a running systemd.
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let verify = Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(&file)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze runs (Debian's systemd package)");
    let said = text(&verify);
    assert!(verify.status.success(), "systemd-analyze verify failed:\n{said}\n{unit}");
    // It warns (and still exits 0) about unknown keys and bad values: none may name our unit.
    assert!(!said.contains("terminull.service"), "systemd-analyze verify complained:\n{said}\n{unit}");
}

#[test]
fn a_broken_unit_is_caught_by_the_same_verification() {
    // The check above is only worth something if systemd-analyze speaks up here.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("terminull.service");
    std::fs::write(&file, "[Service]\nExecStart=/nonexistent/terminull up\nRestart=sometimes\n").unwrap();
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let verify = Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .arg(&file)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .unwrap();
    let said = text(&verify);
    assert!(said.contains("terminull.service"), "{said}");
}

#[test]
fn the_launchd_plist_is_a_valid_property_list_that_restarts_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let out = service(dir.path(), &["install", "--launchd", "--dry-run", "--relay", "wss://r.example/?a=1&b=<2>"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", text(&out));
    let (path, plist) = written(&said);
    assert_eq!(path, dir.path().join("Library/LaunchAgents/dev.terminull.bridge.plist").display().to_string());
    assert!(said.contains("would run: launchctl bootstrap gui/"), "{said}");
    let file = dir.path().join("agent.plist");
    std::fs::write(&file, &plist).unwrap();
    // plistlib parses the XML strictly (expat) and the plist structure (dict keys and
    // values, typed elements); the script prints what launchd would read.
    let check = Command::new("python3")
        .arg("-c")
        .arg(
            "import json, plistlib, sys\n\
             d = plistlib.load(open(sys.argv[1], 'rb'), fmt=plistlib.FMT_XML)\n\
             print(json.dumps(d))",
        )
        .arg(&file)
        .output()
        .expect("python3 runs (scripts/install-test-deps.sh)");
    assert!(check.status.success(), "not a valid plist: {}\n{plist}", text(&check));
    let parsed: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    let exe = cargo_bin("terminull").display().to_string();
    let home = dir.path().join(".terminull").display().to_string();
    assert_eq!(parsed["Label"], "dev.terminull.bridge");
    assert_eq!(
        parsed["ProgramArguments"],
        serde_json::json!([exe, "up", "--home", home, "--relay", "wss://r.example/?a=1&b=<2>"])
    );
    assert_eq!(parsed["RunAtLoad"], true);
    assert_eq!(parsed["KeepAlive"], serde_json::json!({"SuccessfulExit": false}));
    assert_eq!(parsed["EnvironmentVariables"]["PATH"], "/opt/agents/bin:/usr/bin:/bin");
    let log = dir.path().join("Library/Logs/terminull/bridge.log").display().to_string();
    assert_eq!(parsed["StandardErrorPath"], log.as_str());
    assert!(!dir.path().join("Library").exists(), "a dry run wrote something");
}

#[test]
fn launchd_install_off_macos_refuses_with_the_dry_run_hint() {
    if cfg!(target_os = "macos") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = service(dir.path(), &["install", "--launchd"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--launchd --dry-run"), "{}", text(&out));
}

#[test]
fn uninstall_status_and_logs_dry_runs_name_their_commands() {
    let dir = tempfile::tempdir().unwrap();
    let out = service(dir.path(), &["uninstall", "--systemd", "--dry-run"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("would run: systemctl --user disable --now terminull.service"), "{said}");
    assert!(said.contains("would remove "), "{said}");
    let out = service(dir.path(), &["logs", "--systemd", "--dry-run", "-n", "20"]);
    assert!(
        text(&out).contains("would run: journalctl --user --unit terminull.service --no-pager --lines 20"),
        "{}",
        text(&out)
    );
    // Not installed: said so, with the command that installs it, and exit code 3.
    let out = service(dir.path(), &["status", "--systemd"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("`terminull service install`"), "{}", text(&out));
}
