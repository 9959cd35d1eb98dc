//! Control messages the service answers by asking an agent's adapter outside any
//! session: the conversations a terminal started (`scan_external_sessions`), the
//! models an agent offers, and slash commands.

use super::*;

impl Service {
    pub(super) async fn hooks_of(&self, agent_id: &str) -> Result<Vec<HandoffHook>, ReplyError> {
        self.agents_ready(Some(agent_id)).await;
        let registry = self.read_registry();
        let agent = registry
            .get(agent_id)
            .ok_or_else(|| error(ReplyErrorCode::UnknownAgent, format!("agent `{agent_id}` is not registered")))?;
        Ok(agent.declaration.handoff_hooks.clone())
    }

    /// `scan_external_sessions` of one agent, or of every agent with the hook.
    pub(super) async fn scan_external(
        &self,
        agent: Option<&str>,
        cwd: Option<String>,
    ) -> Result<Vec<control::ExternalSessionListing>, ReplyError> {
        self.agents_ready(agent).await;
        let targets: Vec<(terminull_protocol::ids::AgentId, crate::host::AdapterCommand)> = {
            let registry = self.read_registry();
            if let Some(agent) = agent {
                let a = registry
                    .get(agent)
                    .ok_or_else(|| error(ReplyErrorCode::UnknownAgent, format!("agent `{agent}` is not registered")))?;
                if !a.declaration.handoff_hooks.contains(&HandoffHook::ScanExternalSessions) {
                    return Err(error(
                        ReplyErrorCode::NotSupported,
                        format!("agent `{agent}` does not list its CLI's sessions"),
                    ));
                }
            }
            registry
                .agents
                .iter()
                .filter(|a| agent.is_none_or(|want| a.declaration.agent_id.as_str() == want))
                .filter(|a| a.declaration.handoff_hooks.contains(&HandoffHook::ScanExternalSessions))
                .map(|a| (a.declaration.agent_id.clone(), a.command.clone()))
                .collect()
        };
        let params = proto::ScanExternalSessionsParams { cwd, limit: Some(EXTERNAL_SCAN_LIMIT) };
        let scans = targets.into_iter().map(|(agent_id, command)| {
            let params = params.clone();
            let timeout = self.inner.policy.handshake_timeout;
            async move {
                let mut adapter = match launch(command, timeout).await {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!("scan_external_sessions: {agent_id}: {e}");
                        return Vec::new();
                    }
                };
                let result = adapter.call::<proto::ScanExternalSessions>(&params).await;
                adapter.shutdown().await;
                match result {
                    Ok(r) => r
                        .sessions
                        .into_iter()
                        .map(|session| control::ExternalSessionListing { agent_id: agent_id.clone(), session })
                        .collect(),
                    Err(e) => {
                        tracing::warn!("scan_external_sessions: {agent_id}: {e}");
                        Vec::new()
                    }
                }
            }
        });
        let mut all: Vec<_> = futures::future::join_all(scans).await.into_iter().flatten().collect();
        all.sort_by(|a, b| b.session.updated_at.total_cmp(&a.session.updated_at));
        Ok(all)
    }

    pub(super) async fn models(&self, agent_id: &str) -> Result<Vec<proto::ModelInfo>, ReplyError> {
        self.agents_ready(Some(agent_id)).await;
        let command = {
            let registry = self.read_registry();
            let agent = registry
                .get(agent_id)
                .ok_or_else(|| error(ReplyErrorCode::UnknownAgent, format!("agent `{agent_id}` is not registered")))?;
            if !agent.declaration.capabilities.provides_models {
                return Err(error(ReplyErrorCode::NotSupported, format!("agent `{agent_id}` does not list models")));
            }
            agent.command.clone()
        };
        // Class-level call: a short-lived process, as for detect.
        let mut adapter = launch(command, self.inner.policy.handshake_timeout)
            .await
            .map_err(|e| error(ReplyErrorCode::AgentFailed, e.to_string()))?;
        let result = adapter.call::<proto::ListModels>(&proto::Empty {}).await;
        adapter.shutdown().await;
        result.map(|r| r.models).map_err(|e| error(ReplyErrorCode::AgentFailed, e.to_string()))
    }

    pub(super) async fn slash(&self, m: control::SlashCommand) -> Result<ReplyResult, ReplyError> {
        let handle = self.session(&m.session_id).await?;
        let output = |text: String| Ok(ReplyResult::CommandOutput { text });
        if !is_universal(&m.command) {
            // The agent's own command: it travels as the message text.
            let text = if m.args.is_empty() { format!("/{}", m.command) } else { format!("/{} {}", m.command, m.args) };
            handle.user_message(UserMessage { text, attachments: Vec::new() }).await?;
            return Ok(ReplyResult::Accepted {});
        }
        match m.command.as_str() {
            "help" => output(
                UNIVERSAL_SLASH_COMMANDS.iter().map(|(n, d)| format!("/{n} — {d}")).collect::<Vec<_>>().join("\n"),
            ),
            "stop" => {
                handle.interrupt().await?;
                output("interrupting the turn".into())
            }
            "status" => {
                let listing = handle.listing().await.ok_or_else(|| error(ReplyErrorCode::UnknownSession, "gone"))?;
                let mut text = format!(
                    "agent {} · {:?} · {} blocks · cwd {}",
                    listing.agent_id, listing.state, listing.last_seq, listing.cwd
                );
                if let Ok(usage) = handle.usage().await {
                    text.push_str(&format!(
                        "\ntokens in {} / out {} · cost ${:.4}",
                        usage.input_tokens.unwrap_or(0),
                        usage.output_tokens.unwrap_or(0),
                        usage.cost_usd.unwrap_or(0.0)
                    ));
                }
                output(text)
            }
            "model" => {
                let models = self.models(&handle.agent_id).await?;
                output(
                    models
                        .iter()
                        .map(|m| format!("{}{}", m.id, if m.is_default { " (default)" } else { "" }))
                        .collect::<Vec<_>>()
                        .join("\n"),
                )
            }
            "usage" => {
                let u = handle.usage().await?;
                output(format!(
                    "tokens in {} / out {} · cache read {} / write {} · cost ${:.4}",
                    u.input_tokens.unwrap_or(0),
                    u.output_tokens.unwrap_or(0),
                    u.cache_read_tokens.unwrap_or(0),
                    u.cache_write_tokens.unwrap_or(0),
                    u.cost_usd.unwrap_or(0.0)
                ))
            }
            "new" => output("start a new session with session_request (the same agent and cwd)".into()),
            other => Err(error(ReplyErrorCode::NotSupported, format!("/{other} is not handled here"))),
        }
    }
}
