use axum::Json;
use axum::extract::State;
use ctxgate_contract::SourceType;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::IntoParams;

use super::extract::{Path, Query};
use super::{ApiError, ErrorBody, limit, schema, time_param};
use crate::deps::Deps;
use crate::domain::{ConversationId, TaskId, TaskStatus};
use crate::store::{Page, TaskFilter, UsageGroup};

/// Filters of the task list, and paging.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TaskQuery {
    #[param(inline, value_type = Option<schema::TaskStatus>)]
    status: Option<String>,
    /// `webhook`, `talk`, `email`, `briefing`, `scheduled`, `heartbeat`, `subtask`, `admin`,
    /// `import`.
    source_type: Option<String>,
    /// A channel instance, such as `webhook:default`.
    channel: Option<String>,
    /// A conversation id.
    conversation: Option<i64>,
    /// RFC 3339, inclusive.
    #[param(format = DateTime)]
    created_after: Option<String>,
    /// RFC 3339, exclusive.
    #[param(format = DateTime)]
    created_before: Option<String>,
    /// The `next_cursor` of the previous page; omit it for the first page.
    cursor: Option<i64>,
    /// Items per page, 1–500.
    #[param(minimum = 1, maximum = 500, default = 50)]
    limit: Option<usize>,
}

/// List tasks, newest first.
#[utoipa::path(
    get,
    path = "/tasks",
    tag = "tasks",
    operation_id = "list_tasks",
    params(TaskQuery),
    responses(
        (status = 200, description = "A page of tasks", body = schema::TaskPage),
        (status = 400, description = "`invalid_parameter`: a filter is malformed or unknown, or `limit` is out of range", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn list(
    State(deps): State<Deps>,
    Query(q): Query<TaskQuery>,
) -> Result<Json<Value>, ApiError> {
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

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// How the totals are grouped.
    #[param(inline, value_type = Option<UsageBy>)]
    by: Option<String>,
    /// RFC 3339: tasks created at or after.
    #[param(format = DateTime)]
    since: Option<String>,
    /// RFC 3339: tasks created before.
    #[param(format = DateTime)]
    until: Option<String>,
}

#[derive(utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(default = "day")]
#[allow(dead_code)]
enum UsageBy {
    Conversation,
    User,
    Day,
    Brain,
}

/// Token and cost totals.
///
/// Totals of tasks' tokens (answers and triage apart) and costs, grouped.
#[utoipa::path(
    get,
    path = "/usage",
    tag = "gateway",
    operation_id = "usage_totals",
    params(UsageQuery),
    responses(
        (status = 200, description = "One row per group", body = schema::UsageList),
        (status = 400, description = "`invalid_parameter`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn usage(
    State(deps): State<Deps>,
    Query(q): Query<UsageQuery>,
) -> Result<Json<Value>, ApiError> {
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

/// Cancel a pending task.
#[utoipa::path(
    post,
    path = "/tasks/{id}/cancel",
    tag = "tasks",
    operation_id = "cancel_task",
    params(("id" = i64, Path, description = "Task id")),
    responses(
        (status = 200, description = "The task, cancelled", body = schema::TaskChanged),
        (status = 400, description = "`invalid_parameter`: the id is not an integer", body = ErrorBody),
        (status = 404, description = "`not_found`: no such task", body = ErrorBody),
        (status = 409, description = "`wrong_status`: the task is not pending", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
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

/// Queue a failed or cancelled task again.
///
/// The task gets the configured number of attempts afresh.
#[utoipa::path(
    post,
    path = "/tasks/{id}/retry",
    tag = "tasks",
    operation_id = "retry_task",
    params(("id" = i64, Path, description = "Task id")),
    responses(
        (status = 200, description = "The task, pending again", body = schema::TaskChanged),
        (status = 400, description = "`invalid_parameter`: the id is not an integer", body = ErrorBody),
        (status = 404, description = "`not_found`: no such task", body = ErrorBody),
        (status = 409, description = "`wrong_status`: the task is neither failed nor cancelled", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
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

/// The effective configuration, secrets redacted.
#[utoipa::path(
    get,
    path = "/config",
    tag = "gateway",
    operation_id = "effective_config",
    responses((status = 200, description = "The configuration in effect", body = schema::Config))
)]
pub async fn config(State(deps): State<Deps>) -> Json<Value> {
    Json(json!(deps.settings.as_ref()))
}

/// One task with its trigger message, attempts and deliveries.
#[utoipa::path(
    get,
    path = "/tasks/{id}",
    tag = "tasks",
    operation_id = "get_task",
    params(("id" = i64, Path, description = "Task id")),
    responses(
        (status = 200, description = "The task", body = schema::TaskDetail),
        (status = 400, description = "`invalid_parameter`: the id is not an integer", body = ErrorBody),
        (status = 404, description = "`not_found`: no such task", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
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
