//! Streamed messages stored as appends: every replay rebuilds them whole, whatever
//! `seq` it starts from, and a rewrite of the log joins them into one line each.

use terminull_protocol::blocks::{Block, BlockKind, StreamedText, UserMessage};
use terminull_protocol::streamed::Assembly;

use super::*;

fn store() -> (tempfile::TempDir, HistoryStore) {
    let tmp = tempfile::tempdir().unwrap();
    let store = HistoryStore::open(tmp.path().join("sessions")).unwrap().with_sync_policy(SyncPolicy::Never);
    (tmp, store)
}

fn append(id: &str, offset: u64, text: &str, done: bool) -> Block {
    Block { seq: None, ts: 1.0, meta: None, kind: BlockKind::Text(StreamedText::append(id, offset, text, done)) }
}

/// A log with a user message, then message `m` streamed as `pieces` appends with
/// another user message in the middle; the whole text of `m`, and every block as it
/// went out live (stamped).
fn streamed(log: &mut SessionLog, pieces: usize) -> (String, Vec<Block>) {
    let user = |text: &str| Block::now(BlockKind::UserMessage(UserMessage { text: text.into(), attachments: vec![] }));
    let mut live = vec![log.append(user("go")).unwrap()];
    let mut whole = String::new();
    for i in 0..pieces {
        let piece = format!("piece {i} é ");
        live.push(log.append(append("m", whole.len() as u64, &piece, false)).unwrap());
        whole.push_str(&piece);
        if i == pieces / 2 {
            live.push(log.append(user("queued")).unwrap());
        }
    }
    live.push(log.append(append("m", whole.len() as u64, "", true)).unwrap());
    (whole, live)
}

fn text_chunks(blocks: &[Block]) -> Vec<StreamedText> {
    blocks
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Text(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_replay_from_the_start_sends_the_message_as_one_snapshot() {
    let (_tmp, store) = store();
    let mut log = store.create(SessionMeta::new("s1".into(), "echo".into(), "/tmp")).unwrap();
    let (whole, _) = streamed(&mut log, 40);
    let all = log.read_all().unwrap();
    assert_eq!(text_chunks(&all), [StreamedText::snapshot("m", whole.as_str(), true)]);
    assert_eq!(all.last().unwrap().seq, Some(log.last_seq()), "the joined message carries its last chunk's seq");
}

#[test]
fn a_replay_from_the_middle_of_a_message_continues_it_with_one_append() {
    let (_tmp, store) = store();
    let mut log = store.create(SessionMeta::new("s1".into(), "echo".into(), "/tmp")).unwrap();
    let (whole, live) = streamed(&mut log, 40);
    for since in 1..log.last_seq() {
        // What a receiver holds after `since`, then what it gets on resuming from there.
        let mut assembly = Assembly::default();
        let held: Vec<Block> = live.iter().filter(|b| b.seq <= Some(since)).cloned().collect();
        for chunk in text_chunks(&held) {
            assembly.apply(&chunk);
        }
        let resumed = text_chunks(&log.read_since_seq(since).unwrap());
        assert!(resumed.len() <= 1, "one chunk per message, from seq {since}: {resumed:?}");
        for chunk in &resumed {
            assembly.apply(chunk);
        }
        assert_eq!(assembly.text(), whole, "resumed from seq {since}");
        assert!(assembly.is_done());
    }
}

#[test]
fn a_rewrite_joins_each_message_into_one_line_and_replays_the_same() {
    let (_tmp, store) = store();
    let mut log = store.create(SessionMeta::new("s1".into(), "echo".into(), "/tmp")).unwrap();
    let (whole, _) = streamed(&mut log, 200);
    let before = log.read_all().unwrap();
    let stats = log.compact().unwrap();
    assert_eq!(stats.blocks_after, 3, "two user messages and the joined message");
    assert!(stats.bytes_after < whole.len() as u64 + 400, "{stats:?} for {} bytes of text", whole.len());
    assert_eq!(log.read_all().unwrap(), before);
    assert_eq!(text_chunks(&log.read_since_seq(0).unwrap()), [StreamedText::snapshot("m", whole.as_str(), true)]);
}

/// Reads from `since` page by page (`max_bytes` each), compacting the log before the
/// page numbered `compact_before` when given: the text chunks received and the pages.
fn paged(
    log: &mut SessionLog,
    since: u64,
    max_bytes: u64,
    compact_before: Option<usize>,
) -> (Vec<StreamedText>, usize) {
    let (mut chunks, mut pages, mut after) = (Vec::new(), 0, Some(since));
    while let Some(from) = after {
        if compact_before == Some(pages) {
            log.compact().unwrap();
        }
        let page = log.read_page(from, max_bytes).unwrap();
        assert!(!page.blocks.is_empty() || page.more.is_none(), "a page that stops early holds a block");
        chunks.extend(text_chunks(&page.blocks));
        after = page.more;
        pages += 1;
    }
    (chunks, pages)
}

#[test]
fn pages_from_any_seq_rebuild_the_message_even_when_the_log_is_compacted_between_them() {
    for compact_before in [None, Some(1), Some(3)] {
        let (_tmp, store) = store();
        let mut log = store.create(SessionMeta::new("s1".into(), "echo".into(), "/tmp")).unwrap();
        let (whole, live) = streamed(&mut log, 60);
        for since in [0, 1, 5, 30, 58] {
            let mut assembly = Assembly::default();
            let held: Vec<Block> = live.iter().filter(|b| b.seq <= Some(since)).cloned().collect();
            for chunk in text_chunks(&held) {
                assembly.apply(&chunk);
            }
            let (chunks, pages) = paged(&mut log, since, 200, compact_before);
            for chunk in &chunks {
                assembly.apply(chunk);
            }
            assert_eq!(assembly.text(), whole, "from seq {since}, compacted before page {compact_before:?}");
            assert!(assembly.is_done());
            if compact_before.is_none() && since < 30 {
                assert!(pages > 3, "200-byte pages: {pages} from seq {since}");
            }
        }
    }
}

#[test]
fn a_page_stops_after_the_line_that_reaches_its_size_and_the_next_starts_after_it() {
    let (_tmp, store) = store();
    let mut log = store.create(SessionMeta::new("s1".into(), "echo".into(), "/tmp")).unwrap();
    let user =
        |i: usize| Block::now(BlockKind::UserMessage(UserMessage { text: "u".repeat(100 + i), attachments: vec![] }));
    for i in 0..10 {
        log.append(user(i)).unwrap();
    }
    let line = log.last_block_bytes();
    assert!(line > 100 && line < 400, "{line}");
    let first = log.read_page(0, 1).unwrap();
    assert_eq!((first.blocks.len(), first.more), (1, Some(1)), "one block at least");
    let two = log.read_page(3, line + 1).unwrap();
    assert_eq!(two.blocks.iter().map(|b| b.seq.unwrap()).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(two.more, Some(5));
    let rest = log.read_page(5, u64::MAX).unwrap();
    assert_eq!((rest.blocks.len(), rest.more), (5, None));
    assert_eq!(log.read_page(10, 1).unwrap(), Page { blocks: vec![], more: None });
}
