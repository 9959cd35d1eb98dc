//! Hostile input to the session-list controls: a title or a search query of a
//! megabyte is refused with a clear error naming the field and the bound, and nothing
//! is stored.

mod support;

use std::time::{Duration, Instant};

use terminull_bridge::daemon_client::{Client, ClientError};
use terminull_bridge::home::{Config, Home};
use terminull_bridge::registry::ScanOptions;
use terminull_bridge::service::Service;
use terminull_bridge::session::SessionPolicy;
use terminull_protocol::control::{self as control, ControlMessage, ReplyErrorCode, ReplyResult, SessionRequest};

async fn bridge() -> (tempfile::TempDir, Service) {
    let home = tempfile::tempdir().unwrap();
    let mut scan = ScanOptions::new(Home::at(home.path()), Config::default());
    scan.exe_dir = Some(support::echo_only_exe_dir());
    let policy = SessionPolicy { handshake_timeout: Duration::from_secs(10), ..SessionPolicy::default() };
    let service = Service::start(Home::at(home.path()), Config::default(), scan, policy).await.unwrap();
    (home, service)
}

#[allow(clippy::print_stderr, reason = "the attack table is printed for `cargo test -- --nocapture attack_`")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_megabyte_title_and_query_are_refused_and_nothing_is_stored() {
    let (home, service) = bridge().await;
    let mut client = Client::in_process(&service);
    let mut kept = Vec::new();
    let request = ControlMessage::SessionRequest(SessionRequest::new("echo", home.path().display().to_string()));
    let ReplyResult::SessionStarted { session_id } = client.call(request, &mut kept).await.unwrap() else { panic!() };
    let huge = "x".repeat(1 << 20);
    let started = Instant::now();
    let rename =
        ControlMessage::RenameSession(control::RenameSession { session_id: session_id.clone(), title: huge.clone() });
    let refused = client.call(rename, &mut kept).await.unwrap_err();
    let ClientError::Refused { code, message } = &refused else { panic!("{refused:?}") };
    assert_eq!(*code, ReplyErrorCode::InvalidMessage);
    assert!(message.contains("title: 1048576 characters; at most 200"), "{message}");
    let meta =
        std::fs::read_to_string(home.path().join("sessions").join(session_id.as_str()).join("meta.json")).unwrap();
    assert!(meta.len() < 4096, "the title was not stored: meta.json is {} bytes", meta.len());
    let search = ControlMessage::SearchSessions(control::SearchSessions { query: huge });
    let refused = client.call(search, &mut kept).await.unwrap_err();
    assert!(refused.to_string().contains("query: 1048576 characters; 1 to 200 wanted"), "{refused}");
    eprintln!(
        "attack: megabyte title and search query: both refused (invalid_message), meta.json {} bytes, {} ms",
        meta.len(),
        started.elapsed().as_millis()
    );
    service.shutdown().await;
}
