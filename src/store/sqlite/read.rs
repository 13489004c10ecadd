use super::{SqliteStore, rows};
use crate::domain::{ConversationId, MessageId};
use crate::store::{ConversationRecord, MessageRecord, Page, StoreResult};

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
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<MessageRecord>> {
        let mut messages = sqlx::query(
            "SELECT * FROM messages WHERE conversation_id = ?1 AND id < ?2
             ORDER BY id DESC LIMIT ?3",
        )
        .bind(conversation.0)
        .bind(before.map_or(i64::MAX, |m| m.0))
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
