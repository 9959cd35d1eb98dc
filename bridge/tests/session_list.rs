//! The session list (docs/control-messages.md, "Session lists"): titles from the first
//! prompt, previews, activity order, rename, archive, delete, search, where a session
//! was started, and a start of a missing agent refused in one sentence with no session
//! left behind.

mod support;

use std::path::Path;
use std::time::Duration;

use terminull_bridge::daemon_client::{Client, ClientError};
use terminull_bridge::home::{Config, Home};
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::service::Service;
use terminull_bridge::session::SessionPolicy;
use terminull_protocol::blocks::BlockKind;
use terminull_protocol::control::{
    self as control, BridgeMessage, ControlMessage, ReplyErrorCode, ReplyResult, SessionListing, SessionRequest,
};
use terminull_protocol::ids::SessionId;
use terminull_protocol::session_list::SessionOrigin;

/// A home with the Python echo adapter (`echo-py`) and an agent whose CLI is missing
/// (`broken-not-installed`) as drop-ins.
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let ext = home.path().join("ext_adapters");
    std::fs::create_dir_all(&ext).unwrap();
    std::fs::copy(support::workspace().join("examples/ext_adapter_example.py"), ext.join("echo-py")).unwrap();
    let script = support::workspace().join("tests/fixtures/adapters/broken.py");
    let missing = ext.join("missing");
    std::fs::write(&missing, format!("#!/bin/sh\nexec python3 '{}' not-installed\n", script.display())).unwrap();
    std::fs::set_permissions(&missing, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let asker = ext.join("asker");
    std::fs::write(&asker, format!("#!/bin/sh\nexec python3 '{}' asks-permission\n", script.display())).unwrap();
    std::fs::set_permissions(&asker, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    home
}

async fn service(home: &Path) -> Service {
    let mut scan = ScanOptions::new(Home::at(home), Config::default());
    scan.exe_dir = Some(support::echo_only_exe_dir());
    scan.handshake_timeout = Duration::from_secs(10);
    let policy = SessionPolicy { handshake_timeout: Duration::from_secs(10), ..SessionPolicy::default() };
    Service::start(Home::at(home), Config::default(), scan, policy).await.unwrap()
}

async fn call(client: &mut Client, message: ControlMessage) -> Result<ReplyResult, ClientError> {
    let mut kept = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), client.call(message, &mut kept)).await.expect("a reply in 30 s")
}

async fn start(client: &mut Client, cwd: &Path) -> SessionId {
    let request = ControlMessage::SessionRequest(SessionRequest::new("echo-py", cwd.display().to_string()));
    let ReplyResult::SessionStarted { session_id } = call(client, request).await.unwrap() else { panic!() };
    session_id
}

/// Sends `text` and waits for its turn's end.
async fn turn(client: &mut Client, session: &SessionId, text: &str) {
    let message = ControlMessage::UserMessage(control::UserMessage {
        session_id: session.clone(),
        text: text.into(),
        attachments: Vec::new(),
    });
    let mut kept = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), client.call(message, &mut kept)).await.unwrap().unwrap();
    let ended = |m: &BridgeMessage| {
        matches!(m, BridgeMessage::Block { session_id, block, .. }
            if session_id == session && matches!(block.kind, BlockKind::SessionEnd(_)))
    };
    if kept.iter().any(ended) {
        return;
    }
    loop {
        let next = tokio::time::timeout(Duration::from_secs(20), client.next()).await.expect("the turn ends");
        match next {
            Some(m) if ended(&m) => return,
            Some(_) => {}
            None => panic!("the bridge closed the connection during a turn"),
        }
    }
}

async fn list(client: &mut Client) -> Vec<SessionListing> {
    let ReplyResult::Sessions { sessions } =
        call(client, ControlMessage::ListSessions(control::ListSessions {})).await.unwrap()
    else {
        panic!()
    };
    sessions
}

fn ids(listings: &[SessionListing]) -> Vec<&str> {
    listings.iter().map(|l| l.session_id.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_titled_previewed_ordered_by_activity_renamed_archived_searched_and_deleted() {
    let home = home();
    let service = service(home.path()).await;
    let mut client = Client::in_process(&service);
    let a = start(&mut client, home.path()).await;
    turn(&mut client, &a, "  fix the login bug\nsecond line").await;
    let b = start(&mut client, home.path()).await;
    turn(&mut client, &b, "write the release notes for 0.3").await;
    let c = start(&mut client, home.path()).await;

    let listed = list(&mut client).await;
    // The newest activity first: c was created after b's turn ended; then b, then a.
    assert_eq!(ids(&listed), [c.as_str(), b.as_str(), a.as_str()], "{listed:#?}");
    let of = |l: &[SessionListing], id: &SessionId| l.iter().find(|x| x.session_id == *id).unwrap().clone();
    let la = of(&listed, &a);
    assert_eq!(la.title.as_deref(), Some("fix the login bug"));
    assert_eq!(la.preview.as_deref(), Some("You said: fix the login bug second line"));
    assert_eq!(la.origin, Some(SessionOrigin::Terminal), "an in-process client is the terminal");
    assert!(!la.archived);
    assert!(la.last_activity.unwrap() > 1.7e9);
    assert_eq!(of(&listed, &c).title, None, "no prompt yet, no title");

    // A new message makes a the most recently active.
    turn(&mut client, &a, "and the logout one").await;
    assert_eq!(ids(&list(&mut client).await)[0], a.as_str());

    // Rename: kept across a bridge restart (meta.json).
    let rename = |id: &SessionId, title: &str| {
        ControlMessage::RenameSession(control::RenameSession { session_id: id.clone(), title: title.into() })
    };
    call(&mut client, rename(&b, "  Release\n notes ")).await.unwrap();
    let refused = call(&mut client, rename(&b, "   ")).await.unwrap_err();
    assert!(
        matches!(&refused, ClientError::Refused { code: ReplyErrorCode::InvalidMessage, message } if message.contains("title")),
        "{refused:?}"
    );
    let too_long = call(&mut client, rename(&b, &"x".repeat(201))).await.unwrap_err();
    assert!(too_long.to_string().contains("201 characters; at most 200"), "{too_long}");
    let archive = |id: &SessionId, archived: bool| {
        ControlMessage::ArchiveSession(control::ArchiveSession { session_id: id.clone(), archived })
    };
    call(&mut client, archive(&c, true)).await.unwrap();

    // Search: titles, previews and the messages themselves, case-insensitive.
    let search = |q: &str| ControlMessage::SearchSessions(control::SearchSessions { query: q.into() });
    let ReplyResult::SessionMatches { matches } = call(&mut client, search("LOGOUT")).await.unwrap() else { panic!() };
    assert_eq!(matches.iter().map(|m| m.session_id.as_str()).collect::<Vec<_>>(), [a.as_str()], "{matches:?}");
    let ReplyResult::SessionMatches { matches } = call(&mut client, search("release")).await.unwrap() else { panic!() };
    assert_eq!(matches.iter().map(|m| m.session_id.as_str()).collect::<Vec<_>>(), [b.as_str()]);
    assert!(call(&mut client, search(" ")).await.is_err(), "an empty query is refused");

    service.shutdown().await;
    drop(client);
    let service = self::service(home.path()).await;
    let mut client = Client::in_process(&service);
    let listed = list(&mut client).await;
    assert_eq!(of(&listed, &b).title.as_deref(), Some("Release notes"));
    assert!(of(&listed, &c).archived);
    assert_eq!(of(&listed, &a).preview.as_deref(), Some("You said: and the logout one"));
    call(&mut client, archive(&c, false)).await.unwrap();
    assert!(!of(&list(&mut client).await, &c).archived);

    // Delete a live session: stopped, then its history removed.
    let resume = ControlMessage::SessionResume(control::SessionResume {
        session_id: b.clone(),
        since_seq: Some(0),
        since_ts: None,
        app_pubkey: String::new(),
    });
    let mut kept = Vec::new();
    client.call(resume, &mut kept).await.unwrap();
    if !kept.iter().any(|m| matches!(m, BridgeMessage::ReplayDone { .. })) {
        while !matches!(client.next().await, Some(BridgeMessage::ReplayDone { .. })) {}
    }
    turn(&mut client, &b, "one more").await;
    assert_eq!(of(&list(&mut client).await, &b).title.as_deref(), Some("Release notes"), "a rename sticks");
    let delete = |id: &SessionId| ControlMessage::DeleteSession(control::DeleteSession { session_id: id.clone() });
    call(&mut client, delete(&b)).await.unwrap();
    assert!(!home.path().join("sessions").join(b.as_str()).exists());
    assert_eq!(ids(&list(&mut client).await), [a.as_str(), c.as_str()]);
    let again = call(&mut client, delete(&b)).await.unwrap_err();
    assert!(matches!(again, ClientError::Refused { code: ReplyErrorCode::UnknownSession, .. }), "{again:?}");
    let resume = ControlMessage::SessionResume(control::SessionResume {
        session_id: b.clone(),
        since_seq: Some(0),
        since_ts: None,
        app_pubkey: String::new(),
    });
    assert!(call(&mut client, resume).await.is_err(), "a deleted session cannot be resumed");
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_agent_is_listed_with_its_install_hint_and_its_start_leaves_no_session() {
    let home = home();
    let service = service(home.path()).await;
    let mut client = Client::in_process(&service);
    let ReplyResult::Agents { agents } =
        call(&mut client, ControlMessage::ListAgents(control::ListAgents {})).await.unwrap()
    else {
        panic!()
    };
    let missing = agents.iter().find(|a| a.agent_id.as_str() == "broken-not-installed").unwrap();
    assert!(!missing.installed);
    assert!(missing.install_hint.as_deref().unwrap().contains("terminull agents"), "{missing:?}");
    let echo = agents.iter().find(|a| a.agent_id.as_str() == "echo-py").unwrap();
    assert!(echo.installed && echo.install_hint.is_none());

    let request =
        ControlMessage::SessionRequest(SessionRequest::new("broken-not-installed", home.path().display().to_string()));
    let refused = call(&mut client, request).await.unwrap_err();
    let ClientError::Refused { code, message } = &refused else { panic!("{refused:?}") };
    assert_eq!(*code, ReplyErrorCode::AgentFailed);
    assert_eq!(
        message,
        "Broken fixture (not-installed) (broken-not-installed) is not installed on this computer: install it with \
         its vendor's installer (docs/agents.md), then check with `terminull agents`."
    );
    assert!(list(&mut client).await.is_empty(), "no session is left behind");
    let dirs = std::fs::read_dir(home.path().join("sessions")).unwrap().count();
    assert_eq!(dirs, 0, "no history is left behind");
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_that_fails_to_start_leaves_no_session() {
    // Declared installed, but its process fails when the session starts: the history
    // made for it is removed.
    let home = home();
    let ext = home.path().join("ext_adapters");
    let service = service(home.path()).await;
    let mut client = Client::in_process(&service);
    // Registered while it worked; from now on its process exits at once.
    std::fs::write(ext.join("echo-py"), "#!/bin/sh\nexit 3\n").unwrap();
    let request = ControlMessage::SessionRequest(SessionRequest::new("echo-py", home.path().display().to_string()));
    let refused = call(&mut client, request).await.unwrap_err();
    assert!(matches!(refused, ClientError::Refused { code: ReplyErrorCode::AgentFailed, .. }), "{refused:?}");
    assert!(list(&mut client).await.is_empty(), "no empty detached session");
    assert_eq!(std::fs::read_dir(home.path().join("sessions")).unwrap().count(), 0);
    service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_waiting_for_a_permission_is_listed_with_attention_until_answered() {
    let home = home();
    let service = service(home.path()).await;
    let mut client = Client::in_process(&service);
    let request = ControlMessage::SessionRequest(SessionRequest::new(
        "broken-asks-permission",
        home.path().display().to_string(),
    ));
    let ReplyResult::SessionStarted { session_id } = call(&mut client, request).await.unwrap() else { panic!() };
    let message = ControlMessage::UserMessage(control::UserMessage {
        session_id: session_id.clone(),
        text: "write it".into(),
        attachments: Vec::new(),
    });
    call(&mut client, message).await.unwrap();
    let request_id = loop {
        let next = tokio::time::timeout(Duration::from_secs(20), client.next()).await.expect("a permission request");
        if let Some(BridgeMessage::Block { block, .. }) = next
            && let BlockKind::PermissionRequest(p) = block.kind
        {
            break p.request_id;
        }
    };
    let listed = list(&mut client).await;
    assert_eq!(listed[0].attention, Some(terminull_protocol::session_list::Attention::Permission), "{listed:#?}");
    let answer = ControlMessage::PermissionResponse(control::PermissionResponse {
        session_id: session_id.clone(),
        request_id,
        option_id: "allow".into(),
    });
    call(&mut client, answer).await.unwrap();
    assert_eq!(list(&mut client).await[0].attention, None);
    service.shutdown().await;
}
