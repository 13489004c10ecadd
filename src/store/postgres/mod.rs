//! PostgreSQL implementation of [`Store`], for several ctxgate instances sharing one database.
//!
//! One pool serves reads and writes (PostgreSQL has real row locks, so nothing is queued
//! in-process as for SQLite). Work is shared safely between instances by the database alone:
//! tasks and deliveries are claimed with `FOR UPDATE SKIP LOCKED`, intake and schedule fires
//! are idempotent upserts, and [`lock::Lease`] (a session advisory lock) lets exactly one
//! instance drive a poller or the scheduler. Queries are checked at run time (`sqlx::query`):
//! the compile-time macros cannot check one query against two databases.

mod fts;
mod intake;
pub mod lock;
mod outbox;
mod read;
mod rows;
mod schedules;
mod tasks;

use std::str::FromStr;

use async_trait::async_trait;
use ctxgate_contract::{InboundEvent, IntakeReceipt};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection};

use super::*;
use crate::config::StoreSettings;
pub use lock::Lease;

#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// How to open a connection of its own (migrations, leases).
    options: PgConnectOptions,
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Times a transaction that PostgreSQL aborted (deadlock, serialization failure) is run again.
const TRANSIENT_RETRIES: u32 = 3;

/// Whether `url` names a PostgreSQL database (`postgres://…` or `postgresql://…`), i.e. the
/// store to open is a [`PgStore`].
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl PgStore {
    /// Connects to the database named by `url` (`postgres://user:password@host:port/db`,
    /// libpq-style parameters allowed). Does not migrate.
    ///
    /// From `settings`: `busy_timeout` is how long a statement waits for a lock held by another
    /// session (`lock_timeout`, as SQLite's busy timeout); `read_connections` sizes the pool
    /// (twice that plus two: SQLite's readers, plus the writers SQLite queues through its one
    /// write connection). `synchronous` has no meaning here: a commit is durable when it
    /// returns (the server's `synchronous_commit` decides).
    pub async fn connect(url: &str, settings: &StoreSettings) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(url)?.application_name("ctxgate");
        let lock_timeout = format!("{}ms", settings.busy_timeout.as_millis().max(1));
        let pool = PgPoolOptions::new()
            .max_connections(settings.read_connections.max(1) * 2 + 2)
            .connect_with(
                options
                    .clone()
                    .options([("lock_timeout", lock_timeout.as_str())]),
            )
            .await?;
        Ok(Self { pool, options })
    }

    /// Applies pending migrations from `migrations/postgres/`; returns how many ran. Several
    /// instances may start at once: sqlx holds an advisory lock while migrating, and this
    /// connection waits for it without the pool's `lock_timeout`.
    pub async fn migrate(&self) -> StoreResult<usize> {
        let mut conn = self.options.connect().await?;
        let before = applied(&mut conn).await;
        let ran = MIGRATOR.run(&mut conn).await;
        let after = applied(&mut conn).await;
        conn.close().await?;
        ran?;
        Ok(after.saturating_sub(before))
    }

    /// Migrations not applied yet.
    pub async fn pending_migrations(&self) -> StoreResult<usize> {
        let mut conn = self.pool.acquire().await?;
        Ok(MIGRATOR
            .iter()
            .count()
            .saturating_sub(applied(&mut conn).await))
    }

    /// Takes the named lease if no one holds it (see [`Lease`]); `None` when another session
    /// (this process or another instance) has it.
    pub async fn try_lease(&self, name: &str) -> StoreResult<Option<Lease>> {
        Lease::try_acquire(&self.options, name).await
    }

    /// The pool, for tools that copy data in bulk (`ctxgate migrate --to`).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes the pool (waits for connections in use to come back).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

async fn applied(conn: &mut PgConnection) -> usize {
    // A fresh database has no migrations table yet: none applied.
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await
        .unwrap_or(false);
    if !exists {
        return 0;
    }
    sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(conn)
        .await
        .map(|n| n as usize)
        .unwrap_or(0)
}

/// Runs `attempt` (one whole transaction) again when PostgreSQL aborted it to break a deadlock
/// or a serialization conflict: nothing of it was committed, so running it again is safe.
async fn retrying<T, F, Fut>(mut attempt: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    let mut left = TRANSIENT_RETRIES;
    loop {
        match attempt().await {
            Err(e) if left > 0 && is_transient(&e) => left -= 1,
            done => return done,
        }
    }
}

fn is_transient(e: &StoreError) -> bool {
    sqlstate(e).is_some_and(|code| code == "40P01" || code == "40001")
}

fn sqlstate(e: &StoreError) -> Option<String> {
    match e {
        StoreError::Database(sqlx::Error::Database(d)) => d.code().map(|c| c.into_owned()),
        _ => None,
    }
}

#[async_trait]
impl Store for PgStore {
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn probe_write(&self, now: i64) -> StoreResult<()> {
        // As large as the largest message intake takes, so a nearly full disk that still
        // takes tiny writes does not pass for one that takes work again; then made small.
        for value in ["#".repeat(PROBE_BYTES), now.to_string()] {
            sqlx::query(
                "INSERT INTO cursors (channel, scope, value, updated_at)
                 VALUES ('ctxgate', '#probe', $1, $2)
                 ON CONFLICT (channel, scope) DO UPDATE SET value = excluded.value,
                     updated_at = excluded.updated_at",
            )
            .bind(value)
            .bind(now)
            .execute(&self.pool)
            .await?;
        }
        Ok(())
    }

    async fn try_lease(&self, name: &str) -> StoreResult<Option<Box<dyn DutyLease>>> {
        Ok(Lease::try_acquire(&self.options, name)
            .await?
            .map(|l| Box::new(l) as Box<dyn DutyLease>))
    }

    async fn ingest_tasks(
        &self,
        event: &InboundEvent,
        tasks: &[NewTask],
        now: i64,
    ) -> StoreResult<IntakeReceipt> {
        self.ingest_tx(event, tasks, now).await
    }

    async fn ingest_batch(&self, events: &[InboundEvent], now: i64) -> StoreResult<()> {
        self.ingest_batch_tx(events, now).await
    }

    async fn cursor(&self, channel: &str, scope: &str) -> StoreResult<Option<String>> {
        self.cursor_value(channel, scope).await
    }

    async fn claim_task(
        &self,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<TaskRecord>> {
        self.claim_task_tx(worker, now, lease_ms).await
    }

    async fn heartbeat_task(
        &self,
        id: TaskId,
        worker: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<bool> {
        self.heartbeat(id, worker, now, lease_ms).await
    }

    async fn complete_task(&self, done: &Completion, now: i64) -> StoreResult<bool> {
        self.complete_tx(done, now).await
    }

    async fn fail_attempt(
        &self,
        id: TaskId,
        worker: &str,
        error: &str,
        retry_at: Option<i64>,
        now: i64,
    ) -> StoreResult<bool> {
        self.fail_tx(id, worker, error, retry_at, now).await
    }

    async fn cancel_task(&self, id: TaskId, now: i64) -> StoreResult<bool> {
        self.cancel_tx(id, now).await
    }

    async fn retry_task(&self, id: TaskId, extra_attempts: u32, now: i64) -> StoreResult<bool> {
        self.retry_tx(id, extra_attempts, now).await
    }

    async fn release_task(&self, id: TaskId, worker: &str, now: i64) -> StoreResult<bool> {
        self.release_tx(id, worker, now).await
    }

    async fn get_task(&self, id: TaskId) -> StoreResult<Option<TaskRecord>> {
        self.task_by_id(id).await
    }

    async fn get_session(
        &self,
        conversation: ConversationId,
        agent: &str,
    ) -> StoreResult<Option<SessionRecord>> {
        self.session_of(conversation, agent).await
    }

    async fn reset_sessions(
        &self,
        agent: &str,
        conversation: Option<ConversationId>,
        reason: &str,
    ) -> StoreResult<u64> {
        self.reset_sessions_tx(agent, conversation, reason).await
    }

    async fn agent_activity(&self) -> StoreResult<Vec<AgentActivity>> {
        self.agent_activity_all().await
    }

    async fn list_tasks(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskRecord>> {
        self.tasks_filtered(filter).await
    }

    async fn task_attempts(&self, id: TaskId) -> StoreResult<Vec<AttemptRecord>> {
        self.attempts_of(id).await
    }

    async fn backlog(&self) -> StoreResult<(i64, i64, i64)> {
        Ok(sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM tasks WHERE status = 'pending'),
                    (SELECT COUNT(*) FROM tasks WHERE status = 'running'),
                    (SELECT COUNT(*) FROM outbox WHERE status IN ('pending', 'delivering'))",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    async fn usage_totals(
        &self,
        by: UsageGroup,
        since: Option<i64>,
        until: Option<i64>,
    ) -> StoreResult<Vec<UsageRow>> {
        self.usage(by, since, until).await
    }

    async fn get_conversation(
        &self,
        id: ConversationId,
    ) -> StoreResult<Option<ConversationRecord>> {
        self.conversation_by_id(id).await
    }

    async fn list_conversations(&self, page: &Page) -> StoreResult<Vec<ConversationRecord>> {
        self.conversations_page(page).await
    }

    async fn get_message(&self, id: MessageId) -> StoreResult<Option<MessageRecord>> {
        self.message_by_id(id).await
    }

    async fn find_conversation(
        &self,
        channel: &str,
        external_id: &str,
    ) -> StoreResult<Option<ConversationRecord>> {
        self.conversation_by_key(channel, external_id).await
    }

    async fn find_message(
        &self,
        conversation: ConversationId,
        channel_message_id: &str,
    ) -> StoreResult<Option<MessageRecord>> {
        self.message_by_channel_id(conversation, channel_message_id)
            .await
    }

    async fn messages_before(
        &self,
        conversation: ConversationId,
        bound: Bound,
        limit: usize,
    ) -> StoreResult<Vec<MessageRecord>> {
        self.messages_page(conversation, bound, false, limit).await
    }

    async fn background_results(
        &self,
        conversation: ConversationId,
        bound: Bound,
        limit: usize,
    ) -> StoreResult<Vec<MessageRecord>> {
        self.messages_page(conversation, bound, true, limit).await
    }

    async fn archive_search(
        &self,
        conversation: ConversationId,
        fts_query: &str,
        bound: Bound,
        limit: usize,
    ) -> StoreResult<Vec<ArchiveHit>> {
        self.search(conversation, fts_query, bound, limit).await
    }

    async fn neighbours(
        &self,
        conversation: ConversationId,
        id: MessageId,
        n: usize,
    ) -> StoreResult<Vec<MessageRecord>> {
        self.around(conversation, id, n).await
    }

    async fn claim_delivery(
        &self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        max_attempts: u32,
    ) -> StoreResult<Option<DeliveryRecord>> {
        self.claim_delivery_tx(owner, now, lease_ms, max_attempts)
            .await
    }

    async fn delivery_succeeded(
        &self,
        id: DeliveryId,
        owner: &str,
        channel_message_id: Option<&str>,
        now: i64,
    ) -> StoreResult<bool> {
        self.delivered_tx(id, owner, channel_message_id, now).await
    }

    async fn delivery_failed(
        &self,
        id: DeliveryId,
        owner: &str,
        error: &str,
        retry_at: Option<i64>,
        now: i64,
    ) -> StoreResult<bool> {
        self.delivery_failed_tx(id, owner, error, retry_at, now)
            .await
    }

    async fn deliveries_for_task(&self, task: TaskId) -> StoreResult<Vec<DeliveryRecord>> {
        self.deliveries_of(task).await
    }

    async fn conversation_of_message(
        &self,
        channel: &str,
        channel_message_id: &str,
    ) -> StoreResult<Option<String>> {
        self.conversation_holding(channel, channel_message_id).await
    }

    async fn skipped_messages(
        &self,
        channel: Option<&str>,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<MessageRecord>> {
        self.skipped(channel, before, limit).await
    }

    async fn enqueue_delivery(
        &self,
        task: TaskId,
        delivery: &NewDelivery,
        now: i64,
    ) -> StoreResult<bool> {
        self.enqueue_tx(task, delivery, now).await
    }

    async fn put_schedule(
        &self,
        spec: &crate::config::ScheduleSpec,
        source: &str,
        next_fire_at: Option<i64>,
        max_failures: u32,
        now: i64,
    ) -> StoreResult<ScheduleRecord> {
        self.put_schedule_tx(spec, source, next_fire_at, max_failures, now)
            .await
    }

    async fn list_schedules(&self) -> StoreResult<Vec<ScheduleRecord>> {
        self.schedules_all().await
    }

    async fn get_schedule(&self, id: i64) -> StoreResult<Option<ScheduleRecord>> {
        self.schedule_by_id(id).await
    }

    async fn delete_schedule(&self, id: i64) -> StoreResult<bool> {
        self.delete_schedule_tx(id).await
    }

    async fn set_schedule_enabled(
        &self,
        id: i64,
        enabled: bool,
        next_fire_at: Option<i64>,
        reason: Option<&str>,
        now: i64,
    ) -> StoreResult<bool> {
        self.set_enabled_tx(id, enabled, next_fire_at, reason, now)
            .await
    }

    async fn due_schedules(&self, now: i64, limit: usize) -> StoreResult<Vec<ScheduleRecord>> {
        self.due(now, limit).await
    }

    async fn fire_schedule(&self, fire: &Fire, now: i64) -> StoreResult<Option<Option<TaskId>>> {
        self.fire_tx(fire, now).await
    }

    async fn schedule_runs(&self, id: i64, page: &Page) -> StoreResult<Vec<ScheduleRun>> {
        self.runs(id, page).await
    }
}
