//! The durable store: one interface, implemented for SQLite (and later PostgreSQL) without
//! touching callers. All times are unix milliseconds, passed in by the caller so that tests can
//! drive the clock.

pub mod copy;
mod open;
pub use open::{OpenedStore, display_url};
pub mod postgres;
mod records;
pub mod sqlite;

use async_trait::async_trait;
use ctxgate_contract::{InboundEvent, IntakeReceipt};

use crate::domain::{ConversationId, DeliveryId, MessageId, TaskId};
pub use records::*;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("invalid request: {0}")]
    Invalid(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    /// Why the store cannot take writes, when that is the error: the disk (or the database's
    /// quota) is full, or the database is read-only. Such errors clear by themselves once an
    /// operator frees space or makes the database writable; see `crate::health`.
    pub fn unwritable(&self) -> Option<&'static str> {
        let StoreError::Database(e) = self else {
            return None;
        };
        match e {
            sqlx::Error::Database(d) => {
                let code = d.code()?;
                match code.as_ref() {
                    // PostgreSQL: disk_full, read_only_sql_transaction.
                    "53100" => Some("disk_full"),
                    "25006" => Some("read_only"),
                    // SQLite result codes (extended ones keep the primary code in the low byte).
                    other => match other.parse::<i32>().ok()? & 0xff {
                        13 => Some("disk_full"),
                        8 => Some("read_only"),
                        _ => None,
                    },
                }
            }
            sqlx::Error::Io(io) if io.raw_os_error() == Some(28) => Some("disk_full"),
            _ => None,
        }
    }
}

/// Bytes [`Store::probe_write`] writes: about the largest message intake takes.
pub const PROBE_BYTES: usize = 128 * 1024;

/// A held lease on a duty (see `crate::duty`): exactly one instance drives what it names.
#[async_trait]
pub trait DutyLease: Send {
    /// Still held: false for good once the holder's database session is gone.
    async fn is_held(&mut self) -> bool;
    /// Gives the lease up now, so another instance can take it.
    async fn release(self: Box<Self>);
}

/// The lease of a store that serves one process (SQLite): always granted, never lost.
struct SoleLease;

#[async_trait]
impl DutyLease for SoleLease {
    async fn is_held(&mut self) -> bool {
        true
    }

    async fn release(self: Box<Self>) {}
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Cheap round trip, for readiness.
    async fn ping(&self) -> StoreResult<()>;

    /// A write of [`PROBE_BYTES`] (the `ctxgate`/`#probe` cursor): whether the store takes
    /// writes again after the disk was full or the database read-only.
    async fn probe_write(&self, now: i64) -> StoreResult<()>;

    /// Takes the lease `name` (a Talk account, a mailbox, the scheduler) if no instance holds
    /// it; `None` while another does. A store serving a single process always grants it.
    async fn try_lease(&self, name: &str) -> StoreResult<Option<Box<dyn DutyLease>>> {
        let _ = name;
        Ok(Some(Box::new(SoleLease)))
    }

    // --- intake -------------------------------------------------------------------------------

    /// Commits in ONE transaction: the message (or its edit/deletion), one task per agent asked
    /// to answer it (each deduplicated by its `dedup_key`), and the channel's cursor. The
    /// receipt names the first task.
    async fn ingest_tasks(
        &self,
        event: &InboundEvent,
        tasks: &[NewTask],
        now: i64,
    ) -> StoreResult<IntakeReceipt>;

    /// [`Store::ingest_tasks`] with at most one task.
    async fn ingest(
        &self,
        event: &InboundEvent,
        task: Option<&NewTask>,
        now: i64,
    ) -> StoreResult<IntakeReceipt> {
        let tasks = task.map(std::slice::from_ref).unwrap_or(&[]);
        self.ingest_tasks(event, tasks, now).await
    }

    /// Stores many events (no tasks) in one transaction, in order: history imports.
    async fn ingest_batch(&self, events: &[InboundEvent], now: i64) -> StoreResult<()>;

    async fn cursor(&self, channel: &str, scope: &str) -> StoreResult<Option<String>>;

    // --- tasks --------------------------------------------------------------------------------

    /// Claims the oldest due task of a conversation with no running task (tasks of one
    /// conversation run in order, one at a time). Expired leases are taken back first.
    async fn claim_task(
        &self,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<TaskRecord>>;

    /// Renews a lease; false when the task is no longer held by `worker`.
    async fn heartbeat_task(
        &self,
        id: TaskId,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<bool>;

    /// Completes a task held by `worker` and enqueues its delivery in the same transaction.
    /// False (and nothing written) when the lease was lost.
    async fn complete_task(&self, done: &Completion, now: i64) -> StoreResult<bool>;

    /// Ends an attempt that failed: back to pending at `retry_at`, or failed for good when
    /// `retry_at` is `None`. False when the lease was lost.
    async fn fail_attempt(
        &self,
        id: TaskId,
        worker: &str,
        error: &str,
        retry_at: Option<i64>,
        now: i64,
    ) -> StoreResult<bool>;

    /// Cancels a pending task; false when it is not pending.
    async fn cancel_task(&self, id: TaskId, now: i64) -> StoreResult<bool>;

    /// Sends a failed or cancelled task back to the queue with `extra_attempts` more attempts;
    /// false when it is neither.
    async fn retry_task(&self, id: TaskId, extra_attempts: u32, now: i64) -> StoreResult<bool>;

    /// Hands a running task back without counting the attempt (shutdown).
    async fn release_task(&self, id: TaskId, worker: &str, now: i64) -> StoreResult<bool>;

    async fn get_task(&self, id: TaskId) -> StoreResult<Option<TaskRecord>>;

    /// The brain session of a conversation's agent, if one is remembered.
    async fn get_session(
        &self,
        conversation: ConversationId,
        agent: &str,
    ) -> StoreResult<Option<SessionRecord>>;
    /// Marks an agent's brain sessions (or its session in one conversation) as not to be
    /// resumed: its next task starts a new session restored from the store. Returns how many.
    async fn reset_sessions(
        &self,
        agent: &str,
        conversation: Option<ConversationId>,
        reason: &str,
    ) -> StoreResult<u64>;

    /// Per agent with tasks or sessions: what it is doing and its sessions.
    async fn agent_activity(&self) -> StoreResult<Vec<AgentActivity>>;

    async fn list_tasks(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskRecord>>;
    async fn task_attempts(&self, id: TaskId) -> StoreResult<Vec<AttemptRecord>>;

    /// Work waiting: (pending tasks, running tasks, undelivered answers).
    async fn backlog(&self) -> StoreResult<(i64, i64, i64)>;

    /// Token totals of tasks created in `[since, until)` (unix ms), grouped.
    async fn usage_totals(
        &self,
        by: UsageGroup,
        since: Option<i64>,
        until: Option<i64>,
    ) -> StoreResult<Vec<UsageRow>>;

    // --- conversations and messages -----------------------------------------------------------

    async fn get_conversation(&self, id: ConversationId)
    -> StoreResult<Option<ConversationRecord>>;
    async fn list_conversations(&self, page: &Page) -> StoreResult<Vec<ConversationRecord>>;
    async fn get_message(&self, id: MessageId) -> StoreResult<Option<MessageRecord>>;

    /// A conversation by its channel and its id on that channel.
    async fn find_conversation(
        &self,
        channel: &str,
        external_id: &str,
    ) -> StoreResult<Option<ConversationRecord>>;

    /// A message by its id on the channel, within one conversation.
    async fn find_message(
        &self,
        conversation: ConversationId,
        channel_message_id: &str,
    ) -> StoreResult<Option<MessageRecord>>;

    /// The newest `limit` messages of a conversation with an id below `bound.before` and written
    /// at or before `bound.until_ms` (each bound optional), oldest first.
    async fn messages_before(
        &self,
        conversation: ConversationId,
        bound: Bound,
        limit: usize,
    ) -> StoreResult<Vec<MessageRecord>>;

    /// The newest `limit` delivered results of background tasks (briefings, scheduled jobs)
    /// within `bound`, oldest first.
    async fn background_results(
        &self,
        conversation: ConversationId,
        bound: Bound,
        limit: usize,
    ) -> StoreResult<Vec<MessageRecord>>;

    /// A context's lookback: [`Store::messages_before`] with `limit` and
    /// [`Store::background_results`] with `background_limit` (none when 0) over the same
    /// `bound`, in one round trip where the store can.
    async fn lookback(
        &self,
        conversation: ConversationId,
        bound: Bound,
        limit: usize,
        background_limit: usize,
    ) -> StoreResult<(Vec<MessageRecord>, Vec<MessageRecord>)> {
        let window = self.messages_before(conversation, bound, limit).await?;
        let background = if background_limit > 0 {
            self.background_results(conversation, bound, background_limit)
                .await?
        } else {
            Vec::new()
        };
        Ok((window, background))
    }

    /// Full-text search of one conversation's archive within `bound`: the best `limit` matches
    /// of an FTS5 query, best first, with a relevance score (higher is better).
    async fn archive_search(
        &self,
        conversation: ConversationId,
        fts_query: &str,
        bound: Bound,
        limit: usize,
    ) -> StoreResult<Vec<ArchiveHit>>;

    /// Up to `n` messages on each side of `id` in its conversation, oldest first (without it).
    async fn neighbours(
        &self,
        conversation: ConversationId,
        id: MessageId,
        n: usize,
    ) -> StoreResult<Vec<MessageRecord>>;

    // --- outbox -------------------------------------------------------------------------------

    /// Claims the oldest due delivery. Deliveries whose claimant died return to the queue, or
    /// fail when they used `max_attempts`.
    async fn claim_delivery(
        &self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        max_attempts: u32,
    ) -> StoreResult<Option<DeliveryRecord>>;

    /// Marks a delivery done and records the delivered answer into the conversation history,
    /// in one transaction.
    async fn delivery_succeeded(
        &self,
        id: DeliveryId,
        owner: &str,
        channel_message_id: Option<&str>,
        now: i64,
    ) -> StoreResult<bool>;

    /// Back to pending at `retry_at`, or failed for good when `None`.
    async fn delivery_failed(
        &self,
        id: DeliveryId,
        owner: &str,
        error: &str,
        retry_at: Option<i64>,
        now: i64,
    ) -> StoreResult<bool>;

    async fn deliveries_for_task(&self, task: TaskId) -> StoreResult<Vec<DeliveryRecord>>;

    /// The external id of the conversation on `channel` holding a message with this channel
    /// message id (received, or sent and recorded by a delivery).
    async fn conversation_of_message(
        &self,
        channel: &str,
        channel_message_id: &str,
    ) -> StoreResult<Option<String>>;

    /// Inbound messages recorded without an answer because of a policy (`meta.skipped`), newest
    /// first, optionally for one channel instance, keyset-paged by id.
    async fn skipped_messages(
        &self,
        channel: Option<&str>,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<MessageRecord>>;

    /// Queues an extra delivery for a running task (an acknowledgement); once per key.
    async fn enqueue_delivery(
        &self,
        task: TaskId,
        delivery: &NewDelivery,
        now: i64,
    ) -> StoreResult<bool>;

    // --- schedules ----------------------------------------------------------------------------

    /// Creates a schedule, or updates the definition of the one with that name (keeping its
    /// history; `next_fire_at` is replaced only when given).
    async fn put_schedule(
        &self,
        spec: &crate::config::ScheduleSpec,
        source: &str,
        next_fire_at: Option<i64>,
        max_failures: u32,
        now: i64,
    ) -> StoreResult<ScheduleRecord>;

    async fn list_schedules(&self) -> StoreResult<Vec<ScheduleRecord>>;
    async fn get_schedule(&self, id: i64) -> StoreResult<Option<ScheduleRecord>>;
    async fn delete_schedule(&self, id: i64) -> StoreResult<bool>;

    /// Enables (with a new next fire time) or disables a schedule, with a reason.
    async fn set_schedule_enabled(
        &self,
        id: i64,
        enabled: bool,
        next_fire_at: Option<i64>,
        reason: Option<&str>,
        now: i64,
    ) -> StoreResult<bool>;

    /// Enabled schedules due at `now`, oldest fire first.
    async fn due_schedules(&self, now: i64, limit: usize) -> StoreResult<Vec<ScheduleRecord>>;

    /// Fires a schedule in one transaction: the briefing (message + task), the run record and
    /// the next fire time. A scheduled fire happens only if the schedule is still due at that
    /// fire time (so two loops, or a restart, never fire it twice); returns the task created.
    async fn fire_schedule(&self, fire: &Fire, now: i64) -> StoreResult<Option<Option<TaskId>>>;

    async fn schedule_runs(&self, id: i64, page: &Page) -> StoreResult<Vec<ScheduleRun>>;
}
