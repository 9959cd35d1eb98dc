//! Tests of compaction prepared off the session's task and installed by it: the index
//! written with the compacted log, and a log that grew meanwhile.

use terminull_protocol::blocks::{Block, BlockKind, Progress, StreamedText, UserMessage};

use super::*;

fn streamed_log() -> (tempfile::TempDir, SessionLog) {
    let tmp = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(tmp.path().join("sessions")).unwrap().with_sync_policy(SyncPolicy::Never);
    let mut log = store.create(SessionMeta::new("s1".into(), "echo".into(), "/tmp/work")).unwrap();
    let at = |ts: f64, kind| Block { seq: None, ts, meta: None, kind };
    for turn in 0..4u32 {
        log.append(at(
            100.0 + f64::from(turn),
            BlockKind::UserMessage(UserMessage { text: format!("m{turn}"), attachments: vec![] }),
        ))
        .unwrap();
        for i in 1..=10usize {
            // ts going backwards now and then: the index keeps a running maximum.
            let ts = if i == 5 { 1.0 } else { 100.0 + f64::from(turn) + i as f64 };
            let body = "z".repeat(i * 7);
            log.append(at(ts, BlockKind::Text(StreamedText::snapshot(format!("t{turn}").as_str(), &body, i == 10))))
                .unwrap();
            let progress =
                Progress { id: "p".into(), message: format!("step {i}"), current: None, total: None, done: false };
            log.append(at(ts, BlockKind::Progress(progress))).unwrap();
        }
    }
    (tmp, log)
}

fn index_bytes(log: &SessionLog) -> Vec<u8> {
    std::fs::read(log.dir().join(INDEX_FILE)).unwrap()
}

#[test]
fn the_index_written_with_a_compacted_log_is_the_one_a_rebuild_makes() {
    let (_tmp, mut log) = streamed_log();
    let before = log.read_all().unwrap();
    let prepared = log.compaction_job().prepare().unwrap();
    let stats = log.install_compaction(prepared).unwrap().expect("installed");
    assert!(stats.blocks_after < stats.blocks_before / 3, "{stats:?}");
    let written = index_bytes(&log);
    assert_eq!(log.read_all().unwrap(), before);
    log.repair_index().unwrap();
    assert_eq!(index_bytes(&log), written);
    assert_eq!(log.read_since_ts(99.0).unwrap(), before.iter().filter(|b| b.ts > 99.0).cloned().collect::<Vec<_>>());
}

#[test]
fn a_compaction_is_not_installed_when_the_log_grew_meanwhile() {
    let (_tmp, mut log) = streamed_log();
    let prepared = log.compaction_job().prepare().unwrap();
    let extra = Block {
        seq: None,
        ts: 500.0,
        meta: None,
        kind: BlockKind::UserMessage(UserMessage { text: "late".into(), attachments: vec![] }),
    };
    let seq = log.append(extra).unwrap().seq;
    let len = log.len_bytes();
    let before = log.read_all().unwrap();
    assert_eq!(log.install_compaction(prepared).unwrap(), None);
    assert_eq!(log.len_bytes(), len);
    assert_eq!(log.read_all().unwrap(), before);
    assert_eq!(before.last().and_then(|b| b.seq), seq);
    // The prepared files are gone; only the session's own files remain.
    let mut names: Vec<String> =
        std::fs::read_dir(log.dir()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, vec![INDEX_FILE, DATA_FILE, META_FILE]);
}

#[test]
fn a_replay_says_how_many_lines_it_read() {
    let (_tmp, log) = streamed_log();
    let kept = log.read_since_seq(0).unwrap().len() as u64;
    assert_eq!(log.last_replay_lines(), log.last_seq());
    assert!(kept * 2 < log.last_replay_lines());
}
