//! Intake with group commit: concurrent intakes queue up and one writer commits them together
//! in one transaction (each caller is answered only after that commit). SQLite commits are
//! the limit of a single-row-transaction workload; batching divides their count.

use ctxgate_contract::{EventKind, InboundEvent, InboundMessage, IntakeReceipt};
use sqlx::{Connection, SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::SqliteStore;
use crate::store::{NewTask, StoreError, StoreResult};

/// Most intakes committed in one transaction.
const MAX_BATCH: usize = 256;

pub(super) struct IngestJob {
    event: InboundEvent,
    tasks: Vec<NewTask>,
    now: i64,
    reply: oneshot::Sender<StoreResult<IntakeReceipt>>,
}

pub(super) type IngestQueue = mpsc::Sender<IngestJob>;

/// Starts the writer that drains the intake queue; it ends when every store handle is gone.
pub(super) fn spawn_writer(pool: SqlitePool) -> IngestQueue {
    let (tx, mut rx) = mpsc::channel::<IngestJob>(4 * MAX_BATCH);
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
            commit_batch(&pool, std::mem::take(&mut batch)).await;
        }
    });
    tx
}

async fn commit_batch(pool: &SqlitePool, jobs: Vec<IngestJob>) {
    let together = async {
        let mut conn = pool.acquire().await?;
        let mut tx = conn.begin().await?;
        let mut receipts = Vec::with_capacity(jobs.len());
        for job in &jobs {
            receipts.push(ingest_one(&mut tx, &job.event, &job.tasks, job.now).await?);
        }
        tx.commit().await?;
        Ok::<_, StoreError>(receipts)
    };
    match together.await {
        Ok(receipts) => {
            for (job, receipt) in jobs.into_iter().zip(receipts) {
                let _ = job.reply.send(Ok(receipt));
            }
        }
        // One bad event must not fail its neighbours: retry each alone.
        Err(_) => {
            for job in jobs {
                let alone = async {
                    let mut conn = pool.acquire().await?;
                    let mut tx = conn.begin().await?;
                    let r = ingest_one(&mut tx, &job.event, &job.tasks, job.now).await?;
                    tx.commit().await?;
                    Ok(r)
                };
                let _ = job.reply.send(alone.await);
            }
        }
    }
}

impl SqliteStore {
    pub(super) async fn ingest_tx(
        &self,
        event: &InboundEvent,
        tasks: &[NewTask],
        now: i64,
    ) -> StoreResult<IntakeReceipt> {
        let (reply, answer) = oneshot::channel();
        let job = IngestJob {
            event: event.clone(),
            tasks: tasks.to_vec(),
            now,
            reply,
        };
        let gone = || StoreError::Invalid("the store's writer has stopped".to_owned());
        self.ingest_queue.send(job).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// One event's writes, inside the caller's transaction.
pub(super) async fn ingest_one(
    tx: &mut SqliteConnection,
    event: &InboundEvent,
    tasks: &[NewTask],
    now: i64,
) -> StoreResult<IntakeReceipt> {
    let conversation_id: i64 = sqlx::query_scalar(
        "INSERT INTO conversations (channel, external_id, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?3)
             ON CONFLICT (channel, external_id) DO UPDATE SET updated_at = excluded.updated_at
             RETURNING id",
    )
    .bind(&event.channel)
    .bind(&event.conversation)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let mut receipt = IntakeReceipt {
        conversation_id,
        message_id: None,
        task_id: None,
        duplicate: false,
    };
    match &event.kind {
        EventKind::Posted(message) => {
            post(tx, conversation_id, message, tasks, now, &mut receipt).await?;
        }
        EventKind::Edited {
            channel_message_id,
            text,
            at,
        } => {
            sqlx::query(
                "UPDATE messages SET text = ?1, edited_at = ?2
                     WHERE conversation_id = ?3 AND channel_message_id = ?4",
            )
            .bind(text)
            .bind(at.timestamp_millis())
            .bind(conversation_id)
            .bind(channel_message_id)
            .execute(&mut *tx)
            .await?;
        }
        EventKind::Deleted {
            channel_message_id,
            at,
        } => {
            sqlx::query(
                "UPDATE messages SET deleted_at = ?1
                     WHERE conversation_id = ?2 AND channel_message_id = ?3",
            )
            .bind(at.timestamp_millis())
            .bind(conversation_id)
            .bind(channel_message_id)
            .execute(&mut *tx)
            .await?;
        }
        EventKind::CursorOnly => {}
    }
    if let Some(cursor) = &event.cursor {
        sqlx::query(
            "INSERT INTO cursors (channel, scope, value, updated_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (channel, scope) DO UPDATE
                 SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(&event.channel)
        .bind(&cursor.scope)
        .bind(&cursor.value)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    Ok(receipt)
}

impl SqliteStore {
    pub(super) async fn ingest_batch_tx(
        &self,
        events: &[InboundEvent],
        now: i64,
    ) -> StoreResult<()> {
        let mut conn = self.write.acquire().await?;
        let mut tx = conn.begin().await?;
        for event in events {
            ingest_one(&mut tx, event, &[], now).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn cursor_value(
        &self,
        channel: &str,
        scope: &str,
    ) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT value FROM cursors WHERE channel = ?1 AND scope = ?2")
                .bind(channel)
                .bind(scope)
                .fetch_optional(&self.read)
                .await?,
        )
    }
}

async fn post(
    tx: &mut SqliteConnection,
    conversation_id: i64,
    m: &InboundMessage,
    tasks: &[NewTask],
    now: i64,
    receipt: &mut IntakeReceipt,
) -> StoreResult<()> {
    let reply_to_message_id: Option<i64> =
        match &m.reply_to {
            Some(parent) => sqlx::query_scalar(
                "SELECT id FROM messages WHERE conversation_id = ?1 AND channel_message_id = ?2",
            )
            .bind(conversation_id)
            .bind(parent)
            .fetch_optional(&mut *tx)
            .await?,
            None => None,
        };
    let audience = serde_json::to_string(&m.audience)
        .map_err(|e| StoreError::Invalid(format!("audience: {e}")))?;
    let meta = (!m.meta.is_null()).then(|| m.meta.to_string());
    let inserted: Option<i64> = sqlx::query_scalar(
        "INSERT INTO messages (conversation_id, channel_message_id, sender_id, sender_name,
             sender_kind, role, kind, text, created_at, stored_at, reply_to_channel_id,
             reply_to_message_id, source_type, agent, audience, meta)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?16, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
         ON CONFLICT (conversation_id, channel_message_id) DO NOTHING
         RETURNING id",
    )
    .bind(conversation_id)
    .bind(&m.channel_message_id)
    .bind(&m.sender_id)
    .bind(&m.sender_name)
    .bind(super::rows::sender_kind_str(m.sender_kind))
    .bind(m.role.as_str())
    .bind(&m.text)
    .bind(m.timestamp.timestamp_millis())
    .bind(now)
    .bind(&m.reply_to)
    .bind(reply_to_message_id)
    .bind(m.source_type.as_str())
    .bind(
        m.agent
            .as_deref()
            .filter(|_| m.role == ctxgate_contract::Role::Assistant),
    )
    .bind(audience)
    .bind(meta)
    .bind(m.kind.as_str())
    .fetch_optional(&mut *tx)
    .await?;
    let message_id = match inserted {
        Some(id) => id,
        None => {
            // Seen before: the first sight's message. A task is still created when this sight
            // asks for one the first did not (another agent, or it was stored as context only).
            receipt.duplicate = true;
            sqlx::query_scalar(
                "SELECT id FROM messages WHERE conversation_id = ?1 AND channel_message_id = ?2",
            )
            .bind(conversation_id)
            .bind(&m.channel_message_id)
            .fetch_one(&mut *tx)
            .await?
        }
    };
    receipt.message_id = Some(message_id);
    // One task per agent asked; the receipt names the first. Duplicate only when every
    // task existed already.
    let mut any_new = false;
    for task in tasks {
        let id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO tasks (conversation_id, message_id, dedup_key, source_type, agent, brain,
                 status, max_attempts, available_at, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?8, ?8, ?8)
             ON CONFLICT (dedup_key) DO NOTHING
             RETURNING id",
        )
        .bind(conversation_id)
        .bind(message_id)
        .bind(&task.dedup_key)
        .bind(task.source_type.as_str())
        .bind(&task.agent)
        .bind(&task.brain)
        .bind(task.max_attempts as i64)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let id = match id {
            Some(id) => {
                any_new = true;
                Some(id)
            }
            None => {
                sqlx::query_scalar("SELECT id FROM tasks WHERE dedup_key = ?1")
                    .bind(&task.dedup_key)
                    .fetch_optional(&mut *tx)
                    .await?
            }
        };
        receipt.task_id = receipt.task_id.or(id);
    }
    if !tasks.is_empty() {
        receipt.duplicate = !any_new;
    }
    Ok(())
}
