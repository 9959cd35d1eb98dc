//! The benchmark's structure, in its smallest mode: every section runs against the
//! real pieces and reports its rows with floors and targets. Figures are not checked
//! (tests never assert on time); only that each is a number and each target says
//! whether it is met.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>/`, where cargo put this test's binaries.
fn profile_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_terminull-bench")).parent().expect("the bench binary's directory").to_path_buf()
}

/// `cargo test -p terminull-bench` builds this package's binaries only; the benchmark
/// also runs echo-rs and the bridge's `terminull`.
fn build_tools() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("bench/ has a parent");
    let target = profile_dir().parent().expect("target/").to_path_buf();
    let mut build = Command::new(cargo);
    build.args([
        "build",
        "--quiet",
        "-p",
        "terminull-echo",
        "-p",
        "terminull-bridge",
        "--bin",
        "echo-rs",
        "--bin",
        "terminull",
    ]);
    if profile_dir().file_name().is_some_and(|p| p == "release") {
        build.arg("--release");
    }
    // The variables cargo sets for this test (CARGO_PKG_NAME, CARGO_MANIFEST_DIR, …)
    // would reach build scripts that watch them (ring's does) and rebuild those crates
    // on every run.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_MANIFEST_")
            || key.starts_with("CARGO_BIN_")
            || matches!(key.as_ref(), "CARGO_CRATE_NAME" | "CARGO_PRIMARY_PACKAGE" | "CARGO_TARGET_TMPDIR")
        {
            build.env_remove(key.as_ref());
        }
    }
    let status = build.env("CARGO_TARGET_DIR", target).current_dir(workspace).status().expect("running cargo build");
    assert!(status.success(), "building echo-rs and terminull failed");
}

#[test]
fn every_section_reports_its_rows_beside_floors_and_targets() {
    build_tools();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("bench.json");
    let run = Command::new(env!("CARGO_BIN_EXE_terminull-bench"))
        .args(["--tiny", "--out"])
        .arg(&json)
        .arg("--bin-dir")
        .arg(profile_dir())
        .output()
        .expect("running terminull-bench");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "terminull-bench --tiny failed:\n{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("| hop | measure | value |"), "no table on stdout:\n{stdout}");

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["mode"], "tiny");
    let rows = report["rows"].as_array().expect("rows");
    for hop in [
        "adapter → dispatcher",
        "bridge → relay → client",
        "bridge → LAN → client",
        "relay (forwarding only)",
        "resume: session_resume → replay_done",
        "streaming (LAN)",
        "memory",
    ] {
        assert!(rows.iter().any(|r| r["hop"] == hop), "no row for {hop}: {rows:#?}");
    }
    for row in rows {
        assert!(row["value"].as_f64().is_some_and(f64::is_finite), "not a number: {row}");
        if row.get("floor").is_some() {
            assert!(
                row["floor_name"].is_string() && row["ratio"].is_number(),
                "a floor without its name or ratio: {row}"
            );
        }
        if row.get("target").is_some() {
            assert!(row["met"].is_boolean(), "a target without met: {row}");
        }
    }
    // The targets this mode reaches (resume's is for 100k blocks, the bridge's for 10
    // sessions: the full and quick runs only).
    let targets: Vec<&str> = rows.iter().filter_map(|r| r["target"].as_str()).collect();
    for target in ["bare forwarder", "crypto ceiling", "final text", "≤ 5 MB"] {
        assert!(targets.iter().any(|t| t.contains(target)), "no `{target}` target: {targets:?}");
    }
    assert!(report["crypto_one_core_us"]["seal_and_sign"].is_number());
}
