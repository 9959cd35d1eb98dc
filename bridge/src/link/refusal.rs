//! The answers to control messages a link refuses before dispatching them
//! (docs/control-messages.md#refused): a `refused` reply with a reason code, sealed
//! under the link like every reply, so only the device reads it and the relay cannot
//! forge one; and the check that binds a control to the envelope's `session_id`.

use std::time::{Duration, Instant};

use terminull_protocol::control::{BridgeMessage, RefusalReason, Reply, ReplyErrorCode};
use terminull_protocol::ids::SessionId;

use super::AppKey;
use crate::connection::{Inbound, Outbound, OutboundSender};

/// Refusal replies a link sends per [`WINDOW`]; past that one `rate_limited` reply,
/// then none until the window ends (a relay that floods a link with garbage gets no
/// more replies than a bound, and the link's queue is never waited on for them).
pub const REPLIES_PER_WINDOW: u32 = 64;
/// See [`REPLIES_PER_WINDOW`].
pub const WINDOW: Duration = Duration::from_secs(10);

/// Sends the answers to refused controls into the link's outbound queue.
#[derive(Debug)]
pub(super) struct Answer {
    out: OutboundSender<AppKey>,
    window_start: Instant,
    sent: u32,
}

impl Answer {
    pub(super) fn new(out: OutboundSender<AppKey>) -> Self {
        Self { out, window_start: Instant::now(), sent: 0 }
    }

    /// A `refused` reply (or `rate_limited`, or nothing, past the bound).
    pub(super) fn refused(&mut self, id: Option<String>, reason: RefusalReason, counter: Option<u64>, detail: &str) {
        let message = format!("the bridge refused this control message ({}): {detail}", reason.as_str());
        self.send(Reply::refused(id.clone(), reason, counter, message), id, counter);
    }

    /// An `invalid_message` error for a control that opened but cannot be dispatched.
    pub(super) fn error(&mut self, id: Option<String>, message: String) {
        self.send(Reply::error(id.clone(), ReplyErrorCode::InvalidMessage, message), id, None);
    }

    fn send(&mut self, reply: Reply, id: Option<String>, counter: Option<u64>) {
        if self.window_start.elapsed() >= WINDOW {
            self.window_start = Instant::now();
            self.sent = 0;
        }
        self.sent = self.sent.saturating_add(1);
        let reply = match self.sent {
            n if n <= REPLIES_PER_WINDOW => reply,
            n if n == REPLIES_PER_WINDOW + 1 => Reply::refused(
                id,
                RefusalReason::RateLimited,
                counter,
                format!(
                    "more than {REPLIES_PER_WINDOW} refusals in {} s: later ones get no reply until then",
                    WINDOW.as_secs()
                ),
            ),
            _ => return,
        };
        // Never waits: a full queue (a device that does not read) drops the answer.
        if self.out.try_send(Outbound::Message(BridgeMessage::Reply(reply))).is_err() {
            tracing::debug!("a refusal reply was not queued: the link's queue is full or closed");
        }
    }
}

/// Checks that the session a control message names is the envelope's `session_id`:
/// both the same, or both absent. The relay checks the resume token against the
/// envelope's, so a control that leaves it out while naming a session inside the
/// seal would drive that session without its token.
pub(super) fn same_session(inbound: &Inbound<AppKey>, envelope: Option<&SessionId>) -> Result<(), String> {
    let Inbound::Control { control, .. } = inbound else {
        // A malformed message is answered `invalid_message`; nothing runs.
        return Ok(());
    };
    let named = control.message.session_id();
    if named.as_ref() == envelope {
        return Ok(());
    }
    let say = |s: Option<&SessionId>| s.map_or_else(|| "none".to_owned(), |s| format!("`{s}`"));
    Err(format!(
        "the {} names session {} and its envelope {}",
        control.message.message_type(),
        say(named.as_ref()),
        say(envelope)
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::connection;

    fn inbound(value: serde_json::Value) -> Inbound<AppKey> {
        connection::parse(value).expect("a known type")
    }

    #[test]
    fn a_control_must_name_the_envelopes_session_or_neither_names_one() {
        let s = SessionId("s1".into());
        let interrupt = inbound(json!({"type": "interrupt", "session_id": "s1"}));
        assert!(same_session(&interrupt, Some(&s)).is_ok());
        let stripped = same_session(&interrupt, None).unwrap_err();
        assert_eq!(stripped, "the interrupt names session `s1` and its envelope none");
        assert!(same_session(&interrupt, Some(&SessionId("s2".into()))).is_err());
        let listing = inbound(json!({"type": "list_sessions"}));
        assert!(same_session(&listing, None).is_ok());
        assert!(same_session(&listing, Some(&s)).is_err());
    }

    #[tokio::test]
    async fn refusal_replies_are_bounded_per_window() {
        let (tx, mut rx) = crate::connection::OutboundQueue { max_messages: 1024, max_bytes: 1 << 20 }.open();
        let mut answer = Answer::new(tx);
        for _ in 0..(REPLIES_PER_WINDOW + 10) {
            answer.refused(None, RefusalReason::BadSeal, Some(3), "tampered");
        }
        let mut got = Vec::new();
        while let Some(Outbound::Message(BridgeMessage::Reply(r))) = rx.try_recv_queued().map(|q| q.into_message()) {
            got.push(r);
        }
        assert_eq!(got.len() as u32, REPLIES_PER_WINDOW + 1);
        let last = got.last().map(|r| r.outcome.clone());
        assert!(
            matches!(
                last,
                Some(terminull_protocol::control::ReplyOutcome::Refused {
                    reason: RefusalReason::RateLimited,
                    counter: Some(3),
                    ..
                })
            ),
            "{last:?}"
        );
    }
}
