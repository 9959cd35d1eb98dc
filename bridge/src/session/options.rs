//! `set_session_options`: a session's model and permission mode changed between turns.
//! The adapter takes both only at `start`, so the bridge restarts it with the new
//! values, resuming the same agent conversation; agents whose adapter cannot take the
//! value, or cannot resume, are refused (docs/control-messages.md#set_session_options).

use terminull_protocol::adapter::InitParam;
use terminull_protocol::control::{ReplyError, ReplyErrorCode, SessionState};

use super::actor::Actor;
use super::handle::SessionOptions;

/// The longest model or permission mode taken.
const MAX_VALUE_CHARS: usize = 200;

fn refused(code: ReplyErrorCode, message: String) -> ReplyError {
    ReplyError { code, message }
}

/// `Some("")` → `None` (the default); otherwise the value, trimmed.
fn chosen(value: &str) -> Option<String> {
    let v = value.trim();
    (!v.is_empty()).then(|| v.to_owned())
}

impl Actor {
    pub(super) async fn set_options(&mut self, options: SessionOptions) -> Result<(), ReplyError> {
        let agent = self.spec.meta.agent_id.to_string();
        if options.model.is_none() && options.permission_mode.is_none() {
            return Err(refused(
                ReplyErrorCode::InvalidMessage,
                "set_session_options: give `model`, `permission_mode` or both".into(),
            ));
        }
        for (what, v) in [("model", &options.model), ("permission_mode", &options.permission_mode)] {
            if v.as_ref().is_some_and(|v| v.chars().count() > MAX_VALUE_CHARS) {
                return Err(refused(
                    ReplyErrorCode::InvalidMessage,
                    format!("set_session_options: `{what}` is over {MAX_VALUE_CHARS} characters"),
                ));
            }
        }
        if self.turn.is_some() || matches!(self.state, SessionState::Running | SessionState::AwaitingPermission) {
            return Err(refused(
                ReplyErrorCode::Busy,
                "a turn is running; change the model or permission mode once it ends".into(),
            ));
        }
        if self.pending.parked.is_some() {
            return Err(refused(
                ReplyErrorCode::Busy,
                "a terminal drives this session; change it there or once it is back".into(),
            ));
        }
        // The declaration says what the adapter takes: start it when none runs.
        self.ensure_adapter().await?;
        let Some(d) = self.declaration.as_ref() else {
            return Err(refused(ReplyErrorCode::AgentFailed, "the adapter is not running".into()));
        };
        let takes = |p| d.accepted_init_params.contains(&p);
        if options.model.is_some() && !takes(InitParam::Model) {
            return Err(refused(
                ReplyErrorCode::NotSupported,
                format!("{agent} cannot choose a model (its adapter takes no `model`)"),
            ));
        }
        if options.permission_mode.is_some() && !takes(InitParam::PermissionMode) {
            return Err(refused(
                ReplyErrorCode::NotSupported,
                format!("{agent} cannot choose a permission mode (its adapter takes no `permission_mode`)"),
            ));
        }
        if self.spec.meta.agent_session_id.is_some() && !takes(InitParam::ResumeSessionId) {
            return Err(refused(
                ReplyErrorCode::NotSupported,
                format!(
                    "{agent} cannot resume its conversation, so its model and permission mode are fixed once it has begun"
                ),
            ));
        }
        let before = (self.spec.meta.model.clone(), self.spec.meta.permission_mode.clone());
        if let Some(m) = &options.model {
            self.spec.meta.model = chosen(m);
        }
        if let Some(p) = &options.permission_mode {
            self.spec.meta.permission_mode = chosen(p);
        }
        self.shutdown_adapter(true).await;
        match self.ensure_adapter().await {
            Ok(()) => {
                self.save_meta();
                Ok(())
            }
            Err(e) => {
                // Refused by the agent (an unknown model, say): back to what ran before.
                (self.spec.meta.model, self.spec.meta.permission_mode) = before;
                if let Err(again) = self.ensure_adapter().await {
                    tracing::warn!("{}: restarting with the previous options failed: {}", self.label(), again.message);
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::chosen;

    #[test]
    fn an_empty_value_means_the_agents_default() {
        assert_eq!(chosen(""), None);
        assert_eq!(chosen("  "), None);
        assert_eq!(chosen(" plan "), Some("plan".into()));
    }
}
