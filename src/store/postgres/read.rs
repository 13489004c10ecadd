use super::rows::{self, MESSAGE_COLUMNS, nul_free};
use super::{PgStore, fts};
use crate::domain::{ConversationId, MessageId};
use crate::store::{ArchiveHit, Bound, ConversationRecord, MessageRecord, Page, StoreResult};

impl PgStore {
    pub(super) async fn conversation_by_id(
        &self,
        id: ConversationId,
    ) -> StoreResult<Option<ConversationRecord>> {
        sqlx::query("SELECT * FROM conversations WHERE id = $1")
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?
            .map(|r| rows::conversation(&r))
            .transpose()
    }

    pub(super) async fn conversations_page(
        &self,
        page: &Page,
    ) -> StoreResult<Vec<ConversationRecord>> {
        sqlx::query("SELECT * FROM conversations WHERE id < $1 ORDER BY id DESC LIMIT $2")
            .bind(page.before.unwrap_or(i64::MAX))
            .bind(page.limit as i64)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(rows::conversation)
            .collect()
    }

    pub(super) async fn message_by_id(&self, id: MessageId) -> StoreResult<Option<MessageRecord>> {
        sqlx::query(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = $1"
        ))
        .bind(id.0)
        .fetch_optional(&self.pool)
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
                 SELECT {MESSAGE_COLUMNS} FROM messages
                     WHERE conversation_id = $1 AND id > $2 AND role = 'assistant'
                       AND task_id IS NOT NULL AND reply_to_message_id < $2
                       AND created_at <= $3 {background}"
            )
        } else {
            String::new()
        };
        let mut messages = sqlx::query(&format!(
            "SELECT * FROM (
                 (SELECT {MESSAGE_COLUMNS} FROM messages
                     WHERE conversation_id = $1 AND id < $2 AND created_at <= $3 {background}
                     ORDER BY id DESC LIMIT $4)
                 {later_answers}) page
             ORDER BY id DESC LIMIT $4"
        ))
        .bind(conversation.0)
        .bind(bound.before.map_or(i64::MAX, |m| m.0))
        .bind(bound.until_ms.unwrap_or(i64::MAX))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(rows::message)
        .collect::<StoreResult<Vec<_>>>()?;
        messages.reverse();
        Ok(messages)
    }

    pub(super) async fn conversation_by_key(
        &self,
        channel: &str,
        external_id: &str,
    ) -> StoreResult<Option<ConversationRecord>> {
        sqlx::query("SELECT * FROM conversations WHERE channel = $1 AND external_id = $2")
            .bind(nul_free(channel))
            .bind(nul_free(external_id))
            .fetch_optional(&self.pool)
            .await?
            .map(|r| rows::conversation(&r))
            .transpose()
    }

    pub(super) async fn message_by_channel_id(
        &self,
        conversation: ConversationId,
        channel_message_id: &str,
    ) -> StoreResult<Option<MessageRecord>> {
        sqlx::query(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages
             WHERE conversation_id = $1 AND channel_message_id = $2"
        ))
        .bind(conversation.0)
        .bind(nul_free(channel_message_id))
        .fetch_optional(&self.pool)
        .await?
        .map(|r| rows::message(&r))
        .transpose()
    }

    /// The best `limit` live messages of the conversation within `bound` (`with_later_answers`
    /// does not apply, as with SQLite) matching the FTS5-syntax query, ranked by `ts_rank`
    /// (normalised by document length, as BM25 is), best first; ties go to the newer message.
    pub(super) async fn search(
        &self,
        conversation: ConversationId,
        fts_query: &str,
        bound: Bound,
        limit: usize,
    ) -> StoreResult<Vec<ArchiveHit>> {
        let Some(tsquery) = fts::to_tsquery(fts_query)? else {
            return Ok(Vec::new());
        };
        let rows = sqlx::query(&format!(
            "SELECT {MESSAGE_COLUMNS}, score FROM (
                 SELECT m.*, ts_rank(m.tsv, q.query, 1)::float8 AS score
                 FROM messages m, to_tsquery('english', $2) AS q(query)
                 WHERE m.conversation_id = $1 AND m.tsv @@ q.query AND m.deleted_at IS NULL
                   AND m.id < $3 AND m.created_at <= $4
                 ORDER BY score DESC, m.id DESC
                 LIMIT $5) hits
             ORDER BY score DESC, id DESC"
        ))
        .bind(conversation.0)
        .bind(tsquery)
        .bind(bound.before.map_or(i64::MAX, |m| m.0))
        .bind(bound.until_ms.unwrap_or(i64::MAX))
        .bind(limit as i64)
        .fetch_all(&self.pool)
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

    pub(super) async fn around(
        &self,
        conversation: ConversationId,
        id: MessageId,
        n: usize,
    ) -> StoreResult<Vec<MessageRecord>> {
        let rows = sqlx::query(&format!(
            "(SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = $1 AND id < $2
              ORDER BY id DESC LIMIT $3)
             UNION ALL
             (SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = $1 AND id > $2
              ORDER BY id LIMIT $3)
             ORDER BY id"
        ))
        .bind(conversation.0)
        .bind(id.0)
        .bind(n as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::message).collect()
    }

    /// Messages whose meta names a reason they were not answered (`meta.skipped`, not null).
    /// Meta is JSON text; the `LIKE` lets the scan skip most rows without parsing them.
    pub(super) async fn skipped(
        &self,
        channel: Option<&str>,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<MessageRecord>> {
        sqlx::query(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages
             WHERE meta LIKE '%\"skipped\"%'
               AND json_typeof(meta::json -> 'skipped') <> 'null'
               AND ($1::text IS NULL
                    OR conversation_id IN (SELECT id FROM conversations WHERE channel = $1))
               AND ($2::bigint IS NULL OR id < $2)
             ORDER BY id DESC LIMIT $3"
        ))
        .bind(channel.map(nul_free))
        .bind(before.map(|b| b.0))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(rows::message)
        .collect()
    }
}
