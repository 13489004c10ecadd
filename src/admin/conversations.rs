use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, limit};
use crate::deps::Deps;
use crate::domain::{ConversationId, MessageId};
use crate::store::{Bound, Page};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    cursor: Option<i64>,
    limit: Option<usize>,
}

/// `GET /admin/conversations`: newest first.
pub async fn list(
    State(deps): State<Deps>,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query?;
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

/// `GET /admin/conversations/{id}/messages`: a page of history, oldest first within the page;
/// `next_cursor` pages further back.
pub async fn messages(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query?;
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
