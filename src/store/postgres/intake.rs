//! Intake: one event's writes (conversation, message or its edit/deletion, task, cursor) in one
//! transaction. Unlike SQLite there is no in-process group commit: PostgreSQL commits
//! concurrent transactions in parallel, and instances share nothing but the database.
//!
//! Concurrent sights of one message (two instances, or a poller and a webhook) meet at the
//! unique keys: the second waits for the first to commit, then takes the duplicate path. The
//! conversation upsert locks the conversation's row until commit, so the messages and tasks of
//! one conversation get their ids in commit order, which task ordering relies on.

use ctxgate_contract::{EventKind, InboundEvent, InboundMessage, IntakeReceipt, Role};
use sqlx::PgConnection;

use super::rows::{json_text, nul_free, nul_free_opt};
use super::{PgStore, retrying};
use crate::store::{NewTask, StoreResult};

impl PgStore {
    pub(super) async fn ingest_tx(
        &self,
        event: &InboundEvent,
        tasks: &[NewTask],
        now: i64,
    ) -> StoreResult<IntakeReceipt> {
        retrying(|| async move {
            let mut tx = self.pool.begin().await?;
            let receipt = ingest_one(&mut tx, event, tasks, now).await?;
            tx.commit().await?;
            Ok(receipt)
        })
        .await
    }

    pub(super) async fn ingest_batch_tx(
        &self,
        events: &[InboundEvent],
        now: i64,
    ) -> StoreResult<()> {
        retrying(|| async move {
            let mut tx = self.pool.begin().await?;
            for event in events {
                ingest_one(&mut tx, event, &[], now).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    pub(super) async fn cursor_value(
        &self,
        channel: &str,
        scope: &str,
    ) -> StoreResult<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT value FROM cursors WHERE channel = $1 AND scope = $2")
                .bind(nul_free(channel))
                .bind(nul_free(scope))
                .fetch_optional(&self.pool)
                .await?,
        )
    }
}

/// One event's writes, inside the caller's transaction.
pub(super) async fn ingest_one(
    tx: &mut PgConnection,
    event: &InboundEvent,
    tasks: &[NewTask],
    now: i64,
) -> StoreResult<IntakeReceipt> {
    let conversation_id: i64 = sqlx::query_scalar(
        "INSERT INTO conversations (channel, external_id, created_at, updated_at)
             VALUES ($1, $2, $3, $3)
             ON CONFLICT (channel, external_id) DO UPDATE SET updated_at = excluded.updated_at
             RETURNING id",
    )
    .bind(nul_free(&event.channel))
    .bind(nul_free(&event.conversation))
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
                "UPDATE messages SET text = $1, edited_at = $2
                     WHERE conversation_id = $3 AND channel_message_id = $4",
            )
            .bind(nul_free(text))
            .bind(at.timestamp_millis())
            .bind(conversation_id)
            .bind(nul_free(channel_message_id))
            .execute(&mut *tx)
            .await?;
        }
        EventKind::Deleted {
            channel_message_id,
            at,
        } => {
            sqlx::query(
                "UPDATE messages SET deleted_at = $1
                     WHERE conversation_id = $2 AND channel_message_id = $3",
            )
            .bind(at.timestamp_millis())
            .bind(conversation_id)
            .bind(nul_free(channel_message_id))
            .execute(&mut *tx)
            .await?;
        }
        EventKind::CursorOnly => {}
    }
    if let Some(cursor) = &event.cursor {
        sqlx::query(
            "INSERT INTO cursors (channel, scope, value, updated_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (channel, scope) DO UPDATE
                 SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(nul_free(&event.channel))
        .bind(nul_free(&cursor.scope))
        .bind(nul_free(&cursor.value))
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    Ok(receipt)
}

async fn post(
    tx: &mut PgConnection,
    conversation_id: i64,
    m: &InboundMessage,
    tasks: &[NewTask],
    now: i64,
    receipt: &mut IntakeReceipt,
) -> StoreResult<()> {
    let channel_message_id = nul_free(&m.channel_message_id);
    let reply_to = nul_free_opt(m.reply_to.as_deref());
    let reply_to_message_id: Option<i64> =
        match &reply_to {
            Some(parent) => sqlx::query_scalar(
                "SELECT id FROM messages WHERE conversation_id = $1 AND channel_message_id = $2",
            )
            .bind(conversation_id)
            .bind(parent.as_ref())
            .fetch_optional(&mut *tx)
            .await?,
            None => None,
        };
    let audience = json_text(&m.audience, "audience")?;
    let meta = match &m.meta {
        serde_json::Value::Null => None,
        meta => Some(json_text(meta, "meta")?),
    };
    let inserted: Option<i64> = sqlx::query_scalar(
        "INSERT INTO messages (conversation_id, channel_message_id, sender_id, sender_name,
             sender_kind, role, kind, text, created_at, stored_at, reply_to_channel_id,
             reply_to_message_id, source_type, agent, audience, meta)
         VALUES ($1, $2, $3, $4, $5, $6, $16, $7, $8, $9, $10, $11, $12, $13, $14, $15)
         ON CONFLICT (conversation_id, channel_message_id) DO NOTHING
         RETURNING id",
    )
    .bind(conversation_id)
    .bind(channel_message_id.as_ref())
    .bind(nul_free(&m.sender_id))
    .bind(nul_free_opt(m.sender_name.as_deref()))
    .bind(super::rows::sender_kind_str(m.sender_kind))
    .bind(m.role.as_str())
    .bind(nul_free(&m.text))
    .bind(m.timestamp.timestamp_millis())
    .bind(now)
    .bind(reply_to.as_deref())
    .bind(reply_to_message_id)
    .bind(m.source_type.as_str())
    .bind(nul_free_opt(
        m.agent.as_deref().filter(|_| m.role == Role::Assistant),
    ))
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
                "SELECT id FROM messages WHERE conversation_id = $1 AND channel_message_id = $2",
            )
            .bind(conversation_id)
            .bind(channel_message_id.as_ref())
            .fetch_one(&mut *tx)
            .await?
        }
    };
    receipt.message_id = Some(message_id);
    // One task per agent asked; the receipt names the first. Duplicate only when every
    // task existed already.
    let mut any_new = false;
    for task in tasks {
        let dedup_key = nul_free(&task.dedup_key);
        let id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO tasks (conversation_id, message_id, dedup_key, source_type, agent, brain,
                 status, max_attempts, available_at, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $8, $8)
             ON CONFLICT (dedup_key) DO NOTHING
             RETURNING id",
        )
        .bind(conversation_id)
        .bind(message_id)
        .bind(dedup_key.as_ref())
        .bind(task.source_type.as_str())
        .bind(nul_free(&task.agent))
        .bind(nul_free(&task.brain))
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
                sqlx::query_scalar("SELECT id FROM tasks WHERE dedup_key = $1")
                    .bind(dedup_key.as_ref())
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
