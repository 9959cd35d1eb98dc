use super::*;
use terminull_protocol::blocks::{PermissionOption, PermissionOptionKind, StreamedText};

/// What a terminal shows after `outs`: finished lines, then the unfinished one.
fn screen(outs: &[Out]) -> String {
    let (mut done, mut partial) = (String::new(), String::new());
    for out in outs {
        match out {
            Out::Line(l) => {
                done.push_str(l);
                done.push('\n');
                partial.clear();
            }
            Out::Partial(p) => partial = p.clone(),
        }
    }
    done + &partial
}

fn render_all(r: &mut Renderer, blocks: &[Block]) -> String {
    screen(&blocks.iter().flat_map(|b| r.render(b)).collect::<Vec<_>>())
}

fn text(id: &str, t: &str, done: bool) -> Block {
    Block::now(BlockKind::Text(StreamedText::snapshot(id, t, done)))
}

fn chunk(seq: u64, chunk: StreamedText) -> Block {
    Block { seq: Some(seq), ..Block::now(BlockKind::Text(chunk)) }
}

fn user(seq: u64, text: &str) -> Block {
    Block {
        seq: Some(seq),
        ..Block::now(BlockKind::UserMessage(serde_json::from_value(serde_json::json!({"text": text})).unwrap()))
    }
}

fn end(seq: u64) -> Block {
    Block {
        seq: Some(seq),
        ..Block::now(BlockKind::SessionEnd(serde_json::from_value(serde_json::json!({"reason": "completed"})).unwrap()))
    }
}

#[test]
fn streamed_text_grows_in_place_and_ends_the_line_once() {
    let mut r = Renderer::default();
    let outs: Vec<Out> = [text("m", "Hel", false), text("m", "Hello", false), text("m", "Hello!", true)]
        .iter()
        .flat_map(|b| r.render(b))
        .collect();
    assert_eq!(outs, [Out::Partial("Hel".into()), Out::Partial("Hello".into()), Out::Line("Hello!".into())]);
}

#[test]
fn a_chunk_that_rewrites_the_text_is_shown_whole() {
    let mut r = Renderer::default();
    assert_eq!(render_all(&mut r, &[text("m", "abc", false), text("m", "xyz", true)]), "abc\nxyz\n");
}

#[test]
fn streamed_text_prints_each_new_piece_once() {
    let append = |seq, offset, t: &str, done| chunk(seq, StreamedText::append("m", offset, t, done));
    let snapshot = |seq, t: &str, done| chunk(seq, StreamedText::snapshot("m", t, done));
    let cases: Vec<(&str, Vec<Block>, &str)> = vec![
        (
            "appends in order",
            vec![append(1, 0, "Hé", false), append(2, 3, "llo 😀", false), append(3, 11, "", true)],
            "Héllo 😀\n",
        ),
        (
            "a repeated seq prints nothing",
            vec![append(1, 0, "ab", false), append(1, 0, "ab", false), append(2, 2, "c", true)],
            "abc\n",
        ),
        (
            "a snapshot extending what was printed prints the rest",
            vec![append(1, 0, "ab", false), snapshot(2, "abcd", true)],
            "abcd\n",
        ),
        (
            "a snapshot rewriting it prints the whole text again",
            vec![append(1, 0, "ab", false), snapshot(2, "xy", true)],
            "ab\nxy\n",
        ),
        (
            "a gap prints nothing until the replay's snapshot",
            vec![append(1, 0, "ab", false), append(3, 4, "ef", false), snapshot(3, "abcdef", true)],
            "abcdef\n",
        ),
        (
            "lines finish as their newline comes",
            vec![append(1, 0, "a\nb", false), append(2, 3, "c\n", true)],
            "a\nbc\n",
        ),
    ];
    for (name, blocks, expected) in cases {
        let mut r = Renderer::default();
        assert_eq!(render_all(&mut r, &blocks), expected, "{name}");
    }
}

#[test]
fn a_gap_asks_to_resume_from_before_the_message_once() {
    let mut r = Renderer::default();
    r.render(&user(1, "hi"));
    r.render(&chunk(2, StreamedText::append("m", 0, "ab", false)));
    assert_eq!(r.take_resume(), None);
    assert!(r.render(&chunk(4, StreamedText::append("m", 4, "ef", false))).is_empty());
    assert_eq!(r.take_resume(), Some(1));
    assert_eq!(r.take_resume(), None);
}

#[test]
fn a_message_typed_during_a_reply_is_shown_after_it_not_inside_it() {
    let mut r = Renderer::default();
    let append = |seq, offset, t: &str, done| chunk(seq, StreamedText::append("m", offset, t, done));
    let blocks = [
        user(1, "slow a b c"),
        append(2, 0, "You said: slow a ", false),
        user(3, "typed meanwhile"),
        append(4, 17, "b c", true),
        end(5),
    ];
    assert_eq!(render_all(&mut r, &blocks), "❯ slow a b c\nYou said: slow a b c\n❯ typed meanwhile\n");
}

#[test]
fn tool_cards_are_one_line_replaced_by_their_status() {
    let call = |status: &str| {
        Block::now(BlockKind::ToolCall(
            serde_json::from_value(serde_json::json!({
                "id": "t1", "name": "Bash", "input": {"command": "ls -la"}, "status": status
            }))
            .unwrap(),
        ))
    };
    let mut r = Renderer::default();
    assert_eq!(render_all(&mut r, &[call("running"), call("done")]), "✓ Bash ls -la · done\n");
}

#[test]
fn a_permission_request_shows_the_whole_command() {
    let long = format!("echo {}", "x".repeat(300));
    let request = PermissionRequest {
        request_id: "p".into(),
        tool: "Bash".into(),
        input: serde_json::json!({"command": long}),
        options: vec![PermissionOption { id: "y".into(), label: "y".into(), kind: PermissionOptionKind::AllowOnce }],
        tool_call_id: None,
    };
    let mut r = Renderer::default();
    let shown = render_all(&mut r, &[Block::now(BlockKind::PermissionRequest(request))]);
    assert!(shown.contains(&long), "{shown}");
    assert!(shown.ends_with("allow? [y/N]"), "the question waits on its own line: {shown}");
    let answered = screen(&r.answer(true, "y"));
    assert_eq!(answered, "  allow? [y/N] y — allowed\n");
}

#[test]
fn a_replayed_permission_request_says_it_was_answered() {
    let request = PermissionRequest {
        request_id: "p".into(),
        tool: "echo".into(),
        input: serde_json::json!({"text": "ask me"}),
        options: Vec::new(),
        tool_call_id: None,
    };
    let mut r = Renderer::default();
    let shown =
        render_all(&mut r, &[Block::now(BlockKind::PermissionRequest(request)), text("m", "You said: ask me", true)]);
    assert_eq!(shown, "? echo asks to run:\n  ask me\n  allow? [y/N] — answered\nYou said: ask me\n");
}
