//! Building one task's answer: the context, the brain request, and — for brains that keep their
//! own session — resuming it with only what is new, or restoring it from the store.

use std::sync::Arc;

use serde_json::json;

use super::{AttemptError, Prepared, Worker};
use crate::brain::{Brain, BrainError, BrainReply, BrainRequest, Completer, RESTORED_NOTICE};
use crate::config::AgentSettings;
use crate::context::{self, Incoming, Resume, Selection};
use crate::store::{MessageRecord, NewDelivery, SessionRecord, TaskRecord};

/// Most messages a resumed session is given at once.
const RESUME_LOOKBACK: usize = 200;

/// A short digest of a system prompt: a session started under another prompt is renewed.
fn digest(prompt: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(prompt.as_bytes())[..8])
}

/// Why a stored session must not be resumed, if it must not: an admin reset, a changed prompt
/// (sessions from before prompts were recorded have none and are kept), too many input
/// tokens, or too long idle.
fn renewal_reason(
    s: &SessionRecord,
    prompt_hash: &str,
    agent: &AgentSettings,
    now: i64,
) -> Option<String> {
    if let Some(reason) = &s.renew_reason {
        return Some(reason.clone());
    }
    if !s.prompt_hash.is_empty() && s.prompt_hash != prompt_hash {
        return Some("prompt_changed".to_owned());
    }
    if s.input_tokens >= agent.session_max_input_tokens {
        return Some("token_ceiling".to_owned());
    }
    let idle_ms = i64::try_from(agent.session_idle_timeout.as_millis()).unwrap_or(i64::MAX);
    if s.updated_at > 0 && now.saturating_sub(s.updated_at) > idle_ms {
        return Some("idle".to_owned());
    }
    None
}

/// How a session-keeping brain was called; recorded on the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum SessionMode {
    /// The brain keeps no session: the selected context every time.
    Stateless,
    /// No session yet: a new one, given the selected context.
    New,
    /// The session was resumed and given only what is new to it.
    Resumed,
    /// Resuming failed: a new session, given the history from the store and a notice.
    Restored,
}

impl Worker {
    pub(super) async fn answer(
        &self,
        task: &TaskRecord,
    ) -> Result<(BrainReply, Prepared), AttemptError> {
        let store = self.deps.store.as_ref();
        let message_id = task
            .message_id
            .ok_or_else(|| AttemptError::Permanent("the task has no trigger message".into()))?;
        let trigger = store
            .get_message(message_id)
            .await?
            .ok_or_else(|| AttemptError::Permanent("the trigger message is gone".into()))?;
        let conversation = store
            .get_conversation(task.conversation_id)
            .await?
            .ok_or_else(|| AttemptError::Permanent("the conversation is gone".into()))?;
        let brain = self.deps.brains.get(&task.brain).cloned().ok_or_else(|| {
            AttemptError::Permanent(format!("no brain named {:?} is configured", task.brain))
        })?;
        let completer = crate::brain::triage_completer(
            &self.deps.brains,
            &self.deps.settings.conversation.selection_model,
            &task.brain,
        );
        let system =
            self.deps
                .settings
                .prompt_for_agent(&conversation.channel, &task.agent, &task.brain);
        let prompt_hash = digest(&system);
        let stored = if brain.keeps_sessions() {
            store
                .get_session(task.conversation_id, &task.agent)
                .await?
                .filter(|s| s.brain == task.brain)
        } else {
            None
        };
        // A session the agent must not resume any more starts over, restored from the store.
        let agent = self
            .deps
            .settings
            .agent(&task.agent)
            .unwrap_or_else(AgentSettings::implicit);
        let renewed = stored
            .as_ref()
            .and_then(|s| renewal_reason(s, &prompt_hash, &agent, self.deps.clock.now_ms()));
        let session = stored.filter(|_| renewed.is_none());
        if let Some(reason) = &renewed {
            tracing::info!(agent = %task.agent, %reason, "starting a new brain session");
        }

        let brain_started = std::time::Instant::now();
        let (mode, selection, reply, fallback) = {
            let work = async {
                Ok::<_, AttemptError>(match &session {
                    Some(s) => {
                        let resume = Resume {
                            after: s.last_injected,
                            agent: task.agent.clone(),
                        };
                        let selection = self
                            .select(task, &trigger, Some(resume), &completer)
                            .await?;
                        let request = self.request(
                            &system,
                            task,
                            &trigger,
                            &selection,
                            Some(&s.session_id),
                            None,
                        );
                        match self.call_brain(brain.as_ref(), &request).await {
                            Err(AttemptError::Brain(BrainError::SessionLost(why))) => {
                                tracing::info!(session = %s.session_id, %why, "session lost; restoring from the store");
                                let selection =
                                    self.select(task, &trigger, None, &completer).await?;
                                let request = self.request(
                                    &system,
                                    task,
                                    &trigger,
                                    &selection,
                                    None,
                                    Some(RESTORED_NOTICE),
                                );
                                let reply = self.call_brain(brain.as_ref(), &request).await?;
                                (SessionMode::Restored, selection, reply, None)
                            }
                            result => (SessionMode::Resumed, selection, result?, None),
                        }
                    }
                    None => {
                        let selection = self.select(task, &trigger, None, &completer).await?;
                        let notice = renewed.as_ref().map(|_| RESTORED_NOTICE);
                        let request =
                            self.request(&system, task, &trigger, &selection, None, notice);
                        let (reply, fallback) = self
                            .call_with_fallback(task, brain.as_ref(), &request)
                            .await?;
                        let mode = if fallback.is_some() || !brain.keeps_sessions() {
                            SessionMode::Stateless
                        } else if renewed.is_some() {
                            SessionMode::Restored
                        } else {
                            SessionMode::New
                        };
                        (mode, selection, reply, fallback)
                    }
                })
            };
            tokio::pin!(work);
            let ack = self
                .deps
                .settings
                .ack_for(&conversation.channel)
                .filter(|_| !task.source_type.is_background());
            match ack {
                Some((after, text)) => tokio::select! {
                    done = &mut work => done?,
                    _ = tokio::time::sleep(after) => {
                        self.acknowledge(task, &conversation.channel, &trigger, text).await;
                        work.await?
                    }
                },
                None => work.await?,
            }
        };

        let metrics = &self.deps.metrics;
        let used = fallback.clone().unwrap_or_else(|| task.brain.clone());
        metrics
            .brain_latency
            .get_or_create(&crate::metrics::BrainLabels {
                brain: used.clone(),
            })
            .observe(brain_started.elapsed().as_secs_f64());
        for (kind, n) in [
            ("prompt", reply.usage.prompt_tokens),
            ("completion", reply.usage.completion_tokens),
        ] {
            metrics
                .brain_tokens
                .get_or_create(&crate::metrics::TokenLabels {
                    brain: used.clone(),
                    kind: kind.into(),
                })
                .inc_by(n);
        }
        if selection.triage_failed_open {
            metrics.triage_fail_open.inc();
        }
        // Remember the session the brain reported (or kept) as having seen up to the trigger.
        let session_id = reply.session.clone().or_else(|| {
            (mode == SessionMode::Resumed)
                .then(|| session.as_ref().map(|s| s.session_id.clone()))
                .flatten()
        });
        let session_update = session_id
            .filter(|_| brain.keeps_sessions() && fallback.is_none())
            .map(|session_id| {
                // The same session goes on counting; a new one starts from this call.
                let continued = session
                    .as_ref()
                    .filter(|s| mode == SessionMode::Resumed && s.session_id == session_id);
                SessionRecord {
                    conversation_id: task.conversation_id,
                    agent: task.agent.clone(),
                    brain: task.brain.clone(),
                    session_id,
                    last_injected: trigger.id,
                    prompt_hash: prompt_hash.clone(),
                    input_tokens: continued.map_or(0, |s| s.input_tokens)
                        + reply.usage.prompt_tokens,
                    started_at: continued.map_or(0, |s| s.started_at),
                    updated_at: 0,
                    renew_reason: None,
                }
            });
        let mut explain = selection.explain();
        explain["session"] = json!(mode);
        if let Some(reason) = &renewed {
            explain["session_renewed"] = json!(reason);
        }
        explain["brain"] = json!(fallback.as_deref().unwrap_or(&task.brain));
        // Cost at the prices of the brain that answered (triage at the task brain's prices).
        let prices = |name: &str| self.deps.settings.brains.get(name);
        let answer_cost =
            prices(fallback.as_deref().unwrap_or(&task.brain)).and_then(|b| b.cost(reply.usage));
        let triage_cost = selection
            .triage_usage
            .and_then(|u| prices(&task.brain).and_then(|b| b.cost(u)));
        let cost = match (answer_cost, triage_cost) {
            (None, None) => None,
            (a, t) => Some(a.unwrap_or(0.0) + t.unwrap_or(0.0)),
        };
        // A briefing with nothing to report is delivered to no one.
        let silent = trigger.meta.get("silent_unless_news") == Some(&json!(true))
            && reply.text.trim() == self.deps.settings.scheduler.silent_token;
        let prepared = Prepared {
            silent,
            context: explain,
            triage_usage: selection.triage_usage,
            cost,
            delivery: (!silent).then(|| NewDelivery {
                text: self.signed(&conversation.channel, &task.agent, &reply.text),
                channel: conversation.channel,
                idempotency_key: format!("ctxgate:task:{}:result", task.id),
                kind: "result".to_owned(),
                reply_to: Some(trigger.channel_message_id),
                meta: trigger.meta,
            }),
            session: session_update,
        };
        Ok((reply, prepared))
    }

    async fn select(
        &self,
        task: &TaskRecord,
        trigger: &MessageRecord,
        resume: Option<Resume>,
        completer: &Option<Arc<dyn Completer>>,
    ) -> Result<Selection, AttemptError> {
        // A resumed session gets everything new to it, untriaged (up to a generous lookback),
        // since what it is not given now it will never see.
        let mut settings = self.deps.settings.conversation_for(&task.agent);
        if resume.is_some() {
            settings.use_selection = false;
            settings.lookback_count = settings.lookback_count.max(RESUME_LOOKBACK);
        }
        let incoming = Incoming {
            id: Some(trigger.id),
            text: trigger.text.clone(),
            at_ms: trigger.created_at,
            until_ms: None,
            reply_to: trigger.reply_to_message_id,
            resume,
            agent: Some(task.agent.clone()),
        };
        Ok(self
            .deps
            .context
            .select(
                self.deps.store.as_ref(),
                &settings,
                task.conversation_id,
                &incoming,
                completer.as_deref(),
            )
            .await?)
    }

    /// Where several agents answer on one channel, an answer starts with its agent's name so
    /// people see who speaks (the history keeps the plain text).
    pub(super) fn signed(&self, channel: &str, agent: &str, text: &str) -> String {
        let settings = &self.deps.settings;
        if settings.agents_serving(channel).len() < 2 {
            return text.to_owned();
        }
        match settings.agent(agent) {
            Some(a) => format!("{}: {text}", a.display_name()),
            None => text.to_owned(),
        }
    }

    fn request(
        &self,
        system: &str,
        task: &TaskRecord,
        trigger: &MessageRecord,
        selection: &Selection,
        session: Option<&str>,
        notice: Option<&str>,
    ) -> BrainRequest {
        BrainRequest {
            task_id: task.id.0,
            conversation_id: task.conversation_id.0,
            system: system.to_owned(),
            restored_notice: notice.map(str::to_owned),
            context: selection.turns(),
            message: context::turn_of(trigger),
            session: session.map(str::to_owned),
        }
    }

    /// Where several agents answer on one channel, a task that failed for good is reported in
    /// its agent's name (kept out of context like an acknowledgement), so the asker knows which
    /// agent did not answer while the others' answers arrive.
    pub(super) async fn report_failure(&self, task: &TaskRecord) {
        let store = self.deps.store.as_ref();
        let (Ok(Some(conversation)), Some(message_id)) = (
            store.get_conversation(task.conversation_id).await,
            task.message_id,
        ) else {
            return;
        };
        let settings = &self.deps.settings;
        if task.source_type.is_background()
            || settings.agents_serving(&conversation.channel).len() < 2
        {
            return;
        }
        let Ok(Some(trigger)) = store.get_message(message_id).await else {
            return;
        };
        let name = settings
            .agent(&task.agent)
            .map_or(task.agent.clone(), |a| a.display_name().to_owned());
        let delivery = NewDelivery {
            channel: conversation.channel,
            idempotency_key: format!("ctxgate:task:{}:failed", task.id),
            kind: "ack".to_owned(),
            text: format!("{name} could not answer this message (its brain failed)."),
            reply_to: Some(trigger.channel_message_id),
            meta: trigger.meta,
        };
        match store
            .enqueue_delivery(task.id, &delivery, self.deps.clock.now_ms())
            .await
        {
            Ok(true) => self.deps.delivery_ready.notify_one(),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "cannot queue the failure notice"),
        }
    }

    /// Queues a short acknowledgement of a slow answer (once per task, through the outbox).
    async fn acknowledge(
        &self,
        task: &TaskRecord,
        channel: &str,
        trigger: &MessageRecord,
        text: String,
    ) {
        let delivery = NewDelivery {
            channel: channel.to_owned(),
            idempotency_key: format!("ctxgate:task:{}:ack", task.id),
            kind: "ack".to_owned(),
            text,
            reply_to: Some(trigger.channel_message_id.clone()),
            meta: trigger.meta.clone(),
        };
        let now = self.deps.clock.now_ms();
        match self
            .deps
            .store
            .enqueue_delivery(task.id, &delivery, now)
            .await
        {
            Ok(true) => self.deps.delivery_ready.notify_one(),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "cannot queue the acknowledgement"),
        }
    }

    /// Calls the brain; when it still fails with a retryable error and has a fallback brain,
    /// asks that one once. Returns the answer and the fallback's name when it answered.
    async fn call_with_fallback(
        &self,
        task: &TaskRecord,
        brain: &dyn Brain,
        request: &BrainRequest,
    ) -> Result<(BrainReply, Option<String>), AttemptError> {
        match self.call_brain(brain, request).await {
            Err(AttemptError::Brain(e)) if e.is_retryable() => {
                let fallback = self
                    .deps
                    .settings
                    .brains
                    .get(&task.brain)
                    .and_then(|b| b.fallback.clone());
                let Some((name, other)) =
                    fallback.and_then(|n| self.deps.brains.get(&n).cloned().map(|b| (n, b)))
                else {
                    return Err(AttemptError::Brain(e));
                };
                tracing::warn!(error = %e, fallback = %name, "brain failed; asking the fallback");
                let reply = self.call_brain(other.as_ref(), request).await?;
                Ok((reply, Some(name)))
            }
            other => other.map(|r| (r, None)),
        }
    }
}
