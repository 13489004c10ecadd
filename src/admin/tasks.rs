use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use ctxgate_contract::SourceType;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, limit, time_param};
use crate::deps::Deps;
use crate::domain::{ConversationId, TaskId, TaskStatus};
use crate::store::{Page, TaskFilter, UsageGroup};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskQuery {
    status: Option<String>,
    source_type: Option<String>,
    channel: Option<String>,
    conversation: Option<i64>,
    created_after: Option<String>,
    created_before: Option<String>,
    cursor: Option<i64>,
    limit: Option<usize>,
}

/// `GET /admin/tasks`: newest first, filtered.
pub async fn list(
    State(deps): State<Deps>,
    query: Result<Query<TaskQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query?;
    let status = q
        .status
        .as_deref()
        .map(|s| {
            TaskStatus::parse(s).ok_or_else(|| {
                ApiError::bad_parameter(
                    "status must be one of pending, running, completed, failed, cancelled",
                )
            })
        })
        .transpose()?;
    let source_type = q
        .source_type
        .as_deref()
        .map(|s| {
            SourceType::parse(s)
                .ok_or_else(|| ApiError::bad_parameter(format!("unknown source_type {s:?}")))
        })
        .transpose()?;
    let filter = TaskFilter {
        status,
        source_type,
        channel: q.channel,
        conversation: q.conversation.map(ConversationId),
        created_after: time_param("created_after", q.created_after.as_deref())?,
        created_before: time_param("created_before", q.created_before.as_deref())?,
        page: Page {
            before: q.cursor,
            limit: limit(q.limit)?,
        },
    };
    let tasks = deps.store.list_tasks(&filter).await?;
    let next = (tasks.len() == filter.page.limit)
        .then(|| tasks.last().map(|t| t.id))
        .flatten();
    Ok(Json(json!({ "items": tasks, "next_cursor": next })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    by: Option<String>,
    since: Option<String>,
    until: Option<String>,
}

/// `GET /admin/usage?by=conversation|user|day|brain&since=&until=`: token totals of tasks
/// (answers and triage apart).
pub async fn usage(
    State(deps): State<Deps>,
    query: Result<Query<UsageQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query?;
    let by = match q.by.as_deref().unwrap_or("day") {
        "conversation" => UsageGroup::Conversation,
        "user" => UsageGroup::User,
        "day" => UsageGroup::Day,
        "brain" => UsageGroup::Brain,
        _ => {
            return Err(ApiError::bad_parameter(
                "by must be one of conversation, user, day, brain",
            ));
        }
    };
    let since = time_param("since", q.since.as_deref())?;
    let until = time_param("until", q.until.as_deref())?;
    let items = deps.store.usage_totals(by, since, until).await?;
    Ok(Json(json!({ "items": items })))
}

/// `POST /admin/tasks/{id}/cancel`: a pending task is cancelled (409 otherwise).
pub async fn cancel(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    change(
        &deps,
        id,
        |deps, id, now| async move { deps.store.cancel_task(id, now).await },
        "only a pending task can be cancelled",
    )
    .await
}

/// `POST /admin/tasks/{id}/retry`: a failed or cancelled task is queued again with the
/// configured number of attempts (409 otherwise).
pub async fn retry(State(deps): State<Deps>, Path(id): Path<i64>) -> Result<Json<Value>, ApiError> {
    let attempts = deps.settings.worker.max_attempts;
    let result = change(
        &deps,
        id,
        |deps, id, now| async move { deps.store.retry_task(id, attempts, now).await },
        "only a failed or cancelled task can be retried",
    )
    .await;
    deps.task_ready.notify_one();
    result
}

async fn change<F, Fut>(deps: &Deps, id: i64, f: F, refused: &str) -> Result<Json<Value>, ApiError>
where
    F: FnOnce(Deps, TaskId, i64) -> Fut,
    Fut: std::future::Future<Output = crate::store::StoreResult<bool>>,
{
    let id = TaskId(id);
    if deps.store.get_task(id).await?.is_none() {
        return Err(ApiError::not_found("task"));
    }
    if !f(deps.clone(), id, deps.clock.now_ms()).await? {
        return Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "wrong_status",
            refused,
        ));
    }
    let task = deps.store.get_task(id).await?;
    Ok(Json(json!({ "task": task })))
}

/// `GET /admin/config`: the effective configuration, secrets redacted.
pub async fn config(State(deps): State<Deps>) -> Json<Value> {
    Json(json!(deps.settings.as_ref()))
}

/// `GET /admin/tasks/{id}`: the task with its attempts, trigger message and deliveries.
pub async fn detail(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let store = &deps.store;
    let task = store
        .get_task(TaskId(id))
        .await?
        .ok_or_else(|| ApiError::not_found("task"))?;
    let attempts = store.task_attempts(task.id).await?;
    let deliveries = store.deliveries_for_task(task.id).await?;
    let trigger = match task.message_id {
        Some(m) => store.get_message(m).await?,
        None => None,
    };
    Ok(Json(json!({
        "task": task,
        "trigger": trigger,
        "attempts": attempts,
        "deliveries": deliveries,
    })))
}
