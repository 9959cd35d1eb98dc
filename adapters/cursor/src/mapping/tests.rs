//! Tests of the cursor mapping: events in, actions and blocks out.

use terminull_adapter_sdk::testing::{Ending, assert_contract_so_far, blocks_of, describe, map_turn};
use terminull_protocol::blocks::ToolStatus;

use serde_json::json;

use super::*;
use crate::events::parse_event;

const SID: &str = "c6b62c6f-7ead-4fd6-9922-e952131177ff";

/// The documented example sequence (output-format reference), verbatim in shape.
const DOCUMENTED: &str = r##"{"type":"system","subtype":"init","apiKeySource":"login","cwd":"/Users/user/project","session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff","model":"Claude 4 Sonnet","permissionMode":"default"}
{"type":"user","message":{"role":"user","content":[{"type":"text","text":"Read README.md and create a summary"}]},"session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"I'll "}]},"session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"read the README.md file"}]},"session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff"}
{"type":"tool_call","subtype":"started","call_id":"toolu_vrtx_01NnjaR886UcE8whekg2MGJd","tool_call":{"readToolCall":{"args":{"path":"README.md"}}},"session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff"}
{"type":"tool_call","subtype":"completed","call_id":"toolu_vrtx_01NnjaR886UcE8whekg2MGJd","tool_call":{"readToolCall":{"args":{"path":"README.md"},"result":{"success":{"content":"# Project\n\nThis is a sample project...","isEmpty":false,"exceededLimit":false,"totalLines":54,"totalChars":1254}}}},"session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":" and create a summary"}]},"session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff"}
{"type":"tool_call","subtype":"started","call_id":"toolu_vrtx_01Q3VHVnWFSKygaRPT7WDxrv","tool_call":{"writeToolCall":{"args":{"path":"summary.txt","fileText":"# README Summary\n\nThis project contains...","toolCallId":"toolu_vrtx_01Q3VHVnWFSKygaRPT7WDxrv"}}},"session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff"}
{"type":"tool_call","subtype":"completed","call_id":"toolu_vrtx_01Q3VHVnWFSKygaRPT7WDxrv","tool_call":{"writeToolCall":{"args":{"path":"summary.txt","fileText":"# README Summary\n\nThis project contains...","toolCallId":"toolu_vrtx_01Q3VHVnWFSKygaRPT7WDxrv"},"result":{"success":{"path":"/Users/user/project/summary.txt","linesCreated":19,"fileSize":942}}}},"session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff"}
{"type":"result","subtype":"success","duration_ms":5234,"duration_api_ms":5234,"is_error":false,"result":"I'll read the README.md file and create a summary","session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff","request_id":"10e11780-df2f-45dc-a1ff-4540af32e9c0"}"##;

/// `--stream-partial-output`: reasoning, pieces, the consolidated message before the
/// tool call, a shell call, pieces of the answer, the whole answer again, the result.
const PARTIAL_SHELL: &str = r#"{"type":"system","subtype":"init","apiKeySource":"env","cwd":"/w","session_id":"s-1","model":"Auto","permissionMode":"default"}
{"type":"user","message":{"role":"user","content":[{"type":"text","text":"mock:tool please"}]},"session_id":"s-1"}
{"type":"thinking","subtype":"delta","text":"The user wants ","session_id":"s-1","timestamp_ms":1}
{"type":"thinking","subtype":"delta","text":"a command run.","session_id":"s-1","timestamp_ms":2}
{"type":"thinking","subtype":"completed","session_id":"s-1","timestamp_ms":3}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"I'll run "}]},"session_id":"s-1","timestamp_ms":4}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"the command."}]},"session_id":"s-1","timestamp_ms":5}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"I'll run the command."}]},"session_id":"s-1","model_call_id":"m-1","timestamp_ms":6}
{"type":"tool_call","subtype":"started","call_id":"call_1","tool_call":{"shellToolCall":{"args":{"command":"echo hello","workingDirectory":"/w","timeout":30000}}},"model_call_id":"m-1","session_id":"s-1","timestamp_ms":7}
{"type":"tool_call","subtype":"completed","call_id":"call_1","tool_call":{"shellToolCall":{"args":{"command":"echo hello","workingDirectory":"/w","timeout":30000},"result":{"success":{"command":"echo hello","exitCode":0,"stdout":"hello\n","stderr":"","executionTime":12},"isBackground":false}}},"model_call_id":"m-1","session_id":"s-1","timestamp_ms":8}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"It printed "}]},"session_id":"s-1","timestamp_ms":9}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"hello."}]},"session_id":"s-1","timestamp_ms":10}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"I'll run the command.\n\nIt printed hello."}]},"session_id":"s-1"}
{"type":"result","subtype":"success","duration_ms":900,"duration_api_ms":900,"is_error":false,"result":"I'll run the command.It printed hello.","session_id":"s-1","request_id":"r-1","usage":{"inputTokens":1200,"outputTokens":40,"cacheReadTokens":300}}"#;

/// One line per complete message (no `--stream-partial-output`), the final message
/// repeated as the cumulative answer.
const WHOLE_MESSAGES: &str = r#"{"type":"system","subtype":"init","session_id":"s-2","model":"Auto"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Listing files."}]},"session_id":"s-2","model_call_id":"m-1","timestamp_ms":1}
{"type":"tool_call","subtype":"started","call_id":"c-ls","tool_call":{"lsToolCall":{"args":{"path":"/w","ignore":[]}}},"session_id":"s-2"}
{"type":"tool_call","subtype":"completed","call_id":"c-ls","tool_call":{"lsToolCall":{"args":{"path":"/w","ignore":[]},"result":{"success":{"directoryTreeRoot":{"absPath":"/w","childrenFiles":[{"name":"a.txt"}]}}}}},"session_id":"s-2"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"There is one file: a.txt."}]},"session_id":"s-2"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"There is one file: a.txt."}]},"session_id":"s-2"}
{"type":"result","subtype":"success","is_error":false,"result":"Listing files.There is one file: a.txt.","session_id":"s-2"}"#;

/// Edits, a rejected shell call, a failed read, a grep and an MCP-style function call.
const TOOLS: &str = r##"{"type":"tool_call","subtype":"started","call_id":"e1","tool_call":{"editToolCall":{"args":{"path":"/w/hello.py","streamContent":"x"}}}}
{"type":"tool_call","subtype":"completed","call_id":"e1","tool_call":{"editToolCall":{"args":{"path":"/w/hello.py"},"result":{"success":{"path":"/w/hello.py","linesAdded":1,"linesRemoved":0,"diffString":"--- a\n+++ b\n@@ -1 +1,2 @@\n+# greeting\n print('hi')","beforeFullFileContent":"print('hi')\n","afterFullFileContent":"# greeting\nprint('hi')\n"}}}}}
{"type":"tool_call","subtype":"completed","call_id":"e2","tool_call":{"editToolCall":{"args":{"path":"b.rs"},"result":{"success":{"diffString":"--- a/b.rs\n+++ b/b.rs\n@@ -1 +1 @@\n-a\n+b"}}}}}
{"type":"tool_call","subtype":"started","call_id":"sh","tool_call":{"shellToolCall":{"args":{"command":"python3 hello.py"}}}}
{"type":"tool_call","subtype":"completed","call_id":"sh","tool_call":{"shellToolCall":{"result":{"rejected":{"command":"python3 hello.py","workingDirectory":"/w","reason":"","isReadonly":false}}}}}
{"type":"tool_call","subtype":"started","call_id":"sh2","tool_call":{"shellToolCall":{"args":{"command":"false"}}}}
{"type":"tool_call","subtype":"completed","call_id":"sh2","tool_call":{"shellToolCall":{"args":{"command":"false"},"result":{"success":{"exitCode":1,"stdout":"","stderr":""}}}}}
{"type":"tool_call","subtype":"started","call_id":"r1","tool_call":{"readToolCall":{"args":{"path":"missing.txt"}}}}
{"type":"tool_call","subtype":"completed","call_id":"r1","tool_call":{"readToolCall":{"args":{"path":"missing.txt"},"result":{"error":{"errorMessage":"File not found"}}}}}
{"type":"tool_call","subtype":"started","call_id":"g1","tool_call":{"grepToolCall":{"args":{"pattern":"TODO","path":"src"}}}}
{"type":"tool_call","subtype":"completed","call_id":"g1","tool_call":{"grepToolCall":{"args":{"pattern":"TODO"},"result":{"success":{"matches":2}}}}}
{"type":"tool_call","subtype":"started","call_id":"d1","tool_call":{"deleteToolCall":{"args":{"path":"/w/old.txt"}}}}
{"type":"tool_call","subtype":"completed","call_id":"d1","tool_call":{"deleteToolCall":{"args":{"path":"/w/old.txt"},"result":{"success":{}}}}}
{"type":"tool_call","subtype":"started","call_id":"f1","tool_call":{"function":{"name":"docs_search","arguments":"{\"q\":\"serde\"}"}}}
{"type":"tool_call","subtype":"completed","call_id":"f1","tool_call":{"function":{"name":"docs_search","arguments":"{\"q\":\"serde\"}","result":{"success":"found 3"}}}}
{"type":"result","subtype":"success","is_error":false,"result":""}"##;

/// Odd input: repeated and id-less tool events, a call id with a newline, unknown
/// events, a result without assistant lines, a late line.
const ODDITIES: &str = r#"{"type":"system","subtype":"init","session_id":"s-3"}
{"type":"system","subtype":"init","session_id":"s-3"}
{"type":"interaction_query","subtype":"request","session_id":"s-3"}
{"type":"tool_call","subtype":"started","call_id":"a\nb","tool_call":{"readToolCall":{"args":{"path":"x"}}}}
{"type":"tool_call","subtype":"started","call_id":"a\nb","tool_call":{"readToolCall":{"args":{"path":"x"}}}}
{"type":"tool_call","subtype":"completed","call_id":"a\nb","tool_call":{"readToolCall":{"args":{"path":"x"},"result":{"success":{"content":"xx"}}}}}
{"type":"tool_call","subtype":"completed","call_id":"a\nb","tool_call":{"readToolCall":{"args":{"path":"x"},"result":{"success":{"content":"xx"}}}}}
{"type":"tool_call","subtype":"started","tool_call":{"globToolCall":{"args":{"globPattern":"**/*.rs"}}}}
{"type":"tool_call","subtype":"completed","tool_call":{"globToolCall":{"result":{"success":{"files":["a.rs"]}}}}}
{"type":"tool_call","subtype":"started","call_id":"open","tool_call":{"lsToolCall":{"args":{"path":"/"}}}}
{"type":"tool_call","subtype":"progress","call_id":"open"}
{"type":"result","subtype":"success","is_error":false,"result":"All done.","usage":{"inputTokens":-5,"outputTokens":7}}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"too late"}]}}"#;

const FAILED: &str = r#"{"type":"system","subtype":"init","session_id":"s-4"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Let me"}]},"timestamp_ms":1}
{"type":"result","subtype":"error","is_error":true,"result":"Model provider returned 500","session_id":"s-4"}"#;

/// Runs lines through a fresh mapper (prefix `p`), then `ending`.
fn run(lines: &str, known_chat: Option<&str>, ending: Ending<'_>) -> (Vec<Action>, TurnMapper) {
    let mut mapper = TurnMapper::new("p", known_chat.map(str::to_owned));
    let actions = map_turn(&mut mapper, lines, parse_event, ending, |m, detail| m.on_exit(detail, "agent_exited"));
    (actions, mapper)
}

/// (name, lines, chat known before the turn, how the turn ends, expected actions)
type MappingCase<'a> = (&'a str, &'a str, Option<&'a str>, Ending<'a>, Vec<&'a str>);

#[test]
fn documented_and_synthetic_turns_map_to_these_blocks() {
    let sid = SID;
    let tool = "p-toolu_vrtx_01NnjaR886UcE8whekg2MGJd";
    let write = "p-toolu_vrtx_01Q3VHVnWFSKygaRPT7WDxrv";
    let write_input = r##"{"fileText":"# README Summary\n\nThis project contains...","path":"summary.txt","toolCallId":"toolu_vrtx_01Q3VHVnWFSKygaRPT7WDxrv"}"##;
    let documented = vec![
        format!("session_id {sid}"),
        "text p-text1 @0 done=false \"I'll \"".to_owned(),
        "text p-text1 @5 done=false \"read the README.md file\"".to_owned(),
        "text p-text1 @28 done=true \"\"".to_owned(),
        format!("tool_call {tool} read Running {{\"path\":\"README.md\"}} title=\"README.md\""),
        format!("tool_call {tool} read Done {{\"path\":\"README.md\"}} title=\"README.md\""),
        format!("tool_result {tool} error=false \"# Project\\n\\nThis is a sample project...\""),
        "text p-text2 @0 done=false \" and create a summary\"".to_owned(),
        "text p-text2 @21 done=true \"\"".to_owned(),
        format!("tool_call {write} write Running {write_input} title=\"summary.txt\""),
        format!(
            "diff /Users/user/project/summary.txt for {write} {{\"format\":\"replace\",\"old_text\":null,\"new_text\":\"# README Summary\\n\\nThis project contains...\"}}"
        ),
        format!("tool_call {write} write Done {write_input} title=\"summary.txt\""),
        format!("tool_result {write} error=false \"wrote /Users/user/project/summary.txt (19 lines, 942 bytes)\""),
        "session_end Completed".to_owned(),
    ];
    // PARTIAL_SHELL up to its shell call; the cases differ in how the call ends.
    let shell_call_started = [
        "session_id s-1",
        "thinking p-thinking1 @0 done=false \"The user wants \"",
        "thinking p-thinking1 @15 done=false \"a command run.\"",
        "thinking p-thinking1 @29 done=true \"\"",
        "text p-text2 @0 done=false \"I'll run \"",
        "text p-text2 @9 done=false \"the command.\"",
        "text p-text2 @21 done=true \"\"",
        "tool_call p-call_1 shell Running {\"command\":\"echo hello\",\"timeout\":30000,\"workingDirectory\":\"/w\"} title=\"echo hello\"",
    ];
    #[rustfmt::skip]
        let cases: Vec<MappingCase<'_>> = vec![
            ("the documented example sequence", DOCUMENTED, None, Ending::None,
                documented.iter().map(String::as_str).collect()),
            ("resumed chat is not reported again", &DOCUMENTED[..DOCUMENTED.find('\n').unwrap()], Some(sid), Ending::None, vec![]),
            ("partial output: pieces streamed, repeats dropped", PARTIAL_SHELL, None, Ending::None, [&shell_call_started[..], &[
                "tool_call p-call_1 shell Done {\"command\":\"echo hello\",\"timeout\":30000,\"workingDirectory\":\"/w\"} title=\"echo hello\"",
                "tool_result p-call_1 error=false \"hello\\n\"",
                "text p-text3 @0 done=false \"It printed \"",
                "text p-text3 @11 done=false \"hello.\"",
                "text p-text3 @17 done=true \"\"",
                "session_end Completed in=Some(1200) out=Some(40) cache_read=Some(300) cache_write=None",
            ]].concat()),
            ("whole messages: the repeated final message is dropped", WHOLE_MESSAGES, None, Ending::None, vec![
                "session_id s-2",
                "text p-text1 @0 done=false \"Listing files.\"",
                "text p-text1 @14 done=true \"\"",
                "tool_call p-c-ls ls Running {\"ignore\":[],\"path\":\"/w\"} title=\"/w\"",
                "tool_call p-c-ls ls Done {\"ignore\":[],\"path\":\"/w\"} title=\"/w\"",
                "tool_result p-c-ls error=false \"{\\\"directoryTreeRoot\\\":{\\\"absPath\\\":\\\"/w\\\",\\\"childrenFiles\\\":[{\\\"name\\\":\\\"a.txt\\\"}]}}\"",
                "text p-text2 @0 done=false \"There is one file: a.txt.\"",
                "text p-text2 @25 done=true \"\"",
                "session_end Completed",
            ]),
            ("tools: diffs, rejections, failures, functions", TOOLS, Some("s"), Ending::None, vec![
                "tool_call p-e1 edit Running {\"path\":\"/w/hello.py\",\"streamContent\":\"x\"} title=\"/w/hello.py\"",
                "diff /w/hello.py for p-e1 {\"format\":\"replace\",\"old_text\":\"print('hi')\\n\",\"new_text\":\"# greeting\\nprint('hi')\\n\"}",
                "tool_call p-e1 edit Done {\"path\":\"/w/hello.py\",\"streamContent\":\"x\"} title=\"/w/hello.py\"",
                "tool_result p-e1 error=false \"--- a\\n+++ b\\n@@ -1 +1,2 @@\\n+# greeting\\n print('hi')\"",
                "tool_call p-e2 edit Running {\"path\":\"b.rs\"} title=\"b.rs\"",
                "diff b.rs for p-e2 {\"format\":\"unified\",\"patch\":\"--- a/b.rs\\n+++ b/b.rs\\n@@ -1 +1 @@\\n-a\\n+b\"}",
                "tool_call p-e2 edit Done {\"path\":\"b.rs\"} title=\"b.rs\"",
                "tool_result p-e2 error=false \"--- a/b.rs\\n+++ b/b.rs\\n@@ -1 +1 @@\\n-a\\n+b\"",
                "tool_call p-sh shell Running {\"command\":\"python3 hello.py\"} title=\"python3 hello.py\"",
                "tool_call p-sh shell Error {\"command\":\"python3 hello.py\"} title=\"python3 hello.py\"",
                "tool_result p-sh error=true \"rejected by cursor-agent's permissions\\ncommand not run: python3 hello.py\\n(in print mode cursor-agent runs shell commands only with permission mode `force`)\"",
                "tool_call p-sh2 shell Running {\"command\":\"false\"} title=\"false\"",
                "tool_call p-sh2 shell Error {\"command\":\"false\"} title=\"false\"",
                "tool_result p-sh2 error=true \"exit code 1\"",
                "tool_call p-r1 read Running {\"path\":\"missing.txt\"} title=\"missing.txt\"",
                "tool_call p-r1 read Error {\"path\":\"missing.txt\"} title=\"missing.txt\"",
                "tool_result p-r1 error=true \"File not found\"",
                "tool_call p-g1 grep Running {\"path\":\"src\",\"pattern\":\"TODO\"} title=\"TODO\"",
                "tool_call p-g1 grep Done {\"path\":\"src\",\"pattern\":\"TODO\"} title=\"TODO\"",
                "tool_result p-g1 error=false \"{\\\"matches\\\":2}\"",
                "tool_call p-d1 delete Running {\"path\":\"/w/old.txt\"} title=\"/w/old.txt\"",
                "diff /w/old.txt for p-d1 {\"format\":\"unified\",\"patch\":\"--- a/w/old.txt\\n+++ /dev/null\\n\"}",
                "tool_call p-d1 delete Done {\"path\":\"/w/old.txt\"} title=\"/w/old.txt\"",
                "tool_result p-d1 error=false \"deleted /w/old.txt\"",
                "tool_call p-f1 docs_search Running {\"q\":\"serde\"} title=\"\"",
                "tool_call p-f1 docs_search Done {\"q\":\"serde\"} title=\"\"",
                "tool_result p-f1 error=false \"found 3\"",
                "session_end Completed",
            ]),
            ("oddities: repeats, missing ids, unknowns, answer only in the result, late lines", ODDITIES, None, Ending::None, vec![
                "session_id s-3",
                "tool_call p-ab read Running {\"path\":\"x\"} title=\"x\"",
                "tool_call p-ab read Done {\"path\":\"x\"} title=\"x\"",
                "tool_result p-ab error=false \"xx\"",
                "tool_call p-call1 glob Running {\"globPattern\":\"**/*.rs\"} title=\"**/*.rs\"",
                "tool_call p-call1 glob Done {\"globPattern\":\"**/*.rs\"} title=\"**/*.rs\"",
                "tool_result p-call1 error=false \"{\\\"files\\\":[\\\"a.rs\\\"]}\"",
                "tool_call p-open ls Running {\"path\":\"/\"} title=\"/\"",
                "tool_call p-open ls Error {\"path\":\"/\"} title=\"/\"",
                "tool_result p-open error=true \"the turn ended before the tool call finished\"",
                "text p-text2 @0 done=false \"All done.\"",
                "text p-text2 @9 done=true \"\"",
                "session_end Completed in=Some(0) out=Some(7)",
            ]),
            ("a failed result: error block, session_end error", FAILED, None, Ending::None, vec![
                "session_id s-4",
                "text p-text1 @0 done=false \"Let me\"",
                "text p-text1 @6 done=true \"\"",
                "error agent_error recoverable=true \"Model provider returned 500\"",
                "session_end Error \"Model provider returned 500\"",
            ]),
            ("output ends without a result", &PARTIAL_SHELL[..PARTIAL_SHELL.find("{\"type\":\"tool_call\",\"subtype\":\"completed\"").unwrap()], None,
                Ending::Exit("cursor-agent exited with status 1 before finishing the turn:\nError: boom"), [&shell_call_started[..], &[
                "tool_call p-call_1 shell Error {\"command\":\"echo hello\",\"timeout\":30000,\"workingDirectory\":\"/w\"} title=\"echo hello\"",
                "tool_result p-call_1 error=true \"cursor-agent exited before the tool call finished\"",
                "error agent_exited recoverable=true \"cursor-agent exited with status 1 before finishing the turn:\\nError: boom\"",
                "session_end Error \"cursor-agent exited with status 1 before finishing the turn:\\nError: boom\"",
            ]].concat()),
            ("interrupt closes open text and calls; no session_end of our own", &PARTIAL_SHELL[..PARTIAL_SHELL.find("{\"type\":\"assistant\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"the").unwrap()], Some("s-1"), Ending::Interrupt, vec![
                "thinking p-thinking1 @0 done=false \"The user wants \"",
                "thinking p-thinking1 @15 done=false \"a command run.\"",
                "thinking p-thinking1 @29 done=true \"\"",
                "text p-text2 @0 done=false \"I'll run \"",
                "text p-text2 @9 done=true \"\"",
            ]),
        ];
    for (name, lines, known, ending, want) in cases {
        let (actions, mapper) = run(lines, known, ending);
        let got: Vec<String> = actions.iter().map(describe).collect();
        assert_eq!(got, want, "{name}");
        // Whatever the CLI printed, the blocks keep the turn contract.
        assert_contract_so_far(name, &blocks_of(&actions));
        assert!(mapper.ended() || lines.lines().count() <= 1, "{name}");
    }
}

#[test]
fn repeats_are_recognised_only_for_non_pieces() {
    let line = |text: &str, extra: &str| {
        let body = json!({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}});
        let mut body = body.as_object().unwrap().clone();
        if let Ok(Value::Object(more)) = serde_json::from_str::<Value>(extra) {
            body.extend(more);
        }
        parse_event(Value::Object(body)).unwrap()
    };
    let piece = r#"{"timestamp_ms": 1}"#;
    let mut m = TurnMapper::new("p", None);
    m.on_event(line("ha", piece));
    // A piece equal to the text so far is new text ("haha"), not a repeat.
    let got: Vec<String> = m.on_event(line("ha", piece)).iter().map(describe).collect();
    assert_eq!(got, ["text p-text1 @2 done=false \"ha\""]);
    // A consolidated line that extends the open text: what it adds is appended.
    let got: Vec<String> = m.on_event(line("haha!", r#"{"model_call_id": "m"}"#)).iter().map(describe).collect();
    assert_eq!(got, ["text p-text1 @4 done=false \"!\""]);
    // Whitespace differences do not hide a repeat.
    assert!(m.on_event(line(" haha !\n", "{}")).is_empty());
    // A different whole message is appended.
    let got: Vec<String> = m.on_event(line(" Next.", "{}")).iter().map(describe).collect();
    assert_eq!(got, ["text p-text1 @5 done=false \" Next.\""]);
}

#[test]
fn chat_ids_are_reported_once_and_checked() {
    let init = |id: &str| parse_event(json!({"type": "system", "subtype": "init", "session_id": id})).unwrap();
    let mut m = TurnMapper::new("p", Some("old".into()));
    assert_eq!(m.on_event(init("new")), [Action::SessionId("new".into())]);
    assert!(m.on_event(init("new")).is_empty());
    assert!(m.on_event(init("has space")).is_empty());
    assert!(m.on_event(init(&"x".repeat(MAX_CHAT_ID_CHARS + 1))).is_empty());
    assert_eq!((m.chat_id(), m.saw_init()), (Some("new"), true));
    // Without an init, the result's session id is taken.
    let mut m = TurnMapper::new("p", None);
    let actions = m.on_event(parse_event(json!({"type": "result", "session_id": "from-result"})).unwrap());
    assert_eq!(actions[0], Action::SessionId("from-result".into()));
}

#[test]
fn after_the_end_nothing_more_comes_out() {
    let (_, mut mapper) = run(DOCUMENTED, None, Ending::None);
    assert!(mapper.ended());
    assert!(mapper.on_exit("late", "agent_exited").is_empty());
    assert!(mapper.on_interrupt().is_empty());
    assert!(mapper.on_event(Event::User).is_empty());
}

/// The CLI's token counts become a turn's `Usage` (summing turns is `Usage::add`'s, tested
/// in protocol).
#[test]
fn usage_is_converted() {
    let turn = usage_of(&TokenUsage {
        input_tokens: Some(100),
        output_tokens: Some(7),
        cache_read_tokens: Some(40),
        cache_write_tokens: None,
    });
    assert_eq!(
        turn,
        Usage { input_tokens: Some(100), output_tokens: Some(7), cache_read_tokens: Some(40), ..Usage::default() }
    );
}

#[test]
fn everything_is_bounded() {
    let mut m = TurnMapper::new("p", None);
    let huge = "x".repeat(MAX_TEXT_BYTES / 2 + 1);
    let piece = |t: &str| {
        parse_event(
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": t}]}, "timestamp_ms": 1}),
        )
        .unwrap()
    };
    m.on_event(piece(&huge));
    let actions = m.on_event(piece(&huge));
    let [Action::Emit(BlockKind::Text(t))] = &actions[..] else { panic!("{actions:?}") };
    assert!(t.text.len() <= MAX_TEXT_BYTES + 20 && t.text.ends_with("[truncated]"), "{}", t.text.len());
    assert!(m.on_event(piece("more")).is_empty(), "nothing after the truncation note");

    let out = "é".repeat(MAX_TOOL_OUTPUT_BYTES);
    let line = json!({"type": "tool_call", "subtype": "completed", "call_id": "c".repeat(500), "tool_call": {"shellToolCall": {
            "args": {"command": "y".repeat(MAX_INPUT_BYTES * 2)}, "result": {"success": {"exitCode": 0, "stdout": out}}}}});
    let actions = m.on_event(parse_event(line).unwrap());
    let Action::Emit(BlockKind::ToolCall(call)) = &actions[1] else { panic!("{actions:?}") };
    assert!(call.input.to_string().len() < MAX_INPUT_BYTES + 200, "input bounded");
    assert!(call.title.as_ref().unwrap().chars().count() <= MAX_TITLE_CHARS + 1, "title bounded");
    assert!(call.id.as_str().len() <= "p-".len() + MAX_CALL_ID_CHARS, "id bounded");
    let Action::Emit(BlockKind::ToolResult(result)) = &actions[3] else { panic!("{actions:?}") };
    assert!(result.output.len() < MAX_TOOL_OUTPUT_BYTES + 100);
    assert_eq!(bounded("héllo", 2), "h\n… [truncated: 6 bytes in all]", "cut on a char boundary");

    let big = "z".repeat(MAX_DIFF_TEXT_BYTES + 1);
    let rendered = render_outcome(
        "write",
        &json!({"path": "big.txt", "fileText": big}),
        Some(&ToolOutcome::Success(json!({"path": "/w/big.txt"}))),
    );
    assert_eq!(
        rendered.diff,
        Some(("/w/big.txt".into(), DiffChange::Unified { patch: "--- /dev/null\n+++ b/w/big.txt\n".into() }))
    );
}

#[test]
fn outcomes_render() {
    let shell = |v: Value| render_outcome("shell", &json!({"command": "x"}), Some(&ToolOutcome::Success(v)));
    let cases = [
        (json!({"exitCode": 0, "stdout": "out\n", "stderr": "err\n"}), "out\nerr\n", false),
        (json!({"exitCode": 2, "stdout": "out", "stderr": "err"}), "out\nerr", true),
        (json!({"exitCode": 0, "stdout": "", "stderr": "warn"}), "warn", false),
        (json!({"exitCode": 0}), "", false),
        (json!({"interleavedOutput": "both"}), "both", false),
    ];
    for (v, output, is_error) in cases {
        let r = shell(v.clone());
        assert_eq!((r.output.as_str(), r.is_error), (output, is_error), "{v}");
    }
    let failed = render_outcome(
        "shell",
        &Value::Null,
        Some(&ToolOutcome::Failed { kind: "failure".into(), value: json!({"stdout": "", "stderr": "boom"}) }),
    );
    assert_eq!((failed.output.as_str(), failed.is_error), ("boom", true));
    let empty =
        render_outcome("x", &Value::Null, Some(&ToolOutcome::Failed { kind: "timeout".into(), value: json!({}) }));
    assert_eq!(empty.output, "{}");
    let blank =
        render_outcome("x", &Value::Null, Some(&ToolOutcome::Failed { kind: "timeout".into(), value: json!("") }));
    assert_eq!(blank.output, "the tool call ended with `timeout`");
    let nested = render_outcome(
        "x",
        &Value::Null,
        Some(&ToolOutcome::Failed { kind: "error".into(), value: json!({"error": {"message": "deep"}}) }),
    );
    assert_eq!(nested.output, "deep");
    let reason =
        render_outcome("read", &Value::Null, Some(&ToolOutcome::Rejected(json!({"reason": "denied by Read(.env*)"}))));
    assert_eq!((reason.output.as_str(), reason.is_error), ("rejected by cursor-agent: denied by Read(.env*)", true));
    assert_eq!(
        render_outcome("read", &Value::Null, None),
        Rendered { output: String::new(), is_error: false, diff: None }
    );
    let write_no_text = render_outcome("write", &json!({"path": "a"}), Some(&ToolOutcome::Success(json!({}))));
    assert_eq!((write_no_text.output.as_str(), write_no_text.diff), ("wrote a", None));
}

#[test]
fn titles() {
    let cases = [
        ("shell", json!({"command": "  \n cargo test\n--all"}), Some("cargo test")),
        ("read", json!({"path": "src/a.rs"}), Some("src/a.rs")),
        ("edit", json!({"targetFile": "b.rs"}), Some("b.rs")),
        ("glob", json!({"globPattern": "**/*.md"}), Some("**/*.md")),
        ("grep", json!({"pattern": "fn main"}), Some("fn main")),
        ("todo", json!({"todos": []}), None),
        ("shell", json!({}), None),
    ];
    for (name, args, want) in cases {
        assert_eq!(tool_title(name, &args).as_deref(), want, "{name} {args}");
    }
    assert_eq!(tool_title("shell", &json!({"command": "z".repeat(500)})).unwrap().chars().count(), MAX_TITLE_CHARS + 1);
}

#[test]
fn closing_ends_running_calls_with_status_error() {
    let mut mapper = TurnMapper::new("p", None);
    mapper.on_event(
            parse_event(json!({"type": "tool_call", "subtype": "started", "call_id": "c", "tool_call": {"shellToolCall": {"args": {"command": "sleep 9"}}}}))
                .unwrap(),
        );
    let closing = mapper.on_exit("gone", "agent_exited");
    let Action::Emit(BlockKind::ToolCall(call)) = &closing[0] else { panic!("{closing:?}") };
    assert_eq!(call.status, ToolStatus::Error);
}
