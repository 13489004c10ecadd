//! The outbox on PostgreSQL: deliveries claimed with `FOR UPDATE SKIP LOCKED`.

use sqlx::{Connection, PgConnection};

use super::rows::{self, json_text, nul_free, nul_free_opt};
use super::{PgStore, sqlstate};
use crate::domain::{DeliveryId, TaskId};
use crate::store::{DeliveryRecord, NewDelivery, StoreError, StoreResult};

const SELECT_DELIVERY: &str = "SELECT o.*, c.external_id FROM outbox o
     JOIN conversations c ON c.id = o.conversation_id";

impl PgStore {
    pub(super) async fn claim_delivery_tx(
        &self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        max_attempts: u32,
    ) -> StoreResult<Option<DeliveryRecord>> {
        let owner = nul_free(owner);
        let mut tx = self.pool.begin().await?;
        // A delivery whose claimant died goes back to the queue, unless it has used its attempts
        // (a delivery that keeps killing the process must not loop forever).
        sqlx::query(
            "UPDATE outbox SET
                 status = CASE WHEN attempts >= $2 THEN 'failed' ELSE 'pending' END,
                 last_error = CASE WHEN attempts >= $2
                     THEN 'the delivering process stopped; attempts used up' ELSE last_error END,
                 lease_owner = NULL, lease_expires_at = NULL
             WHERE id IN (SELECT id FROM outbox
                          WHERE status = 'delivering' AND lease_expires_at < $1
                          FOR UPDATE SKIP LOCKED)
               AND status = 'delivering' AND lease_expires_at < $1",
        )
        .bind(now)
        .bind(max_attempts as i64)
        .execute(&mut *tx)
        .await?;
        // A conversation's answers go out in order, one at a time, whichever instance delivers:
        // a delivery waits while one of its conversation is being delivered or an earlier one
        // is pending. Under concurrent claims the earlier one is either still pending in this
        // snapshot (so the later one is skipped) or already delivering (likewise).
        let row = sqlx::query(
            "WITH claimed AS (
                 UPDATE outbox SET status = 'delivering', attempts = attempts + 1,
                     lease_owner = $1, lease_expires_at = $2
                 WHERE id = (SELECT o.id FROM outbox o
                             WHERE o.status = 'pending' AND o.available_at <= $3
                               AND NOT EXISTS (SELECT 1 FROM outbox d
                                   WHERE d.conversation_id = o.conversation_id
                                     AND d.status = 'delivering')
                               AND NOT EXISTS (SELECT 1 FROM outbox e
                                   WHERE e.conversation_id = o.conversation_id
                                     AND e.status = 'pending' AND e.id < o.id)
                             ORDER BY o.available_at, o.id LIMIT 1
                             FOR UPDATE OF o SKIP LOCKED)
                   AND status = 'pending'
                 RETURNING *)
             SELECT o.*, c.external_id FROM claimed o
             JOIN conversations c ON c.id = o.conversation_id",
        )
        .bind(owner.as_ref())
        .bind(now + lease_ms)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let record = row.map(|r| rows::delivery(&r)).transpose()?;
        tx.commit().await?;
        Ok(record)
    }

    pub(super) async fn delivered_tx(
        &self,
        id: DeliveryId,
        owner: &str,
        channel_message_id: Option<&str>,
        now: i64,
    ) -> StoreResult<bool> {
        let channel_message_id = nul_free_opt(channel_message_id);
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE outbox SET status = 'delivered', delivered_at = $1, channel_message_id = $2,
                 lease_owner = NULL, lease_expires_at = NULL, last_error = NULL
             WHERE id = $3 AND status = 'delivering' AND lease_owner = $4",
        )
        .bind(now)
        .bind(channel_message_id.as_deref())
        .bind(id.0)
        .bind(nul_free(owner))
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        // The answer is in the history since its task completed: give it the channel's id.
        if let Some(cmid) = channel_message_id.as_deref() {
            rename_answer(&mut tx, id, cmid).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn delivery_failed_tx(
        &self,
        id: DeliveryId,
        owner: &str,
        error: &str,
        retry_at: Option<i64>,
        _now: i64,
    ) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let updated = sqlx::query(
            "UPDATE outbox SET
                 status = CASE WHEN $1::bigint IS NULL THEN 'failed' ELSE 'pending' END,
                 available_at = COALESCE($1, available_at),
                 last_error = $2, lease_owner = NULL, lease_expires_at = NULL
             WHERE id = $3 AND status = 'delivering' AND lease_owner = $4",
        )
        .bind(retry_at)
        .bind(nul_free(error))
        .bind(id.0)
        .bind(nul_free(owner))
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        if retry_at.is_none() {
            // Never delivered: keep it in the history, but out of every context.
            sqlx::query(
                "UPDATE messages SET kind = 'undelivered'
                 FROM outbox o
                 WHERE o.id = $1 AND messages.conversation_id = o.conversation_id
                   AND messages.channel_message_id = o.idempotency_key",
            )
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn enqueue_tx(
        &self,
        task: TaskId,
        d: &NewDelivery,
        now: i64,
    ) -> StoreResult<bool> {
        let mut conn = self.pool.acquire().await?;
        insert_delivery(&mut conn, task, d, now).await
    }

    pub(super) async fn deliveries_of(&self, task: TaskId) -> StoreResult<Vec<DeliveryRecord>> {
        sqlx::query(&format!(
            "{SELECT_DELIVERY} WHERE o.task_id = $1 ORDER BY o.id"
        ))
        .bind(task.0)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(rows::delivery)
        .collect()
    }

    pub(super) async fn conversation_holding(
        &self,
        channel: &str,
        channel_message_id: &str,
    ) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(
            "SELECT c.external_id FROM messages m JOIN conversations c ON c.id = m.conversation_id
             WHERE c.channel = $1 AND m.channel_message_id = $2
             UNION ALL
             SELECT c.external_id FROM outbox o JOIN conversations c ON c.id = o.conversation_id
             WHERE c.channel = $1 AND o.channel_message_id = $2
             LIMIT 1",
        )
        .bind(nul_free(channel))
        .bind(nul_free(channel_message_id))
        .fetch_optional(&self.pool)
        .await?)
    }
}

/// Queues a delivery of a task (into the task's conversation); false when its key was queued
/// before (or the task does not exist).
pub(super) async fn insert_delivery(
    conn: &mut PgConnection,
    task: TaskId,
    d: &NewDelivery,
    now: i64,
) -> StoreResult<bool> {
    let meta = match &d.meta {
        serde_json::Value::Null => None,
        meta => Some(json_text(meta, "delivery meta")?),
    };
    let done = sqlx::query(
        "INSERT INTO outbox (task_id, conversation_id, channel, idempotency_key, kind, text,
             reply_to, meta, status, available_at, created_at)
         SELECT id, conversation_id, $1, $2, $3, $4, $5, $6, 'pending', $7, $7
         FROM tasks WHERE id = $8
         ON CONFLICT (idempotency_key) DO NOTHING",
    )
    .bind(nul_free(&d.channel))
    .bind(nul_free(&d.idempotency_key))
    .bind(nul_free(&d.kind))
    .bind(nul_free(&d.text))
    .bind(nul_free_opt(d.reply_to.as_deref()))
    .bind(meta)
    .bind(now)
    .bind(task.0)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Gives a delivered answer in the history the channel's id for it, unless the conversation
/// already holds a message with that id (a poller saw the post first): SQLite's
/// `UPDATE OR IGNORE`. The check covers the usual case; the savepoint covers a poller that
/// commits the same id between the check and the update.
async fn rename_answer(tx: &mut PgConnection, id: DeliveryId, cmid: &str) -> StoreResult<()> {
    let mut savepoint = tx.begin().await?;
    let renamed = sqlx::query(
        "UPDATE messages SET channel_message_id = $1
         FROM outbox o
         WHERE o.id = $2 AND messages.conversation_id = o.conversation_id
           AND messages.channel_message_id = o.idempotency_key
           AND NOT EXISTS (SELECT 1 FROM messages taken
                           WHERE taken.conversation_id = o.conversation_id
                             AND taken.channel_message_id = $1)",
    )
    .bind(cmid)
    .bind(id.0)
    .execute(&mut *savepoint)
    .await
    .map_err(StoreError::from);
    match renamed {
        Ok(_) => savepoint.commit().await?,
        Err(e) if sqlstate(&e).as_deref() == Some("23505") => savepoint.rollback().await?,
        Err(e) => return Err(e),
    }
    Ok(())
}
