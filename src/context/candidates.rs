//! Steps 1 and 2 of the selection: which messages are candidates at all, and the recency filter.

use ctxgate_contract::Role;

use super::Reason;
use crate::config::ConversationSettings;
use crate::store::MessageRecord;

/// Why a message can never be a candidate, if it cannot.
pub fn exclusion(m: &MessageRecord) -> Option<Reason> {
    if m.deleted_at.is_some() {
        Some(Reason::ExcludedDeleted)
    } else if m.role == Role::System {
        Some(Reason::ExcludedSystem)
    } else if m.kind != "message" {
        Some(Reason::ExcludedProgress)
    } else if m.source_type.is_some_and(|s| s.is_background()) {
        Some(Reason::ExcludedBackground)
    } else {
        None
    }
}

/// The recency filter: with more than `context_min_messages` candidates, keep the newest
/// `context_min_messages` plus every candidate within `context_recency_hours` of the NEWEST
/// candidate. `candidates` is chronological; returns the dropped ones.
pub fn recency(
    candidates: &mut Vec<MessageRecord>,
    settings: &ConversationSettings,
) -> Vec<MessageRecord> {
    let n = candidates.len();
    if settings.context_recency_hours == 0 || n <= settings.context_min_messages {
        return Vec::new();
    }
    let newest = candidates.iter().map(|m| m.created_at).max().unwrap_or(0);
    let horizon = newest - settings.context_recency_hours as i64 * 3_600_000;
    let floor_from = n - settings.context_min_messages;
    let mut kept = Vec::with_capacity(n);
    let mut dropped = Vec::new();
    for (i, m) in candidates.drain(..).enumerate() {
        if i >= floor_from || m.created_at >= horizon {
            kept.push(m);
        } else {
            dropped.push(m);
        }
    }
    *candidates = kept;
    dropped
}
