use ctxgate_contract::{Audience, Role};

use super::{SqliteStore, rows};
use crate::domain::{ConversationId, MessageId, TaskId};
use crate::store::{
    ArchiveHit, Bound, ConversationRecord, MessageRecord, Page, StoreError, StoreResult,
};

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
        let mut messages = sqlx::query(&page_sql(bound, background_only, "?4"))
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

    /// The pages of [`Self::messages_page`] for the lookback window (`limit`) and the background
    /// results (`background_limit`, none when 0) in one query, each oldest first.
    ///
    /// Every row a query returns crosses from SQLite's worker thread on its own (a wake-up of
    /// each thread, and a copy of each column), so the messages come as JSON arrays, up to
    /// [`MESSAGES_PER_ROW`] to a row: usually one row in all.
    pub(super) async fn lookback_pages(
        &self,
        conversation: ConversationId,
        bound: Bound,
        limit: usize,
        background_limit: usize,
    ) -> StoreResult<(Vec<MessageRecord>, Vec<MessageRecord>)> {
        let background = if background_limit > 0 {
            format!(
                "UNION ALL SELECT json_array(1, {MESSAGE_JSON_COLUMNS}) FROM ({})",
                page_sql(bound, true, "?5")
            )
        } else {
            String::new()
        };
        // Each message is made JSON before the rows are numbered, so that only the JSON is
        // copied; the pages come out in no particular order and are sorted below.
        let rows = sqlx::query_scalar::<_, String>(&format!(
            "SELECT '[' || group_concat(message, ',') || ']'
             FROM (SELECT message, row_number() OVER () AS n FROM (
                 SELECT json_array(0, {MESSAGE_JSON_COLUMNS}) AS message FROM ({})
                 {background}))
             GROUP BY (n - 1) / {MESSAGES_PER_ROW}",
            page_sql(bound, false, "?4"),
        ))
        .bind(conversation.0)
        .bind(bound.before.map_or(i64::MAX, |m| m.0))
        .bind(bound.until_ms.unwrap_or(i64::MAX))
        .bind(limit as i64)
        .bind(background_limit as i64)
        .fetch_all(&self.read)
        .await?;
        let mut window = Vec::with_capacity(limit.min(1024));
        let mut background = Vec::new();
        for row in rows {
            let messages: Vec<JsonMessage> = serde_json::from_str(&row)
                .map_err(|e| StoreError::Corrupt(format!("message rows: {e}")))?;
            for m in messages {
                let page = m.0;
                let message = m.into_record()?;
                if page == 0 {
                    window.push(message);
                } else {
                    background.push(message);
                }
            }
        }
        window.sort_unstable_by_key(|m| m.id);
        background.sort_unstable_by_key(|m| m.id);
        Ok((window, background))
    }
}

/// Messages per row in [`SqliteStore::lookback_pages`]: bounds the size of one row's JSON.
const MESSAGES_PER_ROW: usize = 64;

/// The columns [`rows::message`] reads, in the order of [`JsonMessage`]'s fields (after the
/// page: 0 for the lookback window, 1 for background results).
const MESSAGE_JSON_COLUMNS: &str = "id, conversation_id, channel_message_id, sender_id, \
     sender_name, sender_kind, role, kind, text, created_at, reply_to_channel_id, \
     reply_to_message_id, source_type, task_id, agent, audience, actions, meta, edited_at, \
     deleted_at";

/// A message row as a JSON array (see [`MESSAGE_JSON_COLUMNS`]), preceded by its page (0: the
/// lookback window, 1: background results). Read as [`rows::message`] reads a row.
#[derive(serde::Deserialize)]
struct JsonMessage(
    i64,
    i64,
    i64,
    String,
    String,
    Option<String>,
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
);

impl JsonMessage {
    fn into_record(self) -> StoreResult<MessageRecord> {
        let JsonMessage(
            _page,
            id,
            conversation_id,
            channel_message_id,
            sender_id,
            sender_name,
            sender_kind,
            role,
            kind,
            text,
            created_at,
            reply_to_channel_id,
            reply_to_message_id,
            source_type,
            task_id,
            agent,
            audience,
            actions,
            meta,
            edited_at,
            deleted_at,
        ) = self;
        Ok(MessageRecord {
            id: MessageId(id),
            conversation_id: ConversationId(conversation_id),
            channel_message_id,
            sender_id,
            sender_name,
            sender_kind: rows::sender_kind(&sender_kind)?,
            role: Role::parse(&role)
                .ok_or_else(|| StoreError::Corrupt(format!("role {role:?}")))?,
            kind,
            text,
            created_at,
            reply_to_channel_id,
            reply_to_message_id: reply_to_message_id.map(MessageId),
            source_type: source_type.as_deref().map(rows::source_type).transpose()?,
            task_id: task_id.map(TaskId),
            agent,
            audience: rows::json_or(audience, "audience", Audience::Everyone)?,
            actions: rows::json_or(actions, "message actions", Vec::new())?,
            meta: rows::json_or(meta, "message meta", serde_json::Value::Null)?,
            edited_at,
            deleted_at,
        })
    }
}

/// The newest `limit` (a query parameter) messages of conversation ?1 within the bound (?2, ?3)
/// — background results only when `background_only` —, newest first.
fn page_sql(bound: Bound, background_only: bool, limit: &str) -> String {
    let background = if background_only {
        " AND role = 'assistant' AND source_type IN ('briefing', 'scheduled')
          AND deleted_at IS NULL AND kind = 'message'"
    } else {
        ""
    };
    let page = format!(
        "SELECT * FROM messages
             WHERE conversation_id = ?1 AND id < ?2 AND created_at <= ?3 {background}
             ORDER BY id DESC LIMIT {limit}"
    );
    if !bound.with_later_answers {
        return page;
    }
    format!(
        "SELECT * FROM (
             SELECT * FROM ({page})
             UNION ALL
             SELECT * FROM messages
                 WHERE conversation_id = ?1 AND id > ?2 AND role = 'assistant'
                   AND task_id IS NOT NULL AND reply_to_message_id < ?2
                   AND created_at <= ?3 {background})
         ORDER BY id DESC LIMIT {limit}"
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StoreSettings;
    use ctxgate_contract::SourceType;

    /// Two conversations mixing people's messages, answers (some stored after later
    /// messages), briefing and scheduled results, their acknowledgements and deleted ones,
    /// with times not in arrival order.
    async fn seeded() -> SqliteStore {
        let store = SqliteStore::connect(&StoreSettings {
            url: "sqlite::memory:".into(),
            ..StoreSettings::default()
        })
        .await
        .unwrap();
        store.migrate().await.unwrap();
        for c in [1, 2] {
            sqlx::query(
                "INSERT INTO conversations (id, channel, external_id, created_at, updated_at)
                 VALUES (?1, 'test', ?2, 0, 0)",
            )
            .bind(c)
            .bind(format!("c{c}"))
            .execute(&store.write)
            .await
            .unwrap();
        }
        for i in 1..=80i64 {
            let conversation = if i % 7 == 0 { 2 } else { 1 };
            let (role, source, kind, deleted) = match i {
                _ if i % 11 == 0 => ("assistant", "briefing", "message", Some(i)),
                _ if i % 5 == 0 => ("assistant", "briefing", "message", None),
                _ if i % 13 == 0 => ("assistant", "scheduled", "message", None),
                _ if i % 9 == 0 => ("assistant", "scheduled", "ack", None),
                _ if i % 3 == 0 => ("assistant", "talk", "message", None),
                _ => ("user", "talk", "message", None),
            };
            let answer = role == "assistant";
            let sender_kind = ["user", "guest", "bot", "self_bot", "system"][i as usize % 5];
            // Quotes, escapes, control characters, non-ASCII and astral characters.
            let text = format!(
                "m{i} \"quoted\" back\\slash\ttab\nline\u{1} é 🙂 {}",
                "x".repeat(i as usize)
            );
            let audience = match i % 4 {
                0 => r#"{"kind":"everyone"}"#.to_owned(),
                1 => format!(r#"{{"kind":"addressed","agents":["a{i}"]}}"#),
                _ => r#"{"kind":"addressed","users":["u1","u2"]}"#.to_owned(),
            };
            sqlx::query(
                "INSERT INTO messages (id, conversation_id, channel_message_id, sender_id,
                     sender_name, sender_kind, role, kind, text, created_at, stored_at,
                     reply_to_channel_id, reply_to_message_id, source_type, task_id, agent,
                     audience, actions, meta, edited_at, deleted_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0, ?11, ?12, ?13, ?14, ?15,
                         ?16, ?17, ?18, ?19, ?20)",
            )
            .bind(i)
            .bind(conversation)
            .bind(format!("m{i}"))
            .bind(format!("sender {i}"))
            .bind((i % 2 == 0).then(|| format!("Sender «{i}»")))
            .bind(sender_kind)
            .bind(role)
            .bind(kind)
            .bind(text)
            .bind(1_000 + (i * 37 % 80) * 10)
            .bind(answer.then(|| format!("m{}", (i - 4).max(1))))
            .bind(answer.then(|| (i - 4).max(1)))
            .bind((i % 17 != 0).then_some(source))
            .bind(answer.then_some(i))
            .bind(answer.then(|| format!("agent{}", i % 3)))
            .bind(audience)
            .bind(
                answer
                    .then(|| format!(r#"[{{"name":"search","detail":"q{i}"}},{{"name":"mail"}}]"#)),
            )
            .bind((i % 3 == 1).then(|| format!(r#"{{"thread":{i},"tags":["a","b"],"x":1.5}}"#)))
            .bind((i % 6 == 0).then_some(2_000 + i))
            .bind(deleted)
            .execute(&store.write)
            .await
            .unwrap();
        }
        store
    }

    /// What a page holds, by the definition of `Store::messages_before` and
    /// `Store::background_results`, from all stored messages.
    fn expected(
        all: &[MessageRecord],
        conversation: ConversationId,
        bound: Bound,
        background_only: bool,
        limit: usize,
    ) -> Vec<MessageRecord> {
        let before = bound.before.map_or(i64::MAX, |m| m.0);
        let until = bound.until_ms.unwrap_or(i64::MAX);
        let mut page: Vec<MessageRecord> = all
            .iter()
            .filter(|m| m.conversation_id == conversation && m.created_at <= until)
            .filter(|m| {
                m.id.0 < before
                    || (bound.with_later_answers
                        && m.id.0 > before
                        && m.role == Role::Assistant
                        && m.task_id.is_some()
                        && m.reply_to_message_id.is_some_and(|r| r.0 < before))
            })
            .filter(|m| {
                !background_only
                    || (m.role == Role::Assistant
                        && matches!(
                            m.source_type,
                            Some(SourceType::Briefing | SourceType::Scheduled)
                        )
                        && m.deleted_at.is_none()
                        && m.kind == "message")
            })
            .cloned()
            .collect();
        page.sort_by_key(|m| m.id);
        page.split_off(page.len().saturating_sub(limit))
    }

    #[tokio::test]
    async fn lookback_in_one_query_reads_what_the_two_pages_read() {
        let store = seeded().await;
        let all: Vec<MessageRecord> = sqlx::query("SELECT * FROM messages ORDER BY id")
            .fetch_all(&store.read)
            .await
            .unwrap()
            .iter()
            .map(rows::message)
            .collect::<StoreResult<_>>()
            .unwrap();
        let mut briefings = 0;
        for conversation in [ConversationId(1), ConversationId(2)] {
            for before in [None, Some(12), Some(36), Some(61), Some(200)] {
                for until_ms in [None, Some(1_400), Some(1_000)] {
                    for with_later_answers in [false, true] {
                        let bound = Bound {
                            before: before.map(MessageId),
                            until_ms,
                            with_later_answers,
                        };
                        for limit in [0, 1, 4, 25, 100] {
                            for background_limit in [0, 1, 3, 100] {
                                let (window, background) = store
                                    .lookback_pages(conversation, bound, limit, background_limit)
                                    .await
                                    .unwrap();
                                let want_window = store
                                    .messages_page(conversation, bound, false, limit)
                                    .await
                                    .unwrap();
                                let want_background = if background_limit > 0 {
                                    store
                                        .messages_page(conversation, bound, true, background_limit)
                                        .await
                                        .unwrap()
                                } else {
                                    Vec::new()
                                };
                                let at = format!("{bound:?} {limit} {background_limit}");
                                assert_eq!(
                                    want_window,
                                    expected(&all, conversation, bound, false, limit),
                                    "{at}"
                                );
                                assert_eq!(
                                    want_background,
                                    expected(&all, conversation, bound, true, background_limit)
                                        .into_iter()
                                        .filter(|_| background_limit > 0)
                                        .collect::<Vec<_>>(),
                                    "{at}"
                                );
                                assert_eq!(window, want_window, "{at}");
                                assert_eq!(background, want_background, "{at}");
                                briefings += background.len();
                            }
                        }
                    }
                }
            }
        }
        // The cases cover background results, not only empty pages.
        assert!(briefings > 100, "{briefings}");
    }

    #[tokio::test]
    async fn a_corrupt_row_fails_the_lookback_as_it_fails_a_page() {
        for (column, value) in [
            ("sender_kind", "alien"),
            ("source_type", "carrier_pigeon"),
            ("audience", "{not json"),
            ("actions", "[1, 2]"),
            ("meta", "{"),
        ] {
            let store = seeded().await;
            sqlx::query(&format!("UPDATE messages SET {column} = ?1 WHERE id = 79"))
                .bind(value)
                .execute(&store.write)
                .await
                .unwrap();
            let page = store
                .messages_page(ConversationId(1), Bound::all(), false, 10)
                .await;
            let lookback = store
                .lookback_pages(ConversationId(1), Bound::all(), 10, 3)
                .await;
            match (page, lookback) {
                (Err(StoreError::Corrupt(a)), Err(StoreError::Corrupt(b))) => {
                    assert_eq!(a, b, "{column}")
                }
                other => panic!("{column}: {other:?}"),
            }
            // Beyond the pages, the corrupt row is not read.
            let bound = Bound::before(MessageId(79));
            assert!(
                store
                    .lookback_pages(ConversationId(1), bound, 10, 3)
                    .await
                    .is_ok()
            );
        }
    }
}
