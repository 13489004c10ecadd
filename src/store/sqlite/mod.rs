//! SQLite implementation of [`Store`]: WAL, a busy timeout, foreign keys on, and all writes
//! through one connection (SQLite has one writer anyway; queueing in-process avoids lock
//! contention), reads through a small pool.

mod intake;
mod outbox;
mod read;
mod rows;
mod schedules;
mod tasks;

use std::path::Path;
use std::str::FromStr;

use async_trait::async_trait;
use ctxgate_contract::{InboundEvent, IntakeReceipt};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::*;
use crate::config::{StoreSettings, Synchronous};

#[derive(Clone)]
pub struct SqliteStore {
    write: SqlitePool,
    read: SqlitePool,
    ingest_queue: intake::IngestQueue,
    /// The folder of the database file (`None` in memory): its free space decides when a
    /// full disk counts as writable again.
    folder: Option<std::path::PathBuf>,
}

/// After the disk was full, the store counts as writable again only with this much free space
/// on the database's filesystem, so that it does not flap between full and not.
const MIN_FREE_BYTES: u64 = 16 * 1024 * 1024;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// Whether the write connection is fit to be used again: outside any transaction, both in
/// sqlx's count and in SQLite's. A failed COMMIT (a full disk, an I/O error) may have rolled the
/// transaction back in SQLite already; sqlx's own ROLLBACK then fails and its count stays at one,
/// so the next `begin` would open a savepoint whose release commits nothing — later writes would
/// be acknowledged yet never reach the file. Such a connection is closed (SQLite rolls back
/// whatever it still holds) and the pool opens a fresh one.
async fn clean(conn: &mut sqlx::SqliteConnection) -> bool {
    use sqlx::{Connection, Executor};
    if conn.is_in_transaction() {
        tracing::warn!("closing the SQLite write connection: a transaction was left open");
        return false;
    }
    // BEGIN fails inside a transaction SQLite holds but sqlx does not know about.
    match conn.execute("BEGIN").await {
        Ok(_) => conn.execute("ROLLBACK").await.is_ok(),
        Err(e) => {
            tracing::warn!(error = %e, "closing the SQLite write connection: a transaction was left open");
            false
        }
    }
}

impl SqliteStore {
    /// Opens (creating if missing) the database named by `settings.url`. Does not migrate.
    pub async fn connect(settings: &StoreSettings) -> StoreResult<Self> {
        let memory = settings.url.contains(":memory:") || settings.url.contains("mode=memory");
        let mut options = SqliteConnectOptions::from_str(&settings.url)?
            .create_if_missing(true)
            .foreign_keys(true)
            .busy_timeout(settings.busy_timeout)
            .synchronous(match settings.synchronous {
                Synchronous::Normal => SqliteSynchronous::Normal,
                Synchronous::Full => SqliteSynchronous::Full,
            });
        if memory {
            // One connection holds the whole in-memory database: keep it forever.
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                // A connection to a local database cannot go stale: no ping before each use.
                .test_before_acquire(false)
                .connect_with(options)
                .await?;
            return Ok(Self {
                ingest_queue: intake::spawn_writer(pool.clone()),
                write: pool.clone(),
                read: pool,
                folder: None,
            });
        }
        let file = Path::new(options.get_filename());
        let folder = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        if let Some(parent) = file.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|e| {
                StoreError::Invalid(format!(
                    "cannot create the database folder {}: {e}",
                    parent.display()
                ))
            })?;
        }
        options = options.journal_mode(SqliteJournalMode::Wal);
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .after_release(|conn, _| Box::pin(async move { Ok(clean(conn).await) }))
            .connect_with(options.clone())
            .await?;
        let read = SqlitePoolOptions::new()
            .max_connections(settings.read_connections)
            .test_before_acquire(false)
            .connect_with(options)
            .await?;
        Ok(Self {
            ingest_queue: intake::spawn_writer(write.clone()),
            write,
            read,
            folder: Some(folder),
        })
    }

    /// Applies pending migrations from `migrations/sqlite/`; returns how many ran.
    pub async fn migrate(&self) -> StoreResult<usize> {
        let before = applied(&self.write).await;
        MIGRATOR.run(&self.write).await?;
        Ok(applied(&self.write).await.saturating_sub(before))
    }

    /// Migrations not applied yet.
    pub async fn pending_migrations(&self) -> StoreResult<usize> {
        Ok(MIGRATOR
            .iter()
            .count()
            .saturating_sub(applied(&self.write).await))
    }

    /// Closes both pools (checkpointing the WAL).
    pub async fn close(&self) {
        self.read.close().await;
        self.write.close().await;
    }
}

async fn applied(pool: &SqlitePool) -> usize {
    sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM _sqlx_migrations WHERE success = 1")
        .fetch_one(pool)
        .await
        .map(|n| n as usize)
        .unwrap_or(0)
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
    }

    async fn probe_write(&self, now: i64) -> StoreResult<()> {
        if let Some(folder) = &self.folder
            && let Ok(fs) = rustix::fs::statvfs(folder)
        {
            let free = fs.f_bavail.saturating_mul(fs.f_frsize);
            if free < MIN_FREE_BYTES {
                return Err(StoreError::Database(sqlx::Error::Io(
                    std::io::Error::from_raw_os_error(28),
                )));
            }
        }
        // As large as the largest message intake takes, so a nearly full disk that still
        // takes tiny writes does not pass for one that takes work again; then made small.
        for value in ["#".repeat(PROBE_BYTES), now.to_string()] {
            sqlx::query(
                "INSERT INTO cursors (channel, scope, value, updated_at)
                 VALUES ('ctxgate', '#probe', ?1, ?2)
                 ON CONFLICT (channel, scope) DO UPDATE SET value = excluded.value,
                     updated_at = excluded.updated_at",
            )
            .bind(value)
            .bind(now)
            .execute(&self.write)
            .await?;
        }
        Ok(())
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
        let mut tx = self.write.begin().await?;
        let done = sqlx::query(
            "UPDATE tasks SET status = 'cancelled', finished_at = ?1, updated_at = ?1
             WHERE id = ?2 AND status = 'pending'",
        )
        .bind(now)
        .bind(id.0)
        .execute(&mut *tx)
        .await?;
        sqlx::query("UPDATE schedule_runs SET outcome = 'cancelled' WHERE task_id = ?1")
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    async fn retry_task(&self, id: TaskId, extra_attempts: u32, now: i64) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE tasks SET status = 'pending', available_at = ?1, finished_at = NULL,
                 max_attempts = attempts + ?2, updated_at = ?1
             WHERE id = ?3 AND status IN ('failed', 'cancelled')",
        )
        .bind(now)
        .bind(extra_attempts as i64)
        .bind(id.0)
        .execute(&self.write)
        .await?;
        Ok(done.rows_affected() == 1)
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
        .fetch_one(&self.read)
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

    async fn lookback(
        &self,
        conversation: ConversationId,
        bound: Bound,
        limit: usize,
        background_limit: usize,
    ) -> StoreResult<(Vec<MessageRecord>, Vec<MessageRecord>)> {
        self.lookback_pages(conversation, bound, limit, background_limit)
            .await
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
        Ok(sqlx::query_scalar(
            "SELECT c.external_id FROM messages m JOIN conversations c ON c.id = m.conversation_id
             WHERE c.channel = ?1 AND m.channel_message_id = ?2
             UNION ALL
             SELECT c.external_id FROM outbox o JOIN conversations c ON c.id = o.conversation_id
             WHERE c.channel = ?1 AND o.channel_message_id = ?2
             LIMIT 1",
        )
        .bind(channel)
        .bind(channel_message_id)
        .fetch_optional(&self.read)
        .await?)
    }

    async fn skipped_messages(
        &self,
        channel: Option<&str>,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<MessageRecord>> {
        let rows = sqlx::query(
            "SELECT m.* FROM messages m JOIN conversations c ON c.id = m.conversation_id
             WHERE m.meta IS NOT NULL AND json_extract(m.meta, '$.skipped') IS NOT NULL
               AND (?1 IS NULL OR c.channel = ?1) AND (?2 IS NULL OR m.id < ?2)
             ORDER BY m.id DESC LIMIT ?3",
        )
        .bind(channel)
        .bind(before.map(|b| b.0))
        .bind(limit as i64)
        .fetch_all(&self.read)
        .await?;
        rows.iter().map(rows::message).collect()
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
