//! Hostile paths in `files` requests (issue 23, item 2): a paired device, over the LAN
//! server with the Rust client, asks for paths that lead outside the session's
//! directory or at files that must not be opened or read whole. Each is refused or
//! bounded with a clear message, and no reply carries anything from outside. Each test
//! prints one `attack: files …` line.

#![allow(clippy::print_stdout, reason = "attack tests print one summary line each")]

mod support;

use std::os::unix::ffi::OsStrExt;
use std::time::Instant;

use support::project::{HIDDEN_NAME, ProjectRig, SECRET, Via, project_rig};
use terminull_protocol::control::ReplyErrorCode;
use terminull_protocol::files::{DEFAULT_LIST_ENTRIES, EntryKind, FilesRequest, FilesResult, MAX_LIST_ENTRIES};

fn read(path: &str) -> FilesRequest {
    FilesRequest::ReadText { path: path.into() }
}

fn list(path: &str, limit: Option<u32>) -> FilesRequest {
    FilesRequest::List { path: path.into(), limit }
}

/// Asks `request`, expects the error `code` with `words` in its message and nothing
/// from outside in it; prints the attack line.
async fn refused(rig: &mut ProjectRig, what: &str, request: FilesRequest, code: ReplyErrorCode, words: &str) {
    let started = Instant::now();
    let answer = rig.files(request).await;
    let Err((got, message)) = answer else { panic!("{what}: answered {answer:?}") };
    assert_eq!(got, code, "{what}: {message}");
    assert!(message.contains(words), "{what}: the message does not say `{words}`: {message}");
    assert!(!message.contains(SECRET) && !message.contains(HIDDEN_NAME), "{what}: leaked: {message}");
    println!("attack: files {what}: refused {code:?} in {} ms: {message}", started.elapsed().as_millis());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_files_parent_dir_is_refused() {
    let mut rig = project_rig(Via::Lan, |_, _| {}).await;
    refused(&mut rig, "`..`", read("../outside/secret.txt"), ReplyErrorCode::PathRefused, "`..`").await;
    refused(&mut rig, "`..` list", list("sub/../..", None), ReplyErrorCode::PathRefused, "`..`").await;
    let write = FilesRequest::WriteText { path: "../outside/new.txt".into(), text: "x".into(), expected_sha256: None };
    refused(&mut rig, "`..` write", write, ReplyErrorCode::PathRefused, "`..`").await;
    assert!(!rig.outside.join("new.txt").exists(), "a file was written outside");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_files_absolute_path_is_refused() {
    let mut rig = project_rig(Via::Lan, |_, _| {}).await;
    let secret = rig.outside.join("secret.txt").display().to_string();
    refused(&mut rig, "absolute", read(&secret), ReplyErrorCode::PathRefused, "absolute").await;
    refused(&mut rig, "absolute list", list("/", None), ReplyErrorCode::PathRefused, "absolute").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_files_symlink_out_is_refused() {
    let mut rig = project_rig(Via::Lan, |project, outside| {
        std::os::unix::fs::symlink(outside.join("secret.txt"), project.join("link-file")).unwrap();
        std::os::unix::fs::symlink(outside, project.join("link-dir")).unwrap();
        std::os::unix::fs::symlink("inside.txt", project.join("link-inside")).unwrap();
        std::fs::write(project.join("inside.txt"), "fine").unwrap();
        std::os::unix::fs::symlink("loop", project.join("loop")).unwrap();
    })
    .await;
    refused(&mut rig, "symlink loop", read("loop"), ReplyErrorCode::PathRefused, "symbolic links").await;
    refused(&mut rig, "symlink to a file outside", read("link-file"), ReplyErrorCode::PathRefused, "outside").await;
    refused(&mut rig, "symlink to a dir outside", list("link-dir", None), ReplyErrorCode::PathRefused, "outside").await;
    refused(&mut rig, "through a symlinked dir", read("link-dir/secret.txt"), ReplyErrorCode::PathRefused, "outside")
        .await;
    let image = FilesRequest::ReadImage { path: "link-file".into() };
    refused(&mut rig, "image through a symlink", image, ReplyErrorCode::PathRefused, "outside").await;
    let write = FilesRequest::WriteText { path: "link-dir/new.txt".into(), text: "x".into(), expected_sha256: None };
    refused(&mut rig, "write through a symlinked dir", write, ReplyErrorCode::PathRefused, "outside").await;
    let write = FilesRequest::WriteText { path: "link-file".into(), text: "x".into(), expected_sha256: None };
    refused(&mut rig, "write over a symlink", write, ReplyErrorCode::PathRefused, "symlink").await;
    assert_eq!(std::fs::read_to_string(rig.outside.join("secret.txt")).unwrap(), SECRET);
    assert!(!rig.outside.join("new.txt").exists(), "a file was written outside");
    // A symlink that stays inside is followed; the listing shows links as links.
    let Ok(FilesResult::ReadText { text, .. }) = rig.files(read("link-inside")).await else { panic!() };
    assert_eq!(text, "fine");
    let Ok(FilesResult::List { entries, .. }) = rig.files(list("", None)).await else { panic!() };
    assert!(entries.iter().any(|e| e.name == "link-dir" && e.kind == EntryKind::Symlink), "{entries:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_files_fifo_is_never_opened() {
    let mut rig = project_rig(Via::Lan, |project, _| {
        let status = std::process::Command::new("mkfifo").arg(project.join("pipe")).status().unwrap();
        assert!(status.success());
    })
    .await;
    // Opening a FIFO for reading with no writer would block forever: the reply comes
    // at once, within the 30 s the rig allows.
    refused(&mut rig, "FIFO", read("pipe"), ReplyErrorCode::PathRefused, "FIFO").await;
    let image = FilesRequest::ReadImage { path: "pipe".into() };
    refused(&mut rig, "FIFO as image", image, ReplyErrorCode::PathRefused, "FIFO").await;
    let Ok(FilesResult::List { entries, .. }) = rig.files(list("", None)).await else { panic!() };
    assert!(entries.iter().any(|e| e.name == "pipe" && e.kind == EntryKind::Special), "{entries:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_files_one_gigabyte_file_is_refused_by_its_size() {
    let mut rig = project_rig(Via::Lan, |project, _| {
        let file = std::fs::File::create(project.join("huge.bin")).unwrap();
        file.set_len(1 << 30).unwrap();
    })
    .await;
    refused(&mut rig, "1 GB file", read("huge.bin"), ReplyErrorCode::TooLarge, "1073741824 bytes").await;
    let image = FilesRequest::ReadImage { path: "huge.bin".into() };
    refused(&mut rig, "1 GB image", image, ReplyErrorCode::TooLarge, "1073741824 bytes").await;
    let Ok(FilesResult::List { entries, .. }) = rig.files(list("", None)).await else { panic!() };
    assert!(entries.iter().any(|e| e.name == "huge.bin" && e.size == 1 << 30), "{entries:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_files_hundred_thousand_entries_are_bounded() {
    let mut rig = project_rig(Via::Lan, |project, _| {
        let many = project.join("many");
        std::fs::create_dir(&many).unwrap();
        for i in 0..100_000 {
            std::fs::File::create(many.join(format!("f{i:06}"))).unwrap();
        }
    })
    .await;
    for (limit, expected) in [(None, DEFAULT_LIST_ENTRIES), (Some(u32::MAX), MAX_LIST_ENTRIES)] {
        let started = Instant::now();
        let Ok(FilesResult::List { entries, truncated, .. }) = rig.files(list("many", limit)).await else { panic!() };
        let bytes = serde_json::to_string(&entries).unwrap().len();
        assert_eq!(entries.len(), expected as usize);
        assert!(truncated, "a cut listing says so");
        assert!(bytes < terminull_protocol::files::MAX_REPLY_BYTES, "{bytes} bytes");
        println!(
            "attack: files 100k-entry directory (limit {limit:?}): {} entries, truncated, {bytes} bytes of JSON, {} ms",
            entries.len(),
            started.elapsed().as_millis()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_files_non_utf8_name_is_listed_lossy_and_refused_by_name() {
    let mut rig = project_rig(Via::Lan, |project, _| {
        let name = std::ffi::OsStr::from_bytes(b"bad-\xff\xfe-name.txt");
        std::fs::write(project.join(name), "hidden by its name").unwrap();
    })
    .await;
    let Ok(FilesResult::List { entries, .. }) = rig.files(list("", None)).await else { panic!() };
    let entry = entries.iter().find(|e| !e.utf8).expect("the non-UTF-8 name is listed");
    assert_eq!(entry.name, "bad-\u{FFFD}\u{FFFD}-name.txt");
    let lossy = entry.name.clone();
    refused(&mut rig, "non-UTF-8 name", read(&lossy), ReplyErrorCode::NotFound, "not valid UTF-8").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_files_binary_and_oversized_writes_are_refused() {
    let mut rig = project_rig(Via::Lan, |project, _| {
        std::fs::write(project.join("bin.dat"), b"\x00\x01\x02binary").unwrap();
        std::fs::write(project.join("latin1.txt"), b"caf\xe9").unwrap();
    })
    .await;
    refused(&mut rig, "binary as text", read("bin.dat"), ReplyErrorCode::NotText, "binary").await;
    refused(&mut rig, "not UTF-8 as text", read("latin1.txt"), ReplyErrorCode::NotText, "not UTF-8").await;
    let image = FilesRequest::ReadImage { path: "bin.dat".into() };
    refused(&mut rig, "binary as image", image, ReplyErrorCode::NotText, "not a PNG").await;
    let big = "x".repeat(terminull_protocol::files::MAX_TEXT_BYTES as usize + 1);
    let write = FilesRequest::WriteText { path: "big.txt".into(), text: big, expected_sha256: None };
    refused(&mut rig, "oversized write", write, ReplyErrorCode::TooLarge, "262145 bytes").await;
    assert!(!rig.project.join("big.txt").exists());
}
