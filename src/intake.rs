//! Intake: the one way events enter the gateway. Commits the message, the task for a trigger
//! (deduplicated by channel + conversation + channel message id) and the channel cursor in ONE
//! transaction, then wakes a worker.

use async_trait::async_trait;
use ctxgate_contract::{EventKind, InboundEvent, Intake, IntakeError, IntakeReceipt};

use crate::deps::Deps;
use crate::store::NewTask;

/// The agent answering when a channel names none.
pub const DEFAULT_AGENT: &str = "default";

const MAX_ID_LEN: usize = 512;

#[derive(Clone)]
pub struct IntakeService {
    deps: Deps,
}

impl IntakeService {
    pub fn new(deps: Deps) -> Self {
        Self { deps }
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

#[async_trait]
impl Intake for IntakeService {
    #[tracing::instrument(skip_all, fields(channel = %event.channel))]
    async fn submit(&self, event: InboundEvent) -> Result<IntakeReceipt, IntakeError> {
        if self.deps.shutdown.is_cancelled() {
            return Err(IntakeError::ShuttingDown);
        }
        check(&event)?;
        let task = match &event.kind {
            EventKind::Posted(m) if m.trigger => {
                let agent = m.agent.clone().unwrap_or_else(|| DEFAULT_AGENT.to_owned());
                Some(NewTask {
                    dedup_key: dedup_key(
                        &event.channel,
                        &event.conversation,
                        &m.channel_message_id,
                        &agent,
                    ),
                    source_type: m.source_type,
                    agent,
                    brain: self
                        .deps
                        .settings
                        .brain_for_channel(&event.channel)
                        .to_owned(),
                    max_attempts: self.deps.settings.worker.max_attempts,
                })
            }
            _ => None,
        };
        let receipt = self
            .deps
            .store
            .ingest(&event, task.as_ref(), self.deps.clock.now_ms())
            .await
            .map_err(|e| IntakeError::Unavailable(e.to_string()))?;
        if receipt.task_id.is_some() && !receipt.duplicate {
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
