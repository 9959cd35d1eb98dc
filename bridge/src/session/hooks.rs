//! Class-level handoff hook calls: each runs on its own short-lived adapter process
//! (never the session's, which may not exist while a terminal owns the conversation),
//! and asks who owns the session's directory.

use terminull_protocol::adapter::{self as proto, AdapterRequest, HandoffHook};

use terminull_rpc::CallError;

use super::actor::Actor;
use crate::host::{HostError, HostedAdapter, launch};

/// Why a class-level hook call gave no answer; both name the adapter, as the logs and
/// the `agent_failed` reply show them.
#[derive(Debug, thiserror::Error)]
pub(super) enum HookError {
    /// The short-lived adapter process could not be brought up.
    #[error("{adapter}: {source}")]
    Launch {
        /// The adapter, as [`Actor::label`] names it.
        adapter: String,
        /// Why.
        source: HostError,
    },
    /// The adapter answered the hook with an error, or not in time.
    #[error("{adapter}: {method}: {source}")]
    Call {
        /// The adapter, as [`Actor::label`] names it.
        adapter: String,
        /// The hook's method.
        method: &'static str,
        /// Why.
        source: CallError,
    },
}

impl Actor {
    pub(super) fn has_hook(&self, hook: HandoffHook) -> bool {
        self.spec.hooks.contains(&hook)
    }

    /// A short-lived adapter process for class-level hook calls.
    pub(super) async fn hook_process(&self) -> Result<HostedAdapter, HookError> {
        launch(self.spec.command.clone(), self.spec.policy.handshake_timeout)
            .await
            .map_err(|source| HookError::Launch { adapter: self.label(), source })
    }

    /// One class-level hook call on its own short-lived adapter process.
    pub(super) async fn hook<M: AdapterRequest>(&self, params: &M::Params) -> Result<M::Result, HookError> {
        let mut adapter = self.hook_process().await?;
        let result = self.hook_on::<M>(&adapter, params).await;
        adapter.shutdown().await;
        result
    }

    pub(super) async fn hook_on<M: AdapterRequest>(
        &self,
        adapter: &HostedAdapter,
        params: &M::Params,
    ) -> Result<M::Result, HookError> {
        adapter.call::<M>(params).await.map_err(|source| HookError::Call {
            adapter: self.label(),
            method: M::METHOD,
            source,
        })
    }

    /// `Some(pid)` when a native agent process (not terminull's) drives the session's
    /// directory now. An adapter without the hook, or a failing hook, owns nothing
    /// (logged): the guard cannot know better than the adapter.
    pub(super) async fn terminal_owner(&self) -> Option<Option<u32>> {
        if !self.has_hook(HandoffHook::IsCwdExternallyOwned) {
            return None;
        }
        let owner = match self.hook_process().await {
            Ok(mut adapter) => {
                let owner = self.terminal_owner_on(&adapter).await;
                adapter.shutdown().await;
                owner
            }
            Err(e) => Err(e),
        };
        owner.unwrap_or_else(|e| {
            tracing::warn!(session = %self.spec.meta.session_id, "is_cwd_externally_owned failed: {e}");
            None
        })
    }

    /// `Ok(Some(pid))` owned, `Ok(None)` not owned (or no hook), `Err` unknown.
    pub(super) async fn terminal_owner_on(&self, adapter: &HostedAdapter) -> Result<Option<Option<u32>>, HookError> {
        if !self.has_hook(HandoffHook::IsCwdExternallyOwned) {
            return Ok(None);
        }
        let params = proto::IsCwdExternallyOwnedParams {
            cwd: self.spec.meta.cwd.clone(),
            agent_session_id: self.spec.meta.agent_session_id.clone(),
        };
        let r = self.hook_on::<proto::IsCwdExternallyOwned>(adapter, &params).await?;
        Ok(r.owned.then_some(r.pid))
    }
}
