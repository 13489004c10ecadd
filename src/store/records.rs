//! What the store reads and writes, independent of the backend.

use ctxgate_contract::{Audience, Role, SenderKind, SourceType};
use serde::Serialize;

use crate::domain::{Action, ConversationId, DeliveryId, MessageId, TaskId, TaskStatus, Usage};

/// A task to create with a trigger message.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub dedup_key: String,
    pub source_type: SourceType,
    pub agent: String,
    pub brain: String,
    pub max_attempts: u32,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TaskRecord {
    pub id: TaskId,
    pub conversation_id: ConversationId,
    pub message_id: Option<MessageId>,
    pub dedup_key: String,
    pub source_type: SourceType,
    pub agent: String,
    pub brain: String,
    pub status: TaskStatus,
    pub attempts: u32,
    pub max_attempts: u32,
    pub available_at: i64,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<i64>,
    pub last_error: Option<String>,
    pub result_text: Option<String>,
    pub actions: Vec<Action>,
    pub context: Option<serde_json::Value>,
    pub usage: Option<Usage>,
    pub triage_usage: Option<Usage>,
    pub cost: Option<f64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AttemptRecord {
    pub attempt: u32,
    pub worker: String,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub outcome: Option<String>,
    pub error: Option<String>,
}

/// A finished attempt: the answer, what it cost, and the delivery to enqueue.
#[derive(Debug, Clone)]
pub struct Completion {
    pub task_id: TaskId,
    pub worker: String,
    pub text: String,
    pub actions: Vec<Action>,
    pub usage: Usage,
    pub triage_usage: Option<Usage>,
    /// At the brain's configured prices, answer and triage together.
    pub cost: Option<f64>,
    pub context: serde_json::Value,
    pub delivery: Option<NewDelivery>,
    /// The brain session to remember for the task's conversation and agent.
    pub session: Option<SessionRecord>,
    /// A briefing with nothing to report: nothing delivered, nothing added to the history.
    pub silent: bool,
}

/// A brain's own session for one conversation and agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRecord {
    pub conversation_id: ConversationId,
    pub agent: String,
    pub brain: String,
    pub session_id: String,
    /// The newest message the session has been given.
    pub last_injected: MessageId,
    /// Digest of the system prompt the session was started with.
    pub prompt_hash: String,
    /// Input tokens the session has taken in since it started.
    pub input_tokens: u64,
    /// When the session started and was last used (unix ms; set by the store on write).
    pub started_at: i64,
    pub updated_at: i64,
    /// Set when the session must not be resumed (an admin reset).
    pub renew_reason: Option<String>,
}

/// What an agent is doing, from its tasks and sessions (`GET /admin/agents`).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct AgentActivity {
    pub agent: String,
    pub running: i64,
    pub pending: i64,
    /// The newest change to one of its tasks (unix ms).
    pub last_activity: Option<i64>,
    /// `completed` or `failed`: how its newest finished task ended.
    pub last_outcome: Option<String>,
    pub last_error: Option<String>,
    /// Brain sessions it keeps (one per conversation).
    pub sessions: i64,
    /// When its newest session started (unix ms).
    pub newest_session_started_at: Option<i64>,
    /// Input tokens of its largest session.
    pub max_session_input_tokens: i64,
}

#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub channel: String,
    pub idempotency_key: String,
    pub kind: String,
    pub text: String,
    pub reply_to: Option<String>,
    pub meta: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ConversationRecord {
    pub id: ConversationId,
    pub channel: String,
    pub external_id: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MessageRecord {
    pub id: MessageId,
    pub conversation_id: ConversationId,
    pub channel_message_id: String,
    pub sender_id: String,
    pub sender_name: Option<String>,
    pub sender_kind: SenderKind,
    pub role: Role,
    pub kind: String,
    pub text: String,
    pub created_at: i64,
    pub reply_to_channel_id: Option<String>,
    pub reply_to_message_id: Option<MessageId>,
    pub source_type: Option<SourceType>,
    pub task_id: Option<TaskId>,
    pub agent: Option<String>,
    pub audience: Audience,
    pub actions: Vec<Action>,
    pub meta: serde_json::Value,
    pub edited_at: Option<i64>,
    pub deleted_at: Option<i64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeliveryRecord {
    pub id: DeliveryId,
    pub task_id: Option<TaskId>,
    pub conversation_id: ConversationId,
    /// The conversation's id on the channel.
    pub conversation: String,
    pub channel: String,
    pub idempotency_key: String,
    pub kind: String,
    pub text: String,
    pub reply_to: Option<String>,
    pub meta: serde_json::Value,
    pub status: String,
    pub attempts: u32,
    pub available_at: i64,
    pub last_error: Option<String>,
    pub channel_message_id: Option<String>,
    pub created_at: i64,
    pub delivered_at: Option<i64>,
}

/// Filters of the task list; newest first, keyset-paged by id.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub status: Option<TaskStatus>,
    pub source_type: Option<SourceType>,
    pub channel: Option<String>,
    pub conversation: Option<ConversationId>,
    pub created_after: Option<i64>,
    pub created_before: Option<i64>,
    pub page: Page,
}

/// Keyset paging: items with an id below `before`, at most `limit`.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub before: Option<i64>,
    pub limit: usize,
}

impl Default for Page {
    fn default() -> Self {
        Self {
            before: None,
            limit: 50,
        }
    }
}

/// A stored schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleRecord {
    pub id: i64,
    pub name: String,
    /// `config` or `api`.
    pub source: String,
    pub spec: crate::config::ScheduleSpec,
    pub enabled: bool,
    pub next_fire_at: Option<i64>,
    pub consecutive_failures: u32,
    pub max_failures: u32,
    pub disabled_reason: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One fire of a schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleRun {
    pub id: i64,
    pub fire_at: i64,
    pub manual: bool,
    pub task_id: Option<TaskId>,
    pub outcome: String,
    pub detail: Option<String>,
    pub created_at: i64,
}

/// What firing a schedule does, in one transaction.
#[derive(Debug, Clone)]
pub struct Fire {
    pub schedule_id: i64,
    /// The fire time the schedule was due at (`next_fire_at`), or now for a manual run.
    pub fire_at: i64,
    pub manual: bool,
    /// The schedule's next fire time after this one (`None`: no more fires; disables it).
    pub next_fire_at: Option<i64>,
    /// The briefing to enqueue, or `None` to only record the run (skipped).
    pub briefing: Option<(ctxgate_contract::InboundEvent, NewTask)>,
    pub outcome: &'static str,
    pub detail: Option<String>,
}

/// How usage totals are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGroup {
    Conversation,
    /// The sender of the task's trigger message.
    User,
    /// UTC day of the task's creation.
    Day,
    Brain,
}

/// Token totals of one group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageRow {
    pub key: String,
    pub tasks: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub triage_prompt_tokens: u64,
    pub triage_completion_tokens: u64,
    /// Sum of the tasks' costs where their brains have prices.
    pub cost: f64,
}

/// Which part of a conversation's history a read covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bound {
    /// Only messages with a smaller id (stored earlier).
    pub before: Option<MessageId>,
    /// Only messages written at or before this time (unix ms).
    pub until_ms: Option<i64>,
    /// Also the answers to messages before `before`, even when they were stored after it (the
    /// context of a message sent while the assistant was still answering the previous one).
    pub with_later_answers: bool,
}

impl Bound {
    pub fn all() -> Self {
        Self::default()
    }

    pub fn before(id: MessageId) -> Self {
        Self {
            before: Some(id),
            until_ms: None,
            with_later_answers: false,
        }
    }
}

/// One full-text match in a conversation's archive.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveHit {
    pub message: MessageRecord,
    /// Relevance, higher is better (negated BM25).
    pub score: f64,
}
