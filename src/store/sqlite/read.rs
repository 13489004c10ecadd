use super::{SqliteStore, rows};
use crate::domain::{ConversationId, MessageId};
use crate::store::{ArchiveHit, Bound, ConversationRecord, MessageRecord, Page, StoreResult};

impl SqliteStore {
    pub(super) async fn conversation_by_id(
        &self,
        id: ConversationId,
    ) -> StoreResult<Option<ConversationRecord>> {
        sqlx::query("SELECT * FROM conversations WHERE id = ?1")
            .bind(id.0)
            .fetch_optional(&self.read)
            .await?
            .map(|r| rows::conversation(&r))
            .transpose()
    }

    pub(super) async fn conversations_page(
        &self,
        page: &Page,
    ) -> StoreResult<Vec<ConversationRecord>> {
        sqlx::query("SELECT * FROM conversations WHERE id < ?1 ORDER BY id DESC LIMIT ?2")
            .bind(page.before.unwrap_or(i64::MAX))
            .bind(page.limit as i64)
            .fetch_all(&self.read)
            .await?
            .iter()
            .map(rows::conversation)
            .collect()
    }

    pub(super) async fn message_by_id(&self, id: MessageId) -> StoreResult<Option<MessageRecord>> {
        sqlx::query("SELECT * FROM messages WHERE id = ?1")
            .bind(id.0)
            .fetch_optional(&self.read)
            .await?
            .map(|r| rows::message(&r))
            .transpose()
    }

    pub(super) async fn messages_page(
        &self,
        conversation: ConversationId,
        bound: Bound,
        background_only: bool,
        limit: usize,
    ) -> StoreResult<Vec<MessageRecord>> {
        let background = if background_only {
            " AND role = 'assistant' AND source_type IN ('briefing', 'scheduled')
              AND deleted_at IS NULL AND kind = 'message'"
        } else {
            ""
        };
        let later_answers = if bound.with_later_answers {
            format!(
                "UNION ALL
                 SELECT * FROM messages
                     WHERE conversation_id = ?1 AND id > ?2 AND role = 'assistant'
                       AND task_id IS NOT NULL AND reply_to_message_id < ?2
                       AND created_at <= ?3 {background}"
            )
        } else {
            String::new()
        };
        let mut messages = sqlx::query(&format!(
            "SELECT * FROM (
                 SELECT * FROM (SELECT * FROM messages
                     WHERE conversation_id = ?1 AND id < ?2 AND created_at <= ?3 {background}
                     ORDER BY id DESC LIMIT ?4)
                 {later_answers})
             ORDER BY id DESC LIMIT ?4"
        ))
        .bind(conversation.0)
        .bind(bound.before.map_or(i64::MAX, |m| m.0))
        .bind(bound.until_ms.unwrap_or(i64::MAX))
        .bind(limit as i64)
        .fetch_all(&self.read)
        .await?
        .iter()
        .map(rows::message)
        .collect::<StoreResult<Vec<_>>>()?;
        messages.reverse();
        Ok(messages)
    }
}

impl SqliteStore {
    pub(super) async fn conversation_by_key(
        &self,
        channel: &str,
        external_id: &str,
    ) -> StoreResult<Option<ConversationRecord>> {
        sqlx::query("SELECT * FROM conversations WHERE channel = ?1 AND external_id = ?2")
            .bind(channel)
            .bind(external_id)
            .fetch_optional(&self.read)
            .await?
            .map(|r| rows::conversation(&r))
            .transpose()
    }

    pub(super) async fn message_by_channel_id(
        &self,
        conversation: ConversationId,
        channel_message_id: &str,
    ) -> StoreResult<Option<MessageRecord>> {
        sqlx::query("SELECT * FROM messages WHERE conversation_id = ?1 AND channel_message_id = ?2")
            .bind(conversation.0)
            .bind(channel_message_id)
            .fetch_optional(&self.read)
            .await?
            .map(|r| rows::message(&r))
            .transpose()
    }

    pub(super) async fn search(
        &self,
        conversation: ConversationId,
        fts_query: &str,
        bound: Bound,
        limit: usize,
    ) -> StoreResult<Vec<ArchiveHit>> {
        self.catch_up_archive_index().await?;
        // The conversation's own token first, so FTS intersects inside the index.
        let query = format!("conv:c{} AND text:({fts_query})", conversation.0);
        // The full-text index drives (MATERIALIZED): joined the other way round, SQLite may
        // probe the index once per message of the conversation.
        let rows = sqlx::query(
            "WITH hits AS MATERIALIZED (
                 SELECT rowid AS id, -bm25(messages_fts, 0.0, 1.0) AS score
                 FROM messages_fts
                 WHERE messages_fts MATCH ?1 AND rowid < ?3
                 ORDER BY bm25(messages_fts, 0.0, 1.0)
                 LIMIT ?5)
             SELECT m.*, hits.score AS score FROM hits JOIN messages m ON m.id = hits.id
             WHERE m.conversation_id = ?2 AND m.created_at <= ?4
             ORDER BY hits.score DESC",
        )
        .bind(query)
        .bind(conversation.0)
        .bind(bound.before.map_or(i64::MAX, |m| m.0))
        .bind(bound.until_ms.unwrap_or(i64::MAX))
        .bind(limit as i64)
        .fetch_all(&self.read)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ArchiveHit {
                    message: rows::message(r)?,
                    score: sqlx::Row::try_get(r, "score")?,
                })
            })
            .collect()
    }

    /// Indexes, in one transaction, the messages stored since the index last caught up.
    pub(super) async fn catch_up_archive_index(&self) -> StoreResult<()> {
        let (indexed, newest): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT last_id FROM archive_index_state),
                    (SELECT COALESCE(MAX(id), 0) FROM messages)",
        )
        .fetch_one(&self.read)
        .await?;
        if indexed >= newest {
            return Ok(());
        }
        let mut tx = self.write.begin().await?;
        let last: i64 = sqlx::query_scalar("SELECT last_id FROM archive_index_state")
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO messages_fts (rowid, conv, text)
             SELECT id, 'c' || conversation_id, text FROM messages
             WHERE id > ?1 AND deleted_at IS NULL ORDER BY id",
        )
        .bind(last)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE archive_index_state SET last_id = (SELECT COALESCE(MAX(id), ?1) FROM messages)",
        )
        .bind(last)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn around(
        &self,
        conversation: ConversationId,
        id: MessageId,
        n: usize,
    ) -> StoreResult<Vec<MessageRecord>> {
        let rows = sqlx::query(
            "SELECT * FROM (SELECT * FROM messages WHERE conversation_id = ?1 AND id < ?2
                            ORDER BY id DESC LIMIT ?3)
             UNION ALL
             SELECT * FROM (SELECT * FROM messages WHERE conversation_id = ?1 AND id > ?2
                            ORDER BY id LIMIT ?3)
             ORDER BY id",
        )
        .bind(conversation.0)
        .bind(id.0)
        .bind(n as i64)
        .fetch_all(&self.read)
        .await?;
        rows.iter().map(rows::message).collect()
    }
}
