//! Whether the store takes writes. When a write fails because the disk is full or the
//! database is read-only, the gateway says so (`/readyz` answers 503 `store_unwritable`, the
//! `ctxgate_store_writable` metric drops to 0, an error is logged once), stops taking work
//! (intake answers 503 so senders retry later, workers and delivery pause), and probes the
//! store every few seconds; the first write that succeeds resumes everything. Nothing taken is
//! lost: intake commits a message, its tasks and the channel cursor together or not at all,
//! and pollers resume from their last committed cursor.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::deps::Deps;
use crate::store::StoreError;

/// How often an unwritable store is probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq)]
pub struct Unwritable {
    /// `disk_full` or `read_only`.
    pub reason: &'static str,
    /// The store's own error message.
    pub message: String,
    pub since: DateTime<Utc>,
}

/// Shared by every part of one process (cheap to clone).
#[derive(Clone, Default)]
pub struct StoreHealth {
    state: Arc<Mutex<Option<Unwritable>>>,
}

impl StoreHealth {
    /// Notes a store error; only "cannot write" errors change the state.
    pub fn observe(&self, e: &StoreError) {
        let Some(reason) = e.unwritable() else {
            return;
        };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.is_none() {
            tracing::error!(reason, error = %e,
                "the store cannot take writes: pausing intake and work until it can");
            *state = Some(Unwritable {
                reason,
                message: e.to_string(),
                since: Utc::now(),
            });
        }
    }

    /// Why the store cannot take writes, while it cannot.
    pub fn unwritable(&self) -> Option<Unwritable> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn clear(&self) {
        let was = self.state.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(was) = was {
            let secs = (Utc::now() - was.since).num_seconds();
            tracing::info!(
                reason = was.reason,
                after_secs = secs,
                "the store takes writes again: resuming"
            );
        }
    }
}

/// Probes an unwritable store until it takes a write again, until shutdown.
pub async fn watch(deps: Deps) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(PROBE_EVERY) => {}
            _ = deps.shutdown.cancelled() => return,
        }
        deps.metrics
            .store_writable
            .set(i64::from(deps.health.unwritable().is_none()));
        if deps.health.unwritable().is_none() {
            continue;
        }
        match deps.store.probe_write(deps.clock.now_ms()).await {
            Ok(()) => {
                deps.health.clear();
                deps.metrics.store_writable.set(1);
                deps.task_ready.notify_waiters();
                deps.delivery_ready.notify_waiters();
            }
            Err(e) => deps.health.observe(&e),
        }
    }
}
