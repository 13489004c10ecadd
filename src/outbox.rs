//! The delivery loop: sends each outbox entry through its channel's sink with its idempotency
//! key, retries with backoff, and records the delivered answer into the conversation history.

use std::time::Duration;

use ctxgate_contract::{ChannelError, OutboundMessage};

use crate::deps::Deps;
use crate::domain::DeliveryId;
use crate::store::{DeliveryRecord, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliverOnce {
    Empty,
    Delivered(DeliveryId),
    Retrying(DeliveryId),
    Failed(DeliveryId),
}

#[derive(Clone)]
pub struct Outbox {
    deps: Deps,
    id: String,
}

impl Outbox {
    pub fn new(deps: Deps, id: impl Into<String>) -> Self {
        Self {
            deps,
            id: id.into(),
        }
    }

    /// Delivers one due entry, if any.
    pub async fn run_once(&self) -> Result<DeliverOnce, StoreError> {
        let settings = &self.deps.settings.outbox;
        let Some(d) = self
            .deps
            .store
            .claim_delivery(
                &self.id,
                self.deps.clock.now_ms(),
                settings.lease.as_millis() as i64,
                settings.max_attempts,
            )
            .await?
        else {
            return Ok(DeliverOnce::Empty);
        };
        self.deliver(d).await
    }

    pub async fn run(self) {
        let cancel = self.deps.shutdown.clone();
        let poll = self.deps.settings.outbox.poll_interval;
        loop {
            let ready = self.deps.delivery_ready.notified();
            let once = if self.deps.health.unwritable().is_some() {
                // A delivery could not be recorded: wait until the store takes writes again.
                Ok(DeliverOnce::Empty)
            } else {
                self.run_once().await
            };
            match once {
                Ok(DeliverOnce::Empty) => {}
                Ok(_) => {
                    if cancel.is_cancelled() {
                        break;
                    }
                    continue;
                }
                Err(e) => {
                    self.deps.health.observe(&e);
                    tracing::error!(error = %e, "delivery loop cannot reach the store");
                }
            }
            tokio::select! {
                _ = ready => {}
                _ = tokio::time::sleep(poll) => {}
                _ = cancel.cancelled() => break,
            }
        }
    }

    #[tracing::instrument(skip_all, fields(delivery = %d.id, channel = %d.channel, task_id = ?d.task_id))]
    async fn deliver(&self, d: DeliveryRecord) -> Result<DeliverOnce, StoreError> {
        let store = &self.deps.store;
        let result = match self.deps.sinks.get(&d.channel) {
            Some(sink) => {
                let message = OutboundMessage {
                    idempotency_key: d.idempotency_key.clone(),
                    task_id: d.task_id.map(|t| t.0),
                    conversation: d.conversation.clone(),
                    text: d.text.clone(),
                    reply_to: d.reply_to.clone(),
                    meta: d.meta.clone(),
                    attempt: d.attempts,
                };
                sink.deliver(&message).await
            }
            None => Err(ChannelError::Permanent(format!(
                "no channel {:?} is configured to deliver this answer",
                d.channel
            ))),
        };
        let now = self.deps.clock.now_ms();
        match result {
            Ok(delivered) => {
                store
                    .delivery_succeeded(
                        d.id,
                        &self.id,
                        delivered.channel_message_id.as_deref(),
                        now,
                    )
                    .await?;
                tracing::info!("answer delivered");
                {
                    self.count(&d.channel, "delivered");
                    Ok(DeliverOnce::Delivered(d.id))
                }
            }
            Err(e) => {
                let retry_at = self.retry_at(&d, &e, now);
                store
                    .delivery_failed(d.id, &self.id, &e.to_string(), retry_at, now)
                    .await?;
                if retry_at.is_some() {
                    tracing::warn!(error = %e, attempt = d.attempts, "delivery failed; will retry");
                    {
                        self.count(&d.channel, "retrying");
                        Ok(DeliverOnce::Retrying(d.id))
                    }
                } else {
                    tracing::error!(error = %e, "delivery failed for good");
                    {
                        self.count(&d.channel, "failed");
                        Ok(DeliverOnce::Failed(d.id))
                    }
                }
            }
        }
    }

    fn count(&self, channel: &str, outcome: &str) {
        self.deps
            .metrics
            .deliveries
            .get_or_create(&crate::metrics::DeliveryLabels {
                channel: channel.into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    fn retry_at(&self, d: &DeliveryRecord, e: &ChannelError, now: i64) -> Option<i64> {
        let settings = &self.deps.settings.outbox;
        let ChannelError::Transient { retry_after, .. } = e else {
            return None;
        };
        if d.attempts >= settings.max_attempts {
            return None;
        }
        let exp = settings
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(d.attempts.saturating_sub(1)))
            .min(settings.max_backoff);
        let wait: Duration = exp.max(retry_after.unwrap_or_default());
        Some(now + wait.as_millis() as i64)
    }
}
