//! Schemas of the admin API's JSON answers, for the OpenAPI document only.
//!
//! The handlers serialize the store's records (`crate::store::records`) and build envelopes with
//! `json!`; these types describe that JSON and are never built. `tests/it/openapi.rs` checks real
//! answers against them: every key an answer has must be described here, and every required one
//! present, so a field added to a record fails that test until it is added here too.
#![allow(dead_code)]

use serde_json::Value;
use utoipa::ToSchema;

/// A task's lifecycle: pending → running → completed | failed | cancelled.
#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    Running,
    Completed,
    Failed,
    Cancelled,
}

#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    System,
}

/// Tokens spent by one brain call.
#[derive(ToSchema)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Something the assistant did while answering (a tool use).
#[derive(ToSchema)]
pub struct Action {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A task of the durable queue: one answer (or briefing) to produce. Times are unix ms.
#[derive(ToSchema)]
pub struct Task {
    pub id: i64,
    pub conversation_id: i64,
    /// The trigger message.
    pub message_id: Option<i64>,
    pub dedup_key: String,
    /// `webhook`, `talk`, `email`, `briefing`, `scheduled`, `heartbeat`, `subtask`, `admin`,
    /// `import`.
    pub source_type: String,
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
    /// The context the answer was given, with the reason for every message (as the context
    /// preview shows it).
    pub context: Option<Value>,
    pub usage: Option<Usage>,
    pub triage_usage: Option<Usage>,
    /// At the brain's configured prices.
    pub cost: Option<f64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
}

/// One attempt of a task at a worker.
#[derive(ToSchema)]
pub struct Attempt {
    pub attempt: u32,
    pub worker: String,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub outcome: Option<String>,
    pub error: Option<String>,
}

/// An answer in the outbox, and how its delivery went.
#[derive(ToSchema)]
pub struct Delivery {
    pub id: i64,
    pub task_id: Option<i64>,
    pub conversation_id: i64,
    /// The conversation's id on the channel.
    pub conversation: String,
    pub channel: String,
    pub idempotency_key: String,
    pub kind: String,
    pub text: String,
    pub reply_to: Option<String>,
    pub meta: Value,
    pub status: String,
    pub attempts: u32,
    pub available_at: i64,
    pub last_error: Option<String>,
    pub channel_message_id: Option<String>,
    pub created_at: i64,
    pub delivered_at: Option<i64>,
}

/// Who may see a message in a shared conversation.
#[derive(ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Audience {
    Everyone,
    Addressed {
        #[serde(default)]
        agents: Vec<String>,
        #[serde(default)]
        users: Vec<String>,
    },
}

/// A stored message of a conversation's history.
#[derive(ToSchema)]
pub struct Message {
    pub id: i64,
    pub conversation_id: i64,
    pub channel_message_id: String,
    pub sender_id: String,
    pub sender_name: Option<String>,
    /// `user`, `guest`, `bot`, `self_bot`, `system`.
    pub sender_kind: String,
    pub role: Role,
    /// `message`, or an acknowledgement or progress post.
    pub kind: String,
    pub text: String,
    pub created_at: i64,
    pub reply_to_channel_id: Option<String>,
    pub reply_to_message_id: Option<i64>,
    pub source_type: Option<String>,
    pub task_id: Option<i64>,
    pub agent: Option<String>,
    pub audience: Audience,
    pub actions: Vec<Action>,
    pub meta: Value,
    pub edited_at: Option<i64>,
    pub deleted_at: Option<i64>,
}

/// A conversation: one Talk room, e-mail thread or webhook conversation.
#[derive(ToSchema)]
pub struct Conversation {
    pub id: i64,
    /// The channel instance, such as `webhook:default` or `talk:main`.
    pub channel: String,
    /// The conversation's id on the channel.
    pub external_id: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Where a schedule's result is delivered.
#[derive(ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// A conversation of an enabled webhook; the result is POSTed to `callback_url` when given.
    Webhook {
        webhook: String,
        conversation: String,
        #[serde(default)]
        callback_url: Option<String>,
    },
    /// A room of a configured Talk account.
    Talk {
        #[serde(default)]
        #[schema(default = "main")]
        account: String,
        room: String,
    },
    /// An e-mail address, sent from a configured mailbox.
    Email {
        #[serde(default)]
        #[schema(default = "main")]
        account: String,
        to: String,
    },
}

/// A schedule's definition: the body of `POST` and `PUT /admin/schedules…`, and `spec` of a
/// schedule. Unknown fields are refused.
#[derive(ToSchema)]
#[schema(examples(json!({
    "name": "morning",
    "cron": "30 8 * * 1-5",
    "timezone": "Europe/Berlin",
    "prompt": "Plan my day.",
    "target": {"kind": "webhook", "webhook": "default", "conversation": "me"}
})))]
pub struct ScheduleSpec {
    /// Unique; cannot change in `PUT`.
    pub name: String,
    /// 5 fields (`min hour day month weekday`), or 6–7 with seconds first.
    pub cron: String,
    /// IANA time zone the expression is read in.
    #[serde(default)]
    #[schema(default = "UTC")]
    pub timezone: String,
    /// What the brain is asked; required through the API.
    pub prompt: Option<String>,
    /// Only in the configuration file.
    pub prompt_file: Option<String>,
    pub target: Target,
    /// A configured brain.
    #[serde(default)]
    #[schema(default = "default")]
    pub brain: String,
    #[serde(default)]
    #[schema(default = true)]
    pub enabled: bool,
    /// Runs once, then disables itself.
    #[serde(default)]
    pub one_shot: bool,
    /// Deliver nothing when the brain answers the scheduler's silent token.
    #[serde(default)]
    pub silent_unless_news: bool,
}

/// A stored schedule.
#[derive(ToSchema)]
pub struct Schedule {
    pub id: i64,
    pub name: String,
    /// `config` or `api`.
    pub source: String,
    pub spec: ScheduleSpec,
    pub enabled: bool,
    pub next_fire_at: Option<i64>,
    pub consecutive_failures: u32,
    pub max_failures: u32,
    pub disabled_reason: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One fire of a schedule.
#[derive(ToSchema)]
pub struct ScheduleRun {
    pub id: i64,
    pub fire_at: i64,
    /// Started through `POST /admin/schedules/{id}/run`.
    pub manual: bool,
    pub task_id: Option<i64>,
    pub outcome: String,
    pub detail: Option<String>,
    pub created_at: i64,
}

/// Token totals of one group.
#[derive(ToSchema)]
pub struct UsageRow {
    /// The conversation id, user, UTC day (`2026-01-05`) or brain.
    pub key: String,
    pub tasks: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub triage_prompt_tokens: u64,
    pub triage_completion_tokens: u64,
    /// Sum of the tasks' costs where their brains have prices.
    pub cost: f64,
}

/// A page of tasks, newest first.
#[derive(ToSchema)]
pub struct TaskPage {
    pub items: Vec<Task>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<i64>,
}

/// A task with what it was asked and what became of it.
#[derive(ToSchema)]
pub struct TaskDetail {
    pub task: Task,
    /// The message that triggered it.
    pub trigger: Option<Message>,
    pub attempts: Vec<Attempt>,
    pub deliveries: Vec<Delivery>,
}

/// The task after the change.
#[derive(ToSchema)]
pub struct TaskChanged {
    pub task: Task,
}

#[derive(ToSchema)]
pub struct UsageList {
    pub items: Vec<UsageRow>,
}

/// The effective configuration (the shape of `config/default.toml`), every secret shown as
/// `"[redacted]"`.
#[derive(ToSchema)]
#[schema(value_type = Object)]
pub struct Config(Value);

/// A page of conversations, newest first.
#[derive(ToSchema)]
pub struct ConversationPage {
    pub items: Vec<Conversation>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<i64>,
}

/// A page of history: oldest first within the page; `next_cursor` pages further back.
#[derive(ToSchema)]
pub struct MessagePage {
    pub items: Vec<Message>,
    /// Pass as `cursor` for the page before; `null` at the start of the conversation.
    pub next_cursor: Option<i64>,
}

/// A message the context would include, and why.
#[derive(ToSchema)]
pub struct SelectedMessage {
    pub id: i64,
    pub channel_message_id: String,
    pub role: Role,
    /// The name the prompt shows.
    pub speaker: String,
    pub created_at: i64,
    /// `recent`, `relevant`, `fail_open`, `reply_parent`, `briefing`, `archive`, …
    pub reason: String,
    pub tokens: u64,
    /// As the prompt would show it.
    pub text: String,
}

/// A candidate left out, and why (`dropped_by_budget`, `dropped_by_triage`, `excluded_…`).
#[derive(ToSchema)]
pub struct LeftOut {
    pub id: i64,
    pub reason: String,
}

/// The context a new message would get now.
#[derive(ToSchema)]
pub struct ContextPreview {
    pub conversation_id: i64,
    /// In conversation order.
    pub selected: Vec<SelectedMessage>,
    pub left_out: Vec<LeftOut>,
    pub tokens: u64,
    pub budget: Option<u64>,
    /// Tokens the triage call spent, when it ran.
    pub triage_usage: Option<Usage>,
    /// What happened along the way (triage failed open, budget exceeded…).
    pub notes: Vec<String>,
}

#[derive(ToSchema)]
pub struct ScheduleList {
    pub items: Vec<Schedule>,
}

/// Runs of a schedule, newest first.
#[derive(ToSchema)]
pub struct RunPage {
    pub items: Vec<ScheduleRun>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<i64>,
}

/// The briefing task a manual run queued (`null` when the run was recorded as skipped).
#[derive(ToSchema)]
pub struct RunStarted {
    pub task_id: Option<i64>,
}

/// A configured channel instance and how it is doing. Which fields are present depends on
/// `kind`.
#[derive(ToSchema)]
pub struct Channel {
    /// Such as `webhook:default`, `talk:main`, `email:main`.
    pub channel: String,
    /// `webhook`, `talk` or `email`.
    pub kind: String,
    pub enabled: bool,
    /// Webhooks: whether answers are delivered (a callback is possible).
    pub delivers: Option<bool>,
    /// Talk: `poll` or `bot`.
    pub mode: Option<String>,
    /// Talk: the Nextcloud server.
    pub base_url: Option<String>,
    /// Talk in poll mode: rooms, last poll, lag, errors and backoff (`null` until the poller
    /// runs).
    pub poller: Option<Value>,
    /// E-mail: the address answers come from.
    pub address: Option<String>,
    /// E-mail: the IMAP mailbox watched.
    pub mailbox: Option<String>,
    /// E-mail: last poll, errors and backoff (`null` until the tracker runs).
    pub tracker: Option<Value>,
    /// Talk in poll mode and e-mail: whether this instance holds the lease and drives the
    /// poller or tracker (with several instances on one PostgreSQL, exactly one does).
    pub lease: Option<crate::duty::LeaseStatus>,
}

#[derive(ToSchema)]
pub struct ChannelList {
    pub channels: Vec<Channel>,
}

/// An inbound message recorded without an answer.
#[derive(ToSchema)]
pub struct Skipped {
    /// Why: a loop guard, the sender policy, a rate limit, unreadable mail…
    pub reason: Value,
    pub message: Message,
}

/// Skipped inbound messages, newest first.
#[derive(ToSchema)]
pub struct SkippedPage {
    pub items: Vec<Skipped>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<i64>,
}
