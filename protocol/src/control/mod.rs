//! Control messages (app → bridge).
//!
//! One dispatcher in the bridge serves every transport (relay, LAN, local socket);
//! a message type is added here, in one place. Each message is a JSON object tagged
//! by `type`. An optional `id` chosen by the app correlates the bridge's reply.
//! [`parse`] tells an unknown `type` (to be ignored and logged, as the spec says)
//! apart from a known type with bad fields (to be answered with an error).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod reply;

pub use reply::*;

use crate::blocks::{Attachment, json_type_name, missing_field_name, strip_position};
use crate::ids::{AgentId, AgentSessionId, PermissionRequestId, SessionId};

/// A control message with its optional correlation id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Control {
    /// Chosen by the app; the bridge's reply carries the same `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The `type` tag and the message's fields.
    #[serde(flatten)]
    pub message: ControlMessage,
}

macro_rules! control_messages {
    ($( $(#[$doc:meta])* $tag:literal => $variant:ident { $($(#[$fattr:meta])* $field:ident : $fty:ty),* $(,)? }, )*) => {
        /// Every app → bridge message, tagged by `type`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[cfg_attr(test, derive(proptest_derive::Arbitrary))]
        #[serde(tag = "type")]
        pub enum ControlMessage {
            $( $(#[$doc])* #[serde(rename = $tag)] $variant($variant), )*
        }

        $(
            $(#[$doc])*
            #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
            #[cfg_attr(test, derive(proptest_derive::Arbitrary))]
            pub struct $variant { $( $(#[$fattr])* pub $field: $fty ),* }
        )*

        /// Every control `type` this protocol version defines.
        pub const CONTROL_TYPES: &[&str] = &[$($tag),*];

        impl ControlMessage {
            /// The session the message is about, when it names one (routing on the relay).
            pub fn session_id(&self) -> Option<SessionId> {
                let value = serde_json::to_value(self).ok()?;
                value.get("session_id")?.as_str().map(|s| SessionId(s.to_owned()))
            }

            /// The wire value of `type`.
            pub fn message_type(&self) -> &'static str {
                match self { $(Self::$variant(_) => $tag,)* }
            }

            /// Decodes the fields of a message whose `type` is `tag`; `None` for an unknown tag.
            fn decode_body(tag: &str, body: Value) -> Option<Result<Self, serde_path_to_error::Error<serde_json::Error>>> {
                match tag {
                    $( $tag => Some(serde_path_to_error::deserialize(body).map(Self::$variant)), )*
                    _ => None,
                }
            }
        }
    };
}

control_messages! {
    /// Start a new session.
    "session_request" => SessionRequest {
        /// Which agent (`claude`, `codex`, …).
        agent: AgentId,
        /// Working directory on the bridge's machine.
        cwd: String,
        /// Model, when the user picked one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// Reasoning effort, when the user picked one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<String>,
        /// Permission mode (agent-specific: `acceptEdits`, `read-only`, …), when the user picked one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        permission_mode: Option<String>,
        /// The app's X25519 public key for this session, base64url without padding.
        app_pubkey: String,
    },
    /// Reconnect to a session and receive what was missed.
    "session_resume" => SessionResume {
        /// The session.
        session_id: SessionId,
        /// Resend every block with a greater `seq` (exact; preferred).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since_seq: Option<u64>,
        /// Resend every block newer than this Unix time (the spec's `since_ts`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(test, proptest(strategy = "proptest::option::of(crate::arb::timestamp())"))]
        since_ts: Option<f64>,
        /// The app's X25519 public key, so the bridge can re-derive keys after a restart.
        app_pubkey: String,
    },
    /// A message for the agent.
    "user_message" => UserMessage {
        /// The session.
        session_id: SessionId,
        /// The text.
        text: String,
        /// Attached files.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Attachment>,
    },
    /// Stop the running turn.
    "interrupt" => Interrupt {
        /// The session.
        session_id: SessionId,
    },
    /// Answer a permission request.
    "permission_response" => PermissionResponse {
        /// The session.
        session_id: SessionId,
        /// The request answered.
        request_id: PermissionRequestId,
        /// The chosen option's id.
        option_id: String,
    },
    /// End a session.
    "stop_session" => StopSession {
        /// The session.
        session_id: SessionId,
    },
    /// Change a session's model and/or permission mode between turns, where its agent
    /// allows (its adapter takes the `model` / `permission_mode` init param and, once
    /// the conversation has an agent session id, `resume_session_id`): the bridge
    /// restarts the adapter with the new values resuming the same conversation; a new
    /// `agent_info` block follows. An empty string returns to the agent's default.
    "set_session_options" => SetSessionOptions {
        /// The session.
        session_id: SessionId,
        /// The model to use from the next turn on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The permission mode to use from the next turn on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        permission_mode: Option<String>,
    },
    /// List the bridge's sessions.
    "list_sessions" => ListSessions {},
    /// List the installed agents.
    "list_agents" => ListAgents {},
    /// List an agent's models (when it `provides_models`).
    "list_models" => ListModels {
        /// The agent.
        agent: AgentId,
    },
    /// Cost and token usage of a session (when its agent `provides_usage`).
    "get_usage" => GetUsage {
        /// The session.
        session_id: SessionId,
    },
    /// Run a slash command in a session (`/status`, or one of the agent's).
    "slash_command" => SlashCommand {
        /// The session.
        session_id: SessionId,
        /// The command without its slash.
        command: String,
        /// The rest of the line.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        args: String,
    },
    /// List sessions the agents' CLIs started outside the bridge.
    "scan_external_sessions" => ScanExternalSessions {
        /// Only this agent, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<AgentId>,
        /// Only this directory, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
    },
    /// Bind a new terminull session to an external CLI session.
    "attach_external" => AttachExternal {
        /// The agent.
        agent: AgentId,
        /// The agent's own session id.
        agent_session_id: AgentSessionId,
        /// Its directory.
        cwd: String,
        /// The app's X25519 public key for this session.
        app_pubkey: String,
        /// `true`: when the terminal lets go, terminull resumes exactly
        /// `agent_session_id`, never the directory's newest conversation. By default
        /// (`false`) it follows the lineage head (`latest_sid_for_cwd`), since a
        /// terminal's resume may have minted a new id.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pin: bool,
    },
    /// Release an idle session so the terminal can take it over; the bridge answers
    /// with the command to run there.
    "continue_in_terminal" => ContinueInTerminal {
        /// The session.
        session_id: SessionId,
    },
    /// Which events this device wants as a push notification (Web Push or a `push`
    /// frame): the bridge sends a device only the kinds listed here. Sent by the app
    /// when its notifications switch or an event switch changes, and again on every new
    /// link (the bridge keeps the choice in memory only). A device that never sent one
    /// gets every kind. Only a paired device may send it (the local socket is answered
    /// `not_supported`).
    "push_settings" => PushSettings {
        /// The kinds wanted (`permission_needed`, `question`, `turn_finished`,
        /// `error`); empty: notifications off for this device.
        kinds: Vec<crate::push::PushKind>,
    },
    /// Which sessions this device shows on a visible screen now (Page Visibility):
    /// while any device reports a session visible, the bridge sends no push about it.
    /// Each report replaces the device's previous one and lapses after
    /// [`PRESENCE_TTL_SECS`] unless repeated, and when the device's link ends, so a
    /// vanished device does not silence notifications for long. Only a paired device
    /// may send it.
    "presence" => Presence {
        /// The sessions shown on a visible screen; empty when hidden or on a list.
        visible_session_ids: Vec<SessionId>,
    },
    /// Browse, read or write the files of a session's directory
    /// (docs/files-and-git.md): the `op` and its fields sit beside `session_id`.
    "files" => Files {
        /// The session whose directory is browsed.
        session_id: SessionId,
        /// What is asked, tagged by `op`.
        #[serde(flatten)]
        request: crate::files::FilesRequest,
    },
    /// Git in the repository holding a session's directory (docs/files-and-git.md):
    /// the `op` and its fields sit beside `session_id`.
    "git" => Git {
        /// The session whose repository is used.
        session_id: SessionId,
        /// What is asked, tagged by `op`.
        #[serde(flatten)]
        request: crate::git::GitRequest,
    },
    // Session lists (docs/control-messages.md, "Session lists").
    /// Give a session a title of the user's choosing, shown in every list from then on
    /// (the agent's own titles no longer replace it).
    "rename_session" => RenameSession {
        /// The session.
        session_id: SessionId,
        /// The new title, 1–[`crate::session_list::MAX_TITLE_CHARS`] characters once
        /// trimmed; whitespace runs become one space.
        title: String,
    },
    /// Archive a session (lists show it under "Archived" only) or bring it back.
    /// Archiving changes nothing else: the session can still be opened and resumed.
    "archive_session" => ArchiveSession {
        /// The session.
        session_id: SessionId,
        /// `true` to archive, `false` to unarchive.
        archived: bool,
    },
    /// Delete a session for good: it is stopped first (its adapter ended), then its
    /// history is removed from the bridge's disk.
    "delete_session" => DeleteSession {
        /// The session.
        session_id: SessionId,
    },
    /// Find sessions whose title or messages contain `query` (case-insensitive). The
    /// bridge reads at most the newest 256 KiB of each of the 200 newest sessions and
    /// answers at most [`crate::session_list::MAX_SEARCH_RESULTS`] matches.
    "search_sessions" => SearchSessions {
        /// What to look for, 1–[`crate::session_list::MAX_QUERY_CHARS`] characters.
        query: String,
    },
    // Terminals (docs/terminals.md; the types they carry are in crate::terminal).
    /// Open a terminal: the user's login shell in a pseudo-terminal, in `cwd`, the
    /// directory of `session_id`, or the bridge user's home directory. The reply
    /// (`terminal`) names it; its output follows, like a session's blocks.
    "terminal_open" => TerminalOpen {
        /// Start in this directory.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// Start in this session's directory (when `cwd` is absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<SessionId>,
        /// Columns of the window (1 to 1000).
        cols: u16,
        /// Rows of the window (1 to 1000).
        rows: u16,
        /// The app's X25519 public key for this terminal's output (a device's link;
        /// empty on the local socket).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        app_pubkey: String,
    },
    /// Follow an open terminal (again): its scrollback after `since_seq` is replayed,
    /// then live output.
    "terminal_attach" => TerminalAttach {
        /// The terminal.
        terminal_id: crate::terminal::TerminalId,
        /// Replay the output chunks after this `seq` still in the scrollback (absent: all).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since_seq: Option<u64>,
        /// As in `terminal_open`.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        app_pubkey: String,
    },
    /// Keystrokes (any bytes) for a terminal.
    "terminal_input" => TerminalInput {
        /// The terminal.
        terminal_id: crate::terminal::TerminalId,
        /// The bytes, base64 (standard, padded), at most 64 KiB decoded.
        data: String,
    },
    /// The terminal's window changed size.
    "terminal_resize" => TerminalResize {
        /// The terminal.
        terminal_id: crate::terminal::TerminalId,
        /// Columns (1 to 1000).
        cols: u16,
        /// Rows (1 to 1000).
        rows: u16,
    },
    /// End a terminal: its whole process group is killed; every follower gets `terminal_exit`.
    "terminal_close" => TerminalClose {
        /// The terminal.
        terminal_id: crate::terminal::TerminalId,
    },
    /// List the open terminals.
    "list_terminals" => ListTerminals {},
    // The LAN fast path (crate::rtc, docs/web-client.md).
    /// Offer a WebRTC data channel to the bridge on the local network: the answer
    /// (`rtc_answer`) carries the bridge's DTLS fingerprint and its current LAN
    /// candidates. Only a paired device's link may send it.
    "rtc_offer" => RtcOffer {
        /// The page's SDP offer: one data channel, host candidates on local addresses
        /// only, at most [`crate::rtc::MAX_SDP_BYTES`] bytes.
        sdp: String,
    },
}

/// Seconds a `presence` report counts for unless repeated (the app repeats it every
/// 30 s while visible).
pub const PRESENCE_TTL_SECS: u64 = 90;

impl SessionRequest {
    /// A request for `agent` in `cwd` that leaves model, effort and permission mode to
    /// the agent's defaults and carries no app key (what a client on the bridge's own
    /// machine sends); set the other fields with struct update syntax.
    pub fn new(agent: impl Into<AgentId>, cwd: impl Into<String>) -> Self {
        SessionRequest {
            agent: agent.into(),
            cwd: cwd.into(),
            model: None,
            effort: None,
            permission_mode: None,
            app_pubkey: String::new(),
        }
    }
}

/// Why a JSON value is not a control message this bridge can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// Not a JSON object.
    #[error("a control message must be a JSON object, found {found}")]
    NotAnObject {
        /// The JSON type found instead.
        found: &'static str,
    },
    /// `type` is missing or not a string.
    #[error("a control message needs a string `type`")]
    MissingType,
    /// A `type` this version does not define: ignore and log it.
    #[error("unknown control message type `{message_type}`")]
    UnknownType {
        /// The unknown type.
        message_type: String,
    },
    /// A known type with a missing or malformed field: answer with this error.
    #[error("control message `{message_type}`: field `{field}`: {problem}")]
    InvalidField {
        /// The message's type.
        message_type: String,
        /// The field at fault.
        field: String,
        /// What is wrong.
        problem: String,
    },
}

/// Decodes one control message; an error names the field at fault.
pub fn parse(value: Value) -> Result<Control, ControlError> {
    let Value::Object(mut map) = value else {
        return Err(ControlError::NotAnObject { found: json_type_name(&value) });
    };
    let Some(Value::String(message_type)) = map.remove("type") else {
        return Err(ControlError::MissingType);
    };
    let invalid = |field: String, problem: String| ControlError::InvalidField {
        message_type: message_type.clone(),
        field,
        problem,
    };
    let id = match map.remove("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id),
        Some(other) => {
            return Err(invalid("id".into(), format!("expected a string, found {}", json_type_name(&other))));
        }
    };
    match ControlMessage::decode_body(&message_type, Value::Object(map)) {
        None => Err(ControlError::UnknownType { message_type }),
        Some(Ok(message)) => Ok(Control { id, message }),
        Some(Err(e)) => {
            let path = e.path().to_string();
            let problem = strip_position(&e.inner().to_string());
            Err(match missing_field_name(&problem) {
                Some(name) if path == "." => invalid(name.to_owned(), "missing".into()),
                Some(name) => invalid(format!("{path}.{name}"), "missing".into()),
                None => invalid(path, problem),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_type_is_distinguished_from_a_bad_known_type() {
        assert_eq!(
            parse(json!({"type": "teleport"})),
            Err(ControlError::UnknownType { message_type: "teleport".into() })
        );
        assert_eq!(
            parse(json!({"type": "interrupt"})),
            Err(ControlError::InvalidField {
                message_type: "interrupt".into(),
                field: "session_id".into(),
                problem: "missing".into()
            })
        );
        assert_eq!(parse(json!({"session_id": "s"})), Err(ControlError::MissingType));
        assert_eq!(parse(json!(null)), Err(ControlError::NotAnObject { found: "null" }));
    }

    #[test]
    fn wrongly_typed_fields_are_named() {
        let cases = [
            (json!({"type": "interrupt", "session_id": 5}), "session_id"),
            (json!({"type": "list_agents", "id": 5}), "id"),
            (
                json!({"type": "user_message", "session_id": "s", "text": "hi", "attachments": [{"name": "a"}]}),
                "attachments[0].mime_type",
            ),
            (json!({"type": "session_resume", "session_id": "s", "app_pubkey": "k", "since_seq": "7"}), "since_seq"),
        ];
        for (input, field) in cases {
            match parse(input.clone()) {
                Err(ControlError::InvalidField { field: got, .. }) => assert_eq!(got, field, "{input}"),
                other => panic!("{input}: expected an error naming {field}, got {other:?}"),
            }
        }
    }

    #[test]
    fn correlation_id_travels_with_the_message() {
        let c = parse(json!({"type": "list_agents", "id": "q1"})).unwrap();
        assert_eq!(c.id.as_deref(), Some("q1"));
        assert_eq!(c.message, ControlMessage::ListAgents(ListAgents {}));
        assert_eq!(serde_json::to_value(&c).unwrap(), json!({"id": "q1", "type": "list_agents"}));
    }

    #[test]
    fn control_types_list_matches_the_enum() {
        let schema = serde_json::to_string(&schemars::schema_for!(Control)).unwrap();
        for t in CONTROL_TYPES {
            assert!(schema.contains(&format!("\"const\":\"{t}\"")), "{t}");
        }
        for handoff in ["scan_external_sessions", "attach_external", "continue_in_terminal"] {
            assert!(CONTROL_TYPES.contains(&handoff));
        }
    }
}
