//! One prompt turn on the connection: `session/prompt`, the session's updates mapped
//! into the turn, permission requests asked of the user, interrupts, and the agent's
//! last words once the prompt is answered.

use super::*;

impl Connection {
    /// Runs one prompt turn: sends `session/prompt`, streams the updates of our session
    /// through `mapper` into `turn`, asks the user on permission requests, cancels on
    /// interrupt, and returns how the prompt ended once it is answered (and the
    /// agent's last words after the answer are in).
    pub async fn prompt(
        &mut self,
        session_id: &str,
        prompt: Vec<Value>,
        mapper: &mut Mapper,
        turn: &mut Turn,
    ) -> PromptOutcome {
        let peer = self.peer.clone();
        let params = json!({"sessionId": session_id, "prompt": prompt});
        let call = async move { peer.request_raw(method::SESSION_PROMPT, params, None).await };
        tokio::pin!(call);
        let mut answer: Option<Result<Value, CallError>> = None;
        let mut cancel_deadline: Option<Instant> = None;
        let mut outcome =
            PromptOutcome { end: PromptEnd::CancelTimedOut, interrupted: false, lost: false, bridge_gone: false };
        // What the agent wrote on stderr between turns is not this turn's.
        while self.stderr.try_recv().is_ok() {}
        while answer.is_none() {
            enum Next {
                Interrupt,
                CancelTimedOut,
                Answer(Result<Value, CallError>),
                Message(Incoming),
                Closed,
                Stderr(Option<String>),
            }
            let next = match self.backlog.pop_front() {
                Some(message) => Next::Message(message),
                None => {
                    let deadline = cancel_deadline.unwrap_or_else(Instant::now);
                    tokio::select! {
                        biased;
                        () = turn.interrupted(), if cancel_deadline.is_none() => Next::Interrupt,
                        () = sleep_until(deadline), if cancel_deadline.is_some() => Next::CancelTimedOut,
                        a = &mut call => Next::Answer(a),
                        m = self.incoming.recv(), if !self.stdout_closed => match m {
                            Some(m) => Next::Message(m),
                            None => Next::Closed,
                        },
                        line = self.stderr.recv(), if self.stderr_open => Next::Stderr(line),
                    }
                }
            };
            match next {
                Next::Interrupt => {
                    outcome.interrupted = true;
                    cancel_deadline = Some(Instant::now() + CANCEL_TIMEOUT);
                    tracing::info!("{}: cancelling the turn", self.name);
                    self.notify(method::SESSION_CANCEL, json!({"sessionId": session_id})).await;
                }
                Next::CancelTimedOut => {
                    tracing::warn!(
                        "{}: the turn did not end within {CANCEL_TIMEOUT:?} of session/cancel; killing the agent",
                        self.name
                    );
                    if let Err(e) = self.process.kill_group() {
                        tracing::warn!("{}: cannot kill the agent: {e}", self.name);
                    }
                    outcome.lost = true;
                    outcome.end = PromptEnd::CancelTimedOut;
                    return outcome;
                }
                Next::Answer(a) => answer = Some(a),
                Next::Closed => self.stdout_closed = true,
                Next::Stderr(None) => self.stderr_open = false,
                Next::Stderr(Some(line)) => {
                    if let Some(notice) = (self.stderr_notice)(&line) {
                        for block in mapper.notice(notice) {
                            if !emit(turn, block).await {
                                outcome.bridge_gone = true;
                                return outcome;
                            }
                        }
                    }
                }
                Next::Message(message) => {
                    let routed = self.route(message).await;
                    let keep_going = self
                        .in_turn(
                            routed,
                            session_id,
                            mapper,
                            turn,
                            &mut call,
                            &mut answer,
                            &mut outcome,
                            &mut cancel_deadline,
                        )
                        .await;
                    if !keep_going {
                        outcome.bridge_gone = true;
                        return outcome;
                    }
                }
            }
        }
        // What the agent wrote before its answer is queued already; what it writes right
        // after is the last of this turn too (agents that send updates from another
        // thread race their own answer).
        self.settle(session_id, mapper, turn).await;
        outcome.end = match answer {
            Some(Ok(value)) => PromptEnd::Answered(serde_json::from_value(value).unwrap_or_else(|e| {
                tracing::warn!("{}: malformed prompt result ({e}); the turn counts as completed", self.name);
                Default::default()
            })),
            Some(Err(CallError::Rpc { error, .. })) => PromptEnd::Failed { message: describe_error(&error) },
            Some(Err(_)) | None => {
                outcome.lost = true;
                PromptEnd::Exited { report: self.exit_report().await }
            }
        };
        outcome
    }

    /// One routed message during a turn. Returns false when the bridge is gone.
    #[allow(clippy::too_many_arguments)]
    async fn in_turn<F>(
        &mut self,
        routed: Routed,
        session_id: &str,
        mapper: &mut Mapper,
        turn: &mut Turn,
        call: &mut Pin<&mut F>,
        answer: &mut Option<Result<Value, CallError>>,
        outcome: &mut PromptOutcome,
        cancel_deadline: &mut Option<Instant>,
    ) -> bool
    where
        F: Future<Output = Result<Value, CallError>>,
    {
        match routed {
            Routed::Update { session_id: sid, update } if sid == session_id => {
                for block in mapper.update(update) {
                    if !emit(turn, block).await {
                        return false;
                    }
                }
            }
            Routed::Update { session_id: sid, .. } => {
                tracing::warn!("{}: an update for session `{sid}`, not ours; dropped", self.name);
            }
            Routed::Permission { request, params } if params.session_id == session_id => {
                return self
                    .ask(request, params, session_id, mapper, turn, call, answer, outcome, cancel_deadline)
                    .await;
            }
            Routed::Permission { request, params } => {
                tracing::warn!("{}: a permission request for session `{}`, not ours", self.name, params.session_id);
                self.answer(request.id, json!({"outcome": {"outcome": "cancelled"}})).await;
            }
            Routed::Withdrawn(_) | Routed::Handled => {}
        }
        true
    }

    /// Asks the user about one permission request and answers the agent. While the user
    /// decides, the agent's messages are read ahead (bounded), so its withdrawing the
    /// request, its answering the prompt or its exiting ends the wait. Returns false
    /// when the bridge is gone.
    #[allow(clippy::too_many_arguments)]
    async fn ask<F>(
        &mut self,
        request: Request,
        params: PermissionParams,
        session_id: &str,
        mapper: &mut Mapper,
        turn: &mut Turn,
        call: &mut Pin<&mut F>,
        answer: &mut Option<Result<Value, CallError>>,
        outcome: &mut PromptOutcome,
        cancel_deadline: &mut Option<Instant>,
    ) -> bool
    where
        F: Future<Output = Result<Value, CallError>>,
    {
        for block in mapper.permission_update(&params) {
            if !emit(turn, block).await {
                self.answer(request.id, json!({"outcome": {"outcome": "cancelled"}})).await;
                return false;
            }
        }
        let ask = mapper.permission(&params);
        if ask.options.is_empty() || outcome.interrupted {
            self.answer(request.id, ask.reply(None)).await;
            return true;
        }
        enum Ended {
            User(Result<String, TurnError>),
            AgentMovedOn,
        }
        let ended = {
            let waiting =
                turn.ask_permission(ask.tool.clone(), ask.input.clone(), ask.options.clone(), ask.tool_call_id.clone());
            tokio::pin!(waiting);
            loop {
                let reading = !self.stdout_closed && self.backlog.len() < MAX_BACKLOG;
                tokio::select! {
                    biased;
                    user = &mut waiting => break Ended::User(user),
                    a = call.as_mut(), if answer.is_none() => {
                        *answer = Some(a);
                        break Ended::AgentMovedOn;
                    }
                    m = self.incoming.recv(), if reading => match m {
                        Some(Incoming::Notification(n))
                            if n.method == method::CANCEL_REQUEST
                                && n.params.get("requestId").and_then(RequestId::from_value).as_ref() == Some(&request.id) =>
                        {
                            tracing::info!("{}: the agent withdrew its permission request", self.name);
                            break Ended::AgentMovedOn;
                        }
                        Some(m) => self.backlog.push_back(m),
                        None => {
                            self.stdout_closed = true;
                            break Ended::AgentMovedOn;
                        }
                    },
                }
            }
        };
        let chosen = match ended {
            Ended::User(Ok(option_id)) => Some(option_id),
            Ended::User(Err(TurnError::Interrupted)) => {
                // Cancel the turn first, so the agent does not start on the next step
                // when it hears the request was cancelled.
                outcome.interrupted = true;
                *cancel_deadline = Some(Instant::now() + CANCEL_TIMEOUT);
                self.notify(method::SESSION_CANCEL, json!({"sessionId": session_id})).await;
                None
            }
            Ended::User(Err(TurnError::Closed)) => {
                self.answer(request.id, ask.reply(None)).await;
                return false;
            }
            Ended::User(Err(e)) => {
                tracing::warn!("{}: the permission request failed ({e}); answering cancelled", self.name);
                None
            }
            Ended::AgentMovedOn => None,
        };
        mapper.permission_answered(&ask, chosen.as_deref());
        self.answer(request.id, ask.reply(chosen.as_deref())).await;
        true
    }

    /// After the prompt answer: drains what is queued, then listens until the agent has
    /// been quiet for [`SETTLE_QUIET`] (at most [`SETTLE_MAX`]).
    async fn settle(&mut self, session_id: &str, mapper: &mut Mapper, turn: &mut Turn) {
        let until = Instant::now() + SETTLE_MAX;
        loop {
            let message = match self.try_recv() {
                Some(message) => message,
                None if self.stdout_closed => return,
                None => {
                    let quiet = (Instant::now() + SETTLE_QUIET).min(until);
                    match tokio::time::timeout_at(quiet, self.recv()).await {
                        Ok(Some(message)) => message,
                        Ok(None) | Err(_) => return,
                    }
                }
            };
            match self.route(message).await {
                Routed::Update { session_id: sid, update } if sid == session_id => {
                    for block in mapper.update(update) {
                        if !emit(turn, block).await {
                            return;
                        }
                    }
                }
                Routed::Update { session_id: sid, .. } => {
                    tracing::warn!("{}: an update for session `{sid}`, not ours; dropped", self.name);
                }
                Routed::Permission { request, .. } => {
                    tracing::warn!("{}: a permission request after the turn ended; answering cancelled", self.name);
                    self.answer(request.id, json!({"outcome": {"outcome": "cancelled"}})).await;
                }
                Routed::Withdrawn(_) | Routed::Handled => {}
            }
            if Instant::now() >= until {
                return;
            }
        }
    }
}
