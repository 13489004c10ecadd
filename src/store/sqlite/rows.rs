//! Row → record mapping. Unexpected stored values are reported as corrupt, never guessed.

use ctxgate_contract::{Audience, Role, SenderKind, SourceType};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::domain::{Action, ConversationId, DeliveryId, MessageId, TaskId, TaskStatus, Usage};
use crate::store::{
    AttemptRecord, ConversationRecord, DeliveryRecord, MessageRecord, StoreError, StoreResult,
    TaskRecord,
};

pub(super) fn sender_kind_str(k: SenderKind) -> &'static str {
    match k {
        SenderKind::User => "user",
        SenderKind::Guest => "guest",
        SenderKind::Bot => "bot",
        SenderKind::SelfBot => "self_bot",
        SenderKind::System => "system",
    }
}

pub(super) fn sender_kind(s: &str) -> StoreResult<SenderKind> {
    Ok(match s {
        "user" => SenderKind::User,
        "guest" => SenderKind::Guest,
        "bot" => SenderKind::Bot,
        "self_bot" => SenderKind::SelfBot,
        "system" => SenderKind::System,
        other => return Err(StoreError::Corrupt(format!("sender_kind {other:?}"))),
    })
}

pub(super) fn json_or<T: serde::de::DeserializeOwned>(
    raw: Option<String>,
    what: &str,
    empty: T,
) -> StoreResult<T> {
    match raw {
        None => Ok(empty),
        Some(s) => {
            serde_json::from_str(&s).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
        }
    }
}

pub(super) fn source_type(s: &str) -> StoreResult<SourceType> {
    SourceType::parse(s).ok_or_else(|| StoreError::Corrupt(format!("source_type {s:?}")))
}

fn usage(prompt: Option<i64>, completion: Option<i64>) -> Option<Usage> {
    match (prompt, completion) {
        (None, None) => None,
        (p, c) => Some(Usage {
            prompt_tokens: p.unwrap_or(0) as u64,
            completion_tokens: c.unwrap_or(0) as u64,
        }),
    }
}

pub(super) fn task(row: &SqliteRow) -> StoreResult<TaskRecord> {
    let status: String = row.try_get("status")?;
    let actions: Vec<Action> = json_or(row.try_get("actions")?, "task actions", Vec::new())?;
    let context: Option<serde_json::Value> =
        json_or(row.try_get("context")?, "task context", None)?;
    Ok(TaskRecord {
        id: TaskId(row.try_get("id")?),
        conversation_id: ConversationId(row.try_get("conversation_id")?),
        message_id: row.try_get::<Option<i64>, _>("message_id")?.map(MessageId),
        dedup_key: row.try_get("dedup_key")?,
        source_type: source_type(row.try_get("source_type")?)?,
        agent: row.try_get("agent")?,
        brain: row.try_get("brain")?,
        status: TaskStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("task status {status:?}")))?,
        attempts: row.try_get::<i64, _>("attempts")? as u32,
        max_attempts: row.try_get::<i64, _>("max_attempts")? as u32,
        available_at: row.try_get("available_at")?,
        lease_owner: row.try_get("lease_owner")?,
        lease_expires_at: row.try_get("lease_expires_at")?,
        last_error: row.try_get("last_error")?,
        result_text: row.try_get("result_text")?,
        actions,
        context,
        usage: usage(
            row.try_get("prompt_tokens")?,
            row.try_get("completion_tokens")?,
        ),
        triage_usage: usage(
            row.try_get("triage_prompt_tokens")?,
            row.try_get("triage_completion_tokens")?,
        ),
        cost: row.try_get("cost")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

pub(super) fn attempt(row: &SqliteRow) -> StoreResult<AttemptRecord> {
    Ok(AttemptRecord {
        attempt: row.try_get::<i64, _>("attempt")? as u32,
        worker: row.try_get("worker")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        outcome: row.try_get("outcome")?,
        error: row.try_get("error")?,
    })
}

pub(super) fn conversation(row: &SqliteRow) -> StoreResult<ConversationRecord> {
    Ok(ConversationRecord {
        id: ConversationId(row.try_get("id")?),
        channel: row.try_get("channel")?,
        external_id: row.try_get("external_id")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

pub(super) fn message(row: &SqliteRow) -> StoreResult<MessageRecord> {
    let role: String = row.try_get("role")?;
    let source: Option<String> = row.try_get("source_type")?;
    Ok(MessageRecord {
        id: MessageId(row.try_get("id")?),
        conversation_id: ConversationId(row.try_get("conversation_id")?),
        channel_message_id: row.try_get("channel_message_id")?,
        sender_id: row.try_get("sender_id")?,
        sender_name: row.try_get("sender_name")?,
        sender_kind: sender_kind(row.try_get("sender_kind")?)?,
        role: Role::parse(&role).ok_or_else(|| StoreError::Corrupt(format!("role {role:?}")))?,
        kind: row.try_get("kind")?,
        text: row.try_get("text")?,
        created_at: row.try_get("created_at")?,
        reply_to_channel_id: row.try_get("reply_to_channel_id")?,
        reply_to_message_id: row
            .try_get::<Option<i64>, _>("reply_to_message_id")?
            .map(MessageId),
        source_type: source.as_deref().map(source_type).transpose()?,
        task_id: row.try_get::<Option<i64>, _>("task_id")?.map(TaskId),
        agent: row.try_get("agent")?,
        audience: json_or(row.try_get("audience")?, "audience", Audience::Everyone)?,
        actions: json_or(row.try_get("actions")?, "message actions", Vec::new())?,
        meta: json_or(
            row.try_get("meta")?,
            "message meta",
            serde_json::Value::Null,
        )?,
        edited_at: row.try_get("edited_at")?,
        deleted_at: row.try_get("deleted_at")?,
    })
}

pub(super) fn delivery(row: &SqliteRow) -> StoreResult<DeliveryRecord> {
    Ok(DeliveryRecord {
        id: DeliveryId(row.try_get("id")?),
        task_id: row.try_get::<Option<i64>, _>("task_id")?.map(TaskId),
        conversation_id: ConversationId(row.try_get("conversation_id")?),
        conversation: row.try_get("external_id")?,
        channel: row.try_get("channel")?,
        idempotency_key: row.try_get("idempotency_key")?,
        kind: row.try_get("kind")?,
        text: row.try_get("text")?,
        reply_to: row.try_get("reply_to")?,
        meta: json_or(row.try_get("meta")?, "outbox meta", serde_json::Value::Null)?,
        status: row.try_get("status")?,
        attempts: row.try_get::<i64, _>("attempts")? as u32,
        available_at: row.try_get("available_at")?,
        last_error: row.try_get("last_error")?,
        channel_message_id: row.try_get("channel_message_id")?,
        created_at: row.try_get("created_at")?,
        delivered_at: row.try_get("delivered_at")?,
    })
}
