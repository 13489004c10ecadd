//! The worker: claims due tasks (lease + heartbeat, one running task per conversation), has the
//! answer built (`answer.rs`), and completes the task together with its outbox entry.

mod answer;

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;

use crate::brain::{BrainError, BrainReply, BrainRequest};
use crate::deps::Deps;
use crate::domain::{TaskId, Usage};
use crate::store::{Completion, NewDelivery, SessionRecord, StoreError, TaskRecord};

/// What one `run_once` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOnce {
    /// Nothing was due.
    Empty,
    Processed {
        task: TaskId,
        outcome: Outcome,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    /// Back to pending, to be tried again later.
    Retrying,
    Failed,
    /// Another worker took the task over (our lease had expired); nothing was written.
    LeaseLost,
}

/// Longest quick re-try wait inside one attempt; a longer Retry-After ends the attempt instead.
const MAX_FAST_WAIT: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub struct Worker {
    deps: Deps,
    id: String,
    /// The task being worked on, handed back if the worker is stopped mid-task.
    holding: Arc<Mutex<Option<TaskId>>>,
}

impl Worker {
    pub fn new(deps: Deps, id: impl Into<String>) -> Self {
        Self {
            deps,
            id: id.into(),
            holding: Arc::default(),
        }
    }

    /// Claims and runs one due task, if any.
    pub async fn run_once(&self) -> Result<RunOnce, StoreError> {
        let lease = self.deps.settings.worker.lease.as_millis() as i64;
        let Some(task) = self
            .deps
            .store
            .claim_task(&self.id, self.deps.clock.now_ms(), lease)
            .await?
        else {
            return Ok(RunOnce::Empty);
        };
        let id = task.id;
        *self.holding.lock().unwrap_or_else(|p| p.into_inner()) = Some(id);
        let outcome = self.attempt(task).await;
        *self.holding.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let outcome = outcome?;
        Ok(RunOnce::Processed { task: id, outcome })
    }

    /// Runs until shutdown: waits for work, runs it, and on shutdown gives a running task
    /// `shutdown_grace` to finish before handing it back.
    pub async fn run(self) {
        let settings = &self.deps.settings.worker;
        let cancel = self.deps.shutdown.clone();
        loop {
            if cancel.is_cancelled() {
                break;
            }
            // Register interest before looking, so a task enqueued meanwhile is not missed.
            let ready = self.deps.task_ready.notified();
            let claimed = if self.deps.health.unwritable().is_some() {
                // Nothing could be recorded: wait until the store takes writes again.
                Ok(RunOnce::Empty)
            } else {
                let work = self.run_once();
                tokio::pin!(work);
                tokio::select! {
                    r = &mut work => r,
                    _ = cancel.cancelled() => {
                        tokio::select! {
                            r = &mut work => r,
                            _ = tokio::time::sleep(settings.shutdown_grace) => {
                                tracing::warn!(worker = %self.id, "task did not finish within the shutdown grace; handing it back");
                                break;
                            }
                        }
                    }
                }
            };
            match claimed {
                Ok(RunOnce::Processed { .. }) => continue,
                Ok(RunOnce::Empty) => {}
                Err(e) => {
                    self.deps.health.observe(&e);
                    tracing::error!(error = %e, "worker cannot reach the store");
                }
            }
            tokio::select! {
                _ = ready => {}
                _ = tokio::time::sleep(settings.poll_interval) => {}
                _ = cancel.cancelled() => break,
            }
        }
        self.release_held().await;
    }

    /// Hands back the task this worker was interrupted in, if any.
    async fn release_held(&self) {
        let held = self
            .holding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(id) = held {
            let _ = self
                .deps
                .store
                .release_task(id, &self.id, self.deps.clock.now_ms())
                .await;
        }
    }

    #[tracing::instrument(skip_all, fields(task_id = %task.id, conversation = %task.conversation_id, attempt = task.attempts))]
    async fn attempt(&self, task: TaskRecord) -> Result<Outcome, StoreError> {
        let heartbeat = self.heartbeat(task.id);
        // A bug while building the answer fails this attempt; it must not end the worker.
        let work = AssertUnwindSafe(self.answer(&task)).catch_unwind();
        let result = tokio::select! {
            r = work => r.unwrap_or_else(|_| {
                tracing::error!("internal error while answering; see the log above");
                Err(AttemptError::Permanent("internal error while building the answer".into()))
            }),
            () = heartbeat => {
                tracing::warn!("lease lost while working; another worker has the task");
                return Ok(Outcome::LeaseLost);
            }
        };
        let now = self.deps.clock.now_ms();
        match result {
            Ok((reply, completion_ctx)) => {
                let done = Completion {
                    task_id: task.id,
                    worker: self.id.clone(),
                    text: reply.text,
                    actions: reply.actions,
                    usage: reply.usage,
                    triage_usage: completion_ctx.triage_usage,
                    cost: completion_ctx.cost,
                    context: completion_ctx.context,
                    delivery: completion_ctx.delivery,
                    session: completion_ctx.session,
                    silent: completion_ctx.silent,
                };
                if self.deps.store.complete_task(&done, now).await? {
                    self.deps.delivery_ready.notify_one();
                    tracing::info!("task completed");
                    self.finished(&task, "completed", now);
                    Ok(Outcome::Completed)
                } else {
                    tracing::warn!("lease lost before completion; the answer is discarded");
                    Ok(Outcome::LeaseLost)
                }
            }
            Err(e) => {
                let retry_at = self.retry_at(&task, &e, now);
                let message = e.to_string();
                if !self
                    .deps
                    .store
                    .fail_attempt(task.id, &self.id, &message, retry_at, now)
                    .await?
                {
                    return Ok(Outcome::LeaseLost);
                }
                if retry_at.is_some() {
                    tracing::warn!(error = %message, "attempt failed; will retry");
                    Ok(Outcome::Retrying)
                } else {
                    tracing::error!(error = %message, "task failed");
                    self.report_failure(&task).await;
                    self.finished(&task, "failed", now);
                    Ok(Outcome::Failed)
                }
            }
        }
    }

    /// When to try again after a failed attempt, or `None` to give up.
    fn retry_at(&self, task: &TaskRecord, e: &AttemptError, now: i64) -> Option<i64> {
        let settings = &self.deps.settings.worker;
        if !e.retryable() || task.attempts >= task.max_attempts {
            return None;
        }
        let idx = (task.attempts as usize).saturating_sub(1);
        let backoff = settings.retry_backoff[idx.min(settings.retry_backoff.len() - 1)];
        let wait = backoff.max(e.retry_after().unwrap_or_default());
        Some(now + wait.as_millis() as i64)
    }

    fn finished(&self, task: &TaskRecord, status: &str, now: i64) {
        let seconds = (now - task.created_at) as f64 / 1000.0;
        self.deps
            .metrics
            .task_finished(status, task.source_type.as_str(), seconds);
    }

    /// Renews the lease until it is lost (then returns); runs beside the work.
    async fn heartbeat(&self, id: TaskId) {
        let every = self.deps.settings.worker.heartbeat;
        let lease = self.deps.settings.worker.lease.as_millis() as i64;
        loop {
            tokio::time::sleep(every).await;
            match self
                .deps
                .store
                .heartbeat_task(id, &self.id, self.deps.clock.now_ms(), lease)
                .await
            {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => tracing::warn!(error = %e, "heartbeat failed; retrying"),
            }
        }
    }

    /// One brain call with quick re-tries of transient errors.
    #[tracing::instrument(skip_all, fields(task_id = request.task_id))]
    async fn call_brain(
        &self,
        brain: &dyn crate::brain::Brain,
        request: &BrainRequest,
    ) -> Result<BrainReply, AttemptError> {
        let settings = &self.deps.settings.worker;
        let mut tries = 0;
        loop {
            match brain.complete(request).await {
                Ok(reply) => return Ok(reply),
                Err(e) if e.is_retryable() && tries < settings.fast_retries => {
                    let wait = (settings.fast_retry_backoff * 2u32.pow(tries))
                        .max(e.retry_after().unwrap_or_default());
                    if wait > MAX_FAST_WAIT {
                        return Err(AttemptError::Brain(e));
                    }
                    tracing::debug!(error = %e, ?wait, "transient brain error; retrying");
                    tries += 1;
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(AttemptError::Brain(e)),
            }
        }
    }
}

pub(super) struct Prepared {
    context: serde_json::Value,
    triage_usage: Option<Usage>,
    cost: Option<f64>,
    delivery: Option<NewDelivery>,
    session: Option<SessionRecord>,
    silent: bool,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum AttemptError {
    #[error(transparent)]
    Brain(BrainError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Permanent(String),
}

impl AttemptError {
    fn retryable(&self) -> bool {
        match self {
            AttemptError::Brain(e) => e.is_retryable(),
            AttemptError::Store(_) => true,
            AttemptError::Permanent(_) => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            AttemptError::Brain(e) => e.retry_after(),
            _ => None,
        }
    }
}
