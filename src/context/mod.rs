//! Which prior messages of a conversation go into a task's prompt.
//!
//! For now: the newest `lookback_count` messages before the trigger, excluding system messages,
//! deleted messages, acknowledgement/progress posts and background output. The full selection of
//! CONTEXT.md (recency, reply parent, triage, budgets, archive recall) replaces this.

use chrono::{TimeZone, Utc};
use ctxgate_contract::Role;
use serde::Serialize;

use crate::brain::Turn;
use crate::config::ConversationSettings;
use crate::domain::MessageId;
use crate::store::{MessageRecord, Store, StoreResult};

/// Why a message is (or is not) in the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    Recent,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chosen {
    pub id: MessageId,
    pub reason: Reason,
}

/// The context of one task: the turns for the brain and what was chosen why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Selection {
    pub turns: Vec<Turn>,
    pub chosen: Vec<Chosen>,
}

pub fn turn_of(m: &MessageRecord) -> Turn {
    Turn {
        role: m.role,
        speaker: m.sender_name.clone().unwrap_or_else(|| m.sender_id.clone()),
        text: m.text.clone(),
        timestamp: Utc
            .timestamp_millis_opt(m.created_at)
            .single()
            .unwrap_or_default(),
    }
}

fn is_candidate(m: &MessageRecord) -> bool {
    m.deleted_at.is_none()
        && m.role != Role::System
        && m.kind == "message"
        && !m.source_type.is_some_and(|s| s.is_background())
}

pub async fn select(
    store: &dyn Store,
    settings: &ConversationSettings,
    trigger: &MessageRecord,
) -> StoreResult<Selection> {
    if !settings.enabled {
        return Ok(Selection {
            turns: Vec::new(),
            chosen: Vec::new(),
        });
    }
    let prior = store
        .messages_before(
            trigger.conversation_id,
            Some(trigger.id),
            settings.lookback_count,
        )
        .await?;
    let picked: Vec<&MessageRecord> = prior.iter().filter(|m| is_candidate(m)).collect();
    Ok(Selection {
        turns: picked.iter().map(|m| turn_of(m)).collect(),
        chosen: picked
            .iter()
            .map(|m| Chosen {
                id: m.id,
                reason: Reason::Recent,
            })
            .collect(),
    })
}
