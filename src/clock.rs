//! Wall-clock time in unix milliseconds, replaceable in tests (leases, backoff, timestamps).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

#[derive(Clone, Debug, Default)]
pub enum Clock {
    #[default]
    System,
    /// A clock that moves only when told to.
    Manual(Arc<AtomicI64>),
}

impl Clock {
    pub fn manual(start_ms: i64) -> Self {
        Clock::Manual(Arc::new(AtomicI64::new(start_ms)))
    }

    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::System => chrono::Utc::now().timestamp_millis(),
            Clock::Manual(t) => t.load(Ordering::SeqCst),
        }
    }

    /// Moves a manual clock forward (no effect on the system clock).
    pub fn advance(&self, by: std::time::Duration) {
        if let Clock::Manual(t) = self {
            t.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
        }
    }
}
