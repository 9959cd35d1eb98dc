//! Cursor's CLI has no registry package, so it cannot run here: its adapter is built
//! from Cursor's documented stream-json format and checked against hand-written lines
//! (adapters/cursor/tests/fixtures). This runs `terminull adapter check` on it with a
//! stand-in `cursor-agent` that prints those lines, so the whole conformance check
//! (handshake, declaration, a turn, interrupt, usage, stop) covers it like the others.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use terminull_agent_tests::workspace;

#[test]
fn cursor_adapter_passes_adapter_check_against_its_documented_format() {
    let bins = workspace::bin_dir();
    let dir = tempfile::tempdir().unwrap();
    let fixtures = workspace::root().join("adapters/cursor/tests/fixtures");
    let fake = dir.path().join("cursor-agent");
    // The prompt is the last argument; `slow` never finishes (the check interrupts it).
    let script = format!(
        r#"#!/bin/bash
if [ "$1" = "--version" ]; then echo "2026.01.28-fd13201 (documented format)"; exit 0; fi
prompt="${{@: -1}}"
case "$prompt" in
  *mock:tool*) cat '{f}/tool.jsonl' ;;
  *slow*) cat '{f}/slow.jsonl'; sleep 60 ;;
  *) cat '{f}/text.jsonl' ;;
esac
"#,
        f = fixtures.display()
    );
    std::fs::write(&fake, script).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(
        std::iter::once(dir.path().to_owned()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let out = Command::new(bins.join("terminull"))
        .args(["adapter", "check", "--message", "mock:tool please"])
        .arg(bins.join("terminull-cursor"))
        .env("PATH", path)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(report.contains("not verified against the real binary"), "{report}");
}
