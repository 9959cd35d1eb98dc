//! How a failed command reports: one plain sentence on stderr (what failed, and what
//! to do when there is something to do), never a backtrace; `-v` adds every cause and
//! the error's details.

use std::io::Write;

use terminull_bridge::chat::ChatError;
use terminull_bridge::daemon_client::ClientError;
use terminull_protocol::control::ReplyErrorCode;

/// Prints `error` for a person.
pub(crate) fn report(error: &anyhow::Error, verbose: bool) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "terminull: {}", sentence(error));
    if verbose {
        for (i, cause) in error.chain().enumerate() {
            let _ = writeln!(stderr, "  {i}: {cause}");
            if let Some(ClientError::Refused { code, .. }) = client_error(cause) {
                let _ = writeln!(stderr, "     the bridge's error code: {code:?}");
            }
        }
        let _ = writeln!(stderr, "details: {error:?}");
    }
}

/// The error's causes as one sentence, with the fix when one is known.
pub(crate) fn sentence(error: &anyhow::Error) -> String {
    let mut text = format!("{error:#}");
    let fix = error.chain().find_map(|cause| match client_error(cause) {
        Some(ClientError::Refused { code: ReplyErrorCode::UnknownAgent, .. }) => {
            Some("run `terminull agents` to see the agents this bridge can run")
        }
        Some(ClientError::Refused { code: ReplyErrorCode::UnknownSession, .. }) => {
            Some("run `terminull sessions` to see the sessions")
        }
        Some(ClientError::Closed) => Some("check that the bridge (`terminull up`) still runs"),
        _ => None,
    });
    if let Some(fix) = fix {
        text = format!("{}; {fix}", text.trim_end_matches('.'));
    }
    if !text.ends_with(['.', '?', '!']) {
        text.push('.');
    }
    text
}

fn client_error<'a>(cause: &'a (dyn std::error::Error + 'static)) -> Option<&'a ClientError> {
    match cause.downcast_ref::<ChatError>() {
        Some(ChatError::Client(e)) => Some(e),
        _ => cause.downcast_ref::<ClientError>(),
    }
}
