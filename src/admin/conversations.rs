use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::extract::{Path, Query};
use super::{ApiError, ErrorBody, PageQuery, limit, schema};
use crate::deps::Deps;
use crate::domain::{ConversationId, MessageId};
use crate::store::{Bound, Page};

/// List conversations, newest first.
#[utoipa::path(
    get,
    path = "/conversations",
    tag = "conversations",
    operation_id = "list_conversations",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of conversations", body = schema::ConversationPage),
        (status = 400, description = "`invalid_parameter`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn list(
    State(deps): State<Deps>,
    Query(q): Query<PageQuery>,
) -> Result<Json<Value>, ApiError> {
    let page = Page {
        before: q.cursor,
        limit: limit(q.limit)?,
    };
    let items = deps.store.list_conversations(&page).await?;
    let next = (items.len() == page.limit)
        .then(|| items.last().map(|c| c.id))
        .flatten();
    Ok(Json(json!({ "items": items, "next_cursor": next })))
}

/// One conversation.
#[utoipa::path(
    get,
    path = "/conversations/{id}",
    tag = "conversations",
    operation_id = "get_conversation",
    params(("id" = i64, Path, description = "Conversation id")),
    responses(
        (status = 200, description = "The conversation", body = schema::Conversation),
        (status = 400, description = "`invalid_parameter`: the id is not an integer", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn detail(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let c = deps
        .store
        .get_conversation(ConversationId(id))
        .await?
        .ok_or_else(|| ApiError::not_found("conversation"))?;
    Ok(Json(json!(c)))
}

/// A conversation's history, page by page.
///
/// The newest page first; oldest first within a page; `next_cursor` pages further back.
#[utoipa::path(
    get,
    path = "/conversations/{id}/messages",
    tag = "conversations",
    operation_id = "list_messages",
    params(("id" = i64, Path, description = "Conversation id"), PageQuery),
    responses(
        (status = 200, description = "A page of messages", body = schema::MessagePage),
        (status = 400, description = "`invalid_parameter`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn messages(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
    Query(q): Query<PageQuery>,
) -> Result<Json<Value>, ApiError> {
    let id = ConversationId(id);
    if deps.store.get_conversation(id).await?.is_none() {
        return Err(ApiError::not_found("conversation"));
    }
    let limit = limit(q.limit)?;
    let items = deps
        .store
        .messages_before(
            id,
            Bound {
                before: q.cursor.map(MessageId),
                until_ms: None,
                with_later_answers: false,
            },
            limit,
        )
        .await?;
    let next = (items.len() == limit)
        .then(|| items.first().map(|m| m.id))
        .flatten();
    Ok(Json(json!({ "items": items, "next_cursor": next })))
}
