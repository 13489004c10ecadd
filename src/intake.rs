//! Intake: the one way events enter the gateway. Commits the message, the task for a trigger
//! (deduplicated by channel + conversation + channel message id) and the channel cursor in ONE
//! transaction, then wakes a worker.

use async_trait::async_trait;
use ctxgate_contract::{
    Audience, EventKind, InboundEvent, InboundMessage, Intake, IntakeError, IntakeReceipt, Role,
};

use std::sync::Arc;

use crate::deps::Deps;
use crate::limits::SenderLimits;
use crate::store::NewTask;

/// The agent answering when a channel names none.
pub const DEFAULT_AGENT: &str = "default";

const MAX_ID_LEN: usize = 512;

#[derive(Clone)]
pub struct IntakeService {
    deps: Deps,
    limits: Arc<SenderLimits>,
}

impl IntakeService {
    pub fn new(deps: Deps) -> Self {
        Self {
            deps,
            limits: Arc::default(),
        }
    }
}

/// Unambiguous whatever the ids contain.
pub fn dedup_key(
    channel: &str,
    conversation: &str,
    channel_message_id: &str,
    agent: &str,
) -> String {
    serde_json::json!([channel, conversation, channel_message_id, agent]).to_string()
}

fn check(event: &InboundEvent) -> Result<(), IntakeError> {
    let bad = |what: &str| Err(IntakeError::Invalid(format!("{what} is empty or too long")));
    if event.channel.is_empty() || event.channel.len() > MAX_ID_LEN {
        return bad("channel");
    }
    if event.conversation.is_empty() || event.conversation.len() > MAX_ID_LEN {
        return bad("conversation");
    }
    if let EventKind::Posted(m) = &event.kind
        && (m.channel_message_id.is_empty() || m.channel_message_id.len() > MAX_ID_LEN)
    {
        return bad("channel_message_id");
    }
    Ok(())
}

impl IntakeService {
    /// One task per agent asked to answer `m`: the agents it is addressed to (its audience),
    /// else the one the channel named, else the channel's default agent. Every agent must
    /// serve the channel.
    async fn tasks_for(
        &self,
        event: &InboundEvent,
        m: &InboundMessage,
    ) -> Result<Vec<NewTask>, IntakeError> {
        let settings = &self.deps.settings;
        let agents: Vec<String> = match (&m.audience, &m.agent) {
            (Audience::Addressed { agents, .. }, _) if !agents.is_empty() => agents.clone(),
            (_, Some(agent)) => vec![agent.clone()],
            _ => match self.author_of_parent(event, m).await {
                Some(agent) => vec![agent],
                None => vec![settings.default_agent_for(&event.channel).ok_or_else(|| {
                    IntakeError::Invalid(format!("no agent answers on {}", event.channel))
                })?],
            },
        };
        let mut tasks = Vec::with_capacity(agents.len());
        for agent in agents {
            if !settings
                .agent(&agent)
                .is_some_and(|a| a.serves(&event.channel))
            {
                return Err(IntakeError::Invalid(format!(
                    "no agent {agent:?} answers on {}",
                    event.channel
                )));
            }
            tasks.push(NewTask {
                dedup_key: dedup_key(
                    &event.channel,
                    &event.conversation,
                    &m.channel_message_id,
                    &agent,
                ),
                source_type: m.source_type,
                brain: settings.brain_for(&event.channel, &agent),
                agent,
                max_attempts: settings.worker.max_attempts,
            });
        }
        Ok(tasks)
    }

    /// With several agents, a reply to an agent's answer goes to that agent.
    async fn author_of_parent(&self, event: &InboundEvent, m: &InboundMessage) -> Option<String> {
        let settings = &self.deps.settings;
        let parent = m.reply_to.as_deref()?;
        if settings.agents.is_empty() {
            return None;
        }
        let store = &self.deps.store;
        let conversation = store
            .find_conversation(&event.channel, &event.conversation)
            .await
            .ok()??;
        let parent = store.find_message(conversation.id, parent).await.ok()??;
        let agent = parent.agent.filter(|_| parent.role == Role::Assistant)?;
        settings
            .agent(&agent)
            .is_some_and(|a| a.serves(&event.channel))
            .then_some(agent)
    }
}

#[async_trait]
impl Intake for IntakeService {
    #[tracing::instrument(skip_all, fields(channel = %event.channel))]
    async fn submit(&self, event: InboundEvent) -> Result<IntakeReceipt, IntakeError> {
        if self.deps.shutdown.is_cancelled() {
            return Err(IntakeError::ShuttingDown);
        }
        check(&event)?;
        if let Some(u) = self.deps.health.unwritable() {
            return Err(IntakeError::Unavailable(format!(
                "the store cannot take writes ({}): {}; try again later",
                u.reason, u.message
            )));
        }
        let now = self.deps.clock.now_ms();
        let mut event = event;
        // Whose asking counts against a per-sender limit, once the answer is taken on.
        let mut counted = None;
        if let EventKind::Posted(m) = &mut event.kind
            && m.trigger
            && let Some(limit) = self.deps.settings.per_sender_limit(&event.channel)
        {
            if self.limits.allows(&event.channel, &m.sender_id, limit, now) {
                counted = Some(m.sender_id.clone());
            } else {
                tracing::info!(sender = %m.sender_id, limit,
                    "sender past the hourly limit: stored without an answer");
                m.trigger = false;
                m.meta["skipped"] = "rate_limited_sender".into();
            }
        }
        let tasks = match &event.kind {
            EventKind::Posted(m) if m.trigger => self.tasks_for(&event, m).await?,
            _ => Vec::new(),
        };
        let receipt = self
            .deps
            .store
            .ingest_tasks(&event, &tasks, now)
            .await
            .map_err(|e| {
                self.deps.health.observe(&e);
                IntakeError::Unavailable(e.to_string())
            })?;
        if receipt.task_id.is_some() && !receipt.duplicate {
            if let Some(sender) = counted {
                self.limits.record(&event.channel, &sender, now);
            }
            self.deps.task_ready.notify_one();
        }
        tracing::debug!(task = ?receipt.task_id, duplicate = receipt.duplicate, "event taken");
        Ok(receipt)
    }

    async fn conversation_of(
        &self,
        channel: &str,
        channel_message_id: &str,
    ) -> Result<Option<String>, IntakeError> {
        self.deps
            .store
            .conversation_of_message(channel, channel_message_id)
            .await
            .map_err(|e| IntakeError::Unavailable(e.to_string()))
    }

    async fn cursor(&self, channel: &str, scope: &str) -> Result<Option<String>, IntakeError> {
        self.deps
            .store
            .cursor(channel, scope)
            .await
            .map_err(|e| IntakeError::Unavailable(e.to_string()))
    }
}
