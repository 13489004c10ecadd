//! Per-sender limits on triggers: past `per_sender_per_hour` answers asked for in the last hour
//! on one channel instance, a sender's messages are still stored (history stays whole) but ask
//! for no answer, marked `skipped: rate_limited_sender` (listed at `GET /admin/skipped`). Held
//! in memory per process: a restart starts the count afresh. E-mail keeps its own limits in the
//! mailbox tracker (per sender and per mailbox), so this applies to Talk and webhooks.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

const HOUR_MS: i64 = 3_600_000;

/// Senders tracked before stale ones are swept out.
const SWEEP_AT: usize = 10_000;

#[derive(Default)]
pub struct SenderLimits {
    /// (channel instance, sender id) → times of the answers asked for in the last hour.
    seen: Mutex<HashMap<(String, String), VecDeque<i64>>>,
}

impl SenderLimits {
    /// Whether `sender` may ask for another answer on `channel` at `now_ms`.
    pub fn allows(&self, channel: &str, sender: &str, limit: usize, now_ms: i64) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let key = (channel.to_owned(), sender.to_owned());
        match seen.get_mut(&key) {
            Some(times) => {
                times.retain(|t| now_ms - t < HOUR_MS);
                times.len() < limit
            }
            None => true,
        }
    }

    /// Counts an answer `sender` asked for on `channel` at `now_ms`.
    pub fn record(&self, channel: &str, sender: &str, now_ms: i64) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= SWEEP_AT {
            seen.retain(|_, times| times.back().is_some_and(|t| now_ms - t < HOUR_MS));
        }
        seen.entry((channel.to_owned(), sender.to_owned()))
            .or_default()
            .push_back(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_is_held_to_the_limit_for_an_hour_per_channel() {
        let limits = SenderLimits::default();
        for n in 0..3 {
            assert!(limits.allows("talk:main", "alice", 3, n));
            limits.record("talk:main", "alice", n);
        }
        assert!(!limits.allows("talk:main", "alice", 3, 10));
        // Others, and the same sender elsewhere, are not held.
        assert!(limits.allows("talk:main", "bob", 3, 10));
        assert!(limits.allows("webhook:default", "alice", 3, 10));
        // An hour after the first one, one more is allowed.
        assert!(!limits.allows("talk:main", "alice", 3, HOUR_MS - 1));
        assert!(limits.allows("talk:main", "alice", 3, HOUR_MS));
    }

    #[test]
    fn stale_senders_are_swept() {
        let limits = SenderLimits::default();
        for n in 0..SWEEP_AT {
            limits.record("webhook:default", &format!("s{n}"), 0);
        }
        limits.record("webhook:default", "late", HOUR_MS + 1);
        assert_eq!(limits.seen.lock().unwrap().len(), 1);
    }
}
