use std::collections::HashMap;
use std::sync::Mutex;

/// Remembers the signatures seen within the timestamp window so that a captured request cannot be
/// replayed. Bounded: expired entries are pruned as new ones arrive.
#[derive(Debug, Default)]
pub struct ReplayGuard {
    seen: Mutex<HashMap<String, i64>>,
}

impl ReplayGuard {
    /// Records `signature` (valid until `expires_at`, unix seconds); false if it was seen before.
    pub fn first_sight(&self, signature: &str, now: i64, expires_at: i64) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= 4096 && seen.len().is_power_of_two() {
            seen.retain(|_, exp| *exp >= now);
        }
        match seen.get(signature) {
            Some(exp) if *exp >= now => false,
            _ => {
                seen.insert(signature.to_owned(), expires_at);
                true
            }
        }
    }

    /// Forgets a signature whose request was not taken (so the sender may retry it).
    pub fn forget(&self, signature: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.remove(signature);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_sight_is_refused_until_expiry() {
        let g = ReplayGuard::default();
        assert!(g.first_sight("a", 100, 400));
        assert!(!g.first_sight("a", 200, 500));
        assert!(g.first_sight("a", 401, 700));
        g.forget("a");
        assert!(g.first_sight("a", 402, 700));
    }
}
