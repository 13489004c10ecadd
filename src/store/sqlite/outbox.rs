use super::{SqliteStore, rows};
use crate::domain::{DeliveryId, TaskId};
use crate::store::{DeliveryRecord, StoreResult};

const SELECT_DELIVERY: &str = "SELECT o.*, c.external_id FROM outbox o
     JOIN conversations c ON c.id = o.conversation_id";

impl SqliteStore {
    pub(super) async fn claim_delivery_tx(
        &self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        max_attempts: u32,
    ) -> StoreResult<Option<DeliveryRecord>> {
        // A conversation's answers go out in order, one at a time (see the PostgreSQL twin).
        let mut tx = self.write.begin().await?;
        // A delivery whose claimant died goes back to the queue, unless it has used its attempts
        // (a delivery that keeps killing the process must not loop forever).
        sqlx::query(
            "UPDATE outbox SET
                 status = CASE WHEN attempts >= ?2 THEN 'failed' ELSE 'pending' END,
                 last_error = CASE WHEN attempts >= ?2
                     THEN 'the delivering process stopped; attempts used up' ELSE last_error END,
                 lease_owner = NULL, lease_expires_at = NULL
             WHERE status = 'delivering' AND lease_expires_at < ?1",
        )
        .bind(now)
        .bind(max_attempts as i64)
        .execute(&mut *tx)
        .await?;
        let id: Option<i64> = sqlx::query_scalar(
            "UPDATE outbox SET status = 'delivering', attempts = attempts + 1, lease_owner = ?1,
                 lease_expires_at = ?2
             WHERE id = (SELECT o.id FROM outbox o
                         WHERE o.status = 'pending' AND o.available_at <= ?3
                           AND NOT EXISTS (SELECT 1 FROM outbox d
                               WHERE d.conversation_id = o.conversation_id
                                 AND d.status = 'delivering')
                           AND NOT EXISTS (SELECT 1 FROM outbox e
                               WHERE e.conversation_id = o.conversation_id
                                 AND e.status = 'pending' AND e.id < o.id)
                         ORDER BY o.available_at, o.id LIMIT 1)
             RETURNING id",
        )
        .bind(owner)
        .bind(now + lease_ms)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let record = match id {
            Some(id) => Some(rows::delivery(
                &sqlx::query(&format!("{SELECT_DELIVERY} WHERE o.id = ?1"))
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await?,
            )?),
            None => None,
        };
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
        let mut tx = self.write.begin().await?;
        let updated = sqlx::query(
            "UPDATE outbox SET status = 'delivered', delivered_at = ?1, channel_message_id = ?2,
                 lease_owner = NULL, lease_expires_at = NULL, last_error = NULL
             WHERE id = ?3 AND status = 'delivering' AND lease_owner = ?4",
        )
        .bind(now)
        .bind(channel_message_id)
        .bind(id.0)
        .bind(owner)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        // The answer is in the history since its task completed: give it the channel's id.
        if let Some(cmid) = channel_message_id {
            sqlx::query(
                "UPDATE OR IGNORE messages SET channel_message_id = ?1
                 WHERE conversation_id = (SELECT conversation_id FROM outbox WHERE id = ?2)
                   AND channel_message_id = (SELECT idempotency_key FROM outbox WHERE id = ?2)",
            )
            .bind(cmid)
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
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
        let mut tx = self.write.begin().await?;
        let updated = sqlx::query(
            "UPDATE outbox SET
                 status = CASE WHEN ?1 IS NULL THEN 'failed' ELSE 'pending' END,
                 available_at = COALESCE(?1, available_at),
                 last_error = ?2, lease_owner = NULL, lease_expires_at = NULL
             WHERE id = ?3 AND status = 'delivering' AND lease_owner = ?4",
        )
        .bind(retry_at)
        .bind(error)
        .bind(id.0)
        .bind(owner)
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
                 WHERE conversation_id = (SELECT conversation_id FROM outbox WHERE id = ?1)
                   AND channel_message_id = (SELECT idempotency_key FROM outbox WHERE id = ?1)",
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
        d: &crate::store::NewDelivery,
        now: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "INSERT INTO outbox (task_id, conversation_id, channel, idempotency_key, kind, text,
                 reply_to, meta, status, available_at, created_at)
             SELECT id, conversation_id, ?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?7
             FROM tasks WHERE id = ?8
             ON CONFLICT (idempotency_key) DO NOTHING",
        )
        .bind(&d.channel)
        .bind(&d.idempotency_key)
        .bind(&d.kind)
        .bind(&d.text)
        .bind(&d.reply_to)
        .bind((!d.meta.is_null()).then(|| d.meta.to_string()))
        .bind(now)
        .bind(task.0)
        .execute(&self.write)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn deliveries_of(&self, task: TaskId) -> StoreResult<Vec<DeliveryRecord>> {
        sqlx::query(&format!(
            "{SELECT_DELIVERY} WHERE o.task_id = ?1 ORDER BY o.id"
        ))
        .bind(task.0)
        .fetch_all(&self.read)
        .await?
        .iter()
        .map(rows::delivery)
        .collect()
    }
}
