use serde_json::json;
use terminull_protocol::streamed::StreamedText;

use super::*;

fn block(seq: u64, value: serde_json::Value) -> Block {
    let mut v = value;
    v["seq"] = json!(seq);
    v["ts"] = json!(1.0);
    serde_json::from_value(v).unwrap()
}

fn chunk(seq: u64, chunk: StreamedText) -> Block {
    Block { seq: Some(seq), ts: 1.0, meta: None, kind: BlockKind::Text(chunk) }
}

fn snap(seq: u64, text: &str, done: bool) -> Block {
    chunk(seq, StreamedText::snapshot("m", text, done))
}

fn app(seq: u64, offset: u64, text: &str, done: bool) -> Block {
    chunk(seq, StreamedText::append("m", offset, text, done))
}

fn shown(t: &Transcript) -> Vec<serde_json::Value> {
    t.entries().iter().map(|b| serde_json::to_value(b).unwrap()).collect()
}

#[test]
fn a_repeated_text_id_replaces_in_place_and_a_repeated_seq_is_dropped() {
    let mut t = Transcript::new();
    assert_eq!(t.apply(block(1, json!({"type":"text","id":"a","text":"He","done":false}))), Applied::Added);
    t.apply(block(2, json!({"type":"error","message":"x","recoverable":true})));
    assert_eq!(t.apply(block(3, json!({"type":"text","id":"a","text":"Hello","done":true}))), Applied::Added);
    assert_eq!(t.apply(block(3, json!({"type":"text","id":"a","text":"x","done":true}))), Applied::Duplicate);
    let entries = t.entries();
    assert_eq!(entries.len(), 2);
    assert_eq!(serde_json::to_value(&entries[0]).unwrap()["text"], "Hello");
    assert_eq!(t.seqs(), vec![1, 2, 3]);
    assert_eq!(t.last_seq(), 3);
}

#[test]
fn older_history_merges_by_seq() {
    let mut t = Transcript::new();
    t.apply(block(5, json!({"type":"error","message":"late","recoverable":true})));
    t.apply(block(2, json!({"type":"error","message":"early","recoverable":true})));
    assert_eq!(t.seqs(), vec![2, 5]);
    assert_eq!(serde_json::to_value(&t.entries()[0]).unwrap()["message"], "early");
    assert_eq!(t.last_seq(), 5);
}

/// One case: blocks applied in order, what each apply returns, then the text shown
/// for the message, whether it is done, and where a resume must start.
struct Case {
    name: &'static str,
    blocks: Vec<Block>,
    results: Vec<Applied>,
    text: &'static str,
    done: bool,
    resume: u64,
}

fn user(seq: u64) -> Block {
    block(seq, json!({"type":"user_message","text":"hi"}))
}

#[test]
fn streamed_messages_rebuild_from_snapshots_and_appends() {
    use Applied::*;
    let cases = vec![
        Case {
            name: "appends in order",
            blocks: vec![
                user(1),
                app(2, 0, "Hé", false),
                app(3, 3, "llo ", false),
                app(4, 7, "😀", false),
                app(5, 11, "", true),
            ],
            results: vec![Added, Added, Added, Added, Added],
            text: "Héllo 😀",
            done: true,
            resume: 5,
        },
        Case {
            name: "appends, then a replay's snapshot at a seq held and at a new one",
            blocks: vec![
                user(1),
                app(2, 0, "ab", false),
                app(3, 2, "cd", false),
                snap(3, "abcd", false),
                snap(4, "abcdef", true),
            ],
            results: vec![Added, Added, Added, Rebuilt, Added],
            text: "abcdef",
            done: true,
            resume: 4,
        },
        Case {
            name: "a since_seq replay sends one append continuing the message",
            blocks: vec![user(1), app(2, 0, "one ", false), app(3, 4, "two ", false), app(7, 8, "three four", true)],
            results: vec![Added, Added, Added, Added],
            text: "one two three four",
            done: true,
            resume: 7,
        },
        Case {
            name: "a dropped piece is a gap; the prefix held is shown",
            blocks: vec![user(1), app(2, 0, "ab", false), app(4, 4, "ef", false), app(5, 6, "g", true)],
            results: vec![Added, Added, Gap { since_seq: 1 }, Gap { since_seq: 1 }],
            text: "ab",
            done: false,
            resume: 1,
        },
        Case {
            name: "the resume's snapshot repairs the gap",
            blocks: vec![user(1), app(2, 0, "ab", false), app(4, 4, "ef", false), snap(4, "abcdef", false)],
            results: vec![Added, Added, Gap { since_seq: 1 }, Rebuilt],
            text: "abcdef",
            done: false,
            resume: 4,
        },
        Case {
            name: "the missing piece arriving later (older seq) repairs the gap",
            blocks: vec![user(1), app(2, 0, "ab", false), app(4, 4, "ef", true), app(3, 2, "cd", false)],
            results: vec![Added, Added, Gap { since_seq: 1 }, Added],
            text: "abcdef",
            done: true,
            resume: 4,
        },
        Case {
            name: "duplicates by seq are skipped",
            blocks: vec![
                user(1),
                app(2, 0, "ab", false),
                app(2, 0, "ab", false),
                app(3, 2, "c", true),
                app(3, 2, "c", true),
            ],
            results: vec![Added, Added, Duplicate, Added, Duplicate],
            text: "abc",
            done: true,
            resume: 3,
        },
        Case {
            name: "snapshot-only streams work as before",
            blocks: vec![user(1), snap(2, "Hel", false), snap(3, "Hello", false), snap(4, "Hello!", true)],
            results: vec![Added, Added, Added, Added],
            text: "Hello!",
            done: true,
            resume: 4,
        },
    ];
    for case in cases {
        let mut t = Transcript::new();
        let results: Vec<Applied> = case.blocks.into_iter().map(|b| t.apply(b)).collect();
        assert_eq!(results, case.results, "{}", case.name);
        let entries = shown(&t);
        assert_eq!(entries.len(), 2, "{}: the message is shown once", case.name);
        assert_eq!(entries[1]["text"], case.text, "{}", case.name);
        assert_eq!(entries[1]["done"], case.done, "{}", case.name);
        assert!(entries[1].get("offset").is_none(), "{}: shown as a snapshot", case.name);
        assert_eq!(t.resume_seq(), case.resume, "{}", case.name);
        assert_eq!(t.gaps().is_empty(), !matches!(results.last(), Some(Gap { .. })), "{}", case.name);
    }
}

#[test]
fn a_gap_names_the_message_and_the_resume_it_needs() {
    let mut t = Transcript::new();
    t.apply(user(1));
    t.apply(app(2, 0, "ab", false));
    t.apply(app(4, 4, "ef", false));
    assert_eq!(t.gaps(), vec![super::Gap { block_type: "text", id: "m".into(), since_seq: 1 }]);
    let resume = t.session_resume(SessionId("s".into()));
    assert_eq!((resume.session_id.as_str(), resume.since_seq), ("s", Some(1)));
}

#[test]
fn a_message_is_shown_at_its_first_chunk_with_the_newest_seq() {
    let mut t = Transcript::new();
    t.apply(app(1, 0, "a", false));
    t.apply(user(2));
    t.apply(app(3, 1, "b", true));
    let entries = shown(&t);
    assert_eq!(entries[0]["type"], "text");
    assert_eq!((entries[0]["text"].as_str(), entries[0]["seq"].as_u64()), (Some("ab"), Some(3)));
    assert_eq!(entries[1]["type"], "user_message");
}

/// The text of the one message held ("" before any chunk).
fn held_text(t: &Transcript) -> String {
    shown(t).first().and_then(|e| e["text"].as_str().map(str::to_owned)).unwrap_or_default()
}

/// Random splits of a text with multi-byte characters, some pieces dropped: the text
/// shown is always a prefix of the real one, and exact when nothing was dropped.
#[test]
fn random_splits_rebuild_exactly_or_report_a_gap() {
    let text = "héllo €uro 😀 wörld — ünïcode ✓ done";
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for round in 0..300 {
        let mut bounds: Vec<usize> = (0..next(8)).map(|_| next(text.len() + 1)).collect();
        bounds.retain(|b| text.is_char_boundary(*b));
        bounds.extend([0, text.len()]);
        bounds.sort_unstable();
        bounds.dedup();
        let dropped = if round % 2 == 0 { None } else { Some(next(bounds.len() - 1)) };
        let mut t = Transcript::new();
        let pieces = bounds.windows(2).enumerate();
        for (i, w) in pieces {
            if Some(i) == dropped {
                continue;
            }
            let done = w[1] == text.len();
            t.apply(app(i as u64 + 1, w[0] as u64, &text[w[0]..w[1]], done));
            let held = held_text(&t);
            assert!(text.starts_with(&held), "round {round}: showed {held:?}");
        }
        let held = held_text(&t);
        let last_dropped = dropped == Some(bounds.len() - 2);
        if dropped.is_none() {
            assert_eq!(held, text, "round {round}");
            assert!(t.gaps().is_empty());
        } else if !last_dropped {
            assert!(held.len() < text.len() && !t.gaps().is_empty(), "round {round}: a gap is reported");
        }
    }
}

/// Whatever order the chunks arrive in (live, then older history), once all are held
/// the message is exact and has no gap; before that it only ever shows a prefix.
#[test]
fn chunks_in_any_order_fold_in_seq_order() {
    let text = "déjà €5 😀 fin";
    let bounds: Vec<usize> = (0..=text.len()).filter(|b| text.is_char_boundary(*b)).collect();
    let pieces: Vec<Block> = bounds
        .windows(2)
        .enumerate()
        .map(|(i, w)| app(i as u64 + 1, w[0] as u64, &text[w[0]..w[1]], w[1] == text.len()))
        .collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..100 {
        let mut order: Vec<Block> = pieces.clone();
        for i in (1..order.len()).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (state >> 33) as usize % (i + 1));
        }
        let mut t = Transcript::new();
        for b in order {
            t.apply(b);
            assert!(text.starts_with(&held_text(&t)), "round {round}");
        }
        assert_eq!(held_text(&t), text, "round {round}");
        assert!(t.gaps().is_empty(), "round {round}");
    }
}
