//! `/admin/schedules`: list, create, update, enable/disable, delete, run now, run history.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::extract::{Json as JsonBody, Path, Query};
use super::{ApiError, ErrorBody, PageQuery, limit, schema};
use crate::config::ScheduleSpec;
use crate::deps::Deps;
use crate::scheduler::{CronSpec, Scheduler};
use crate::store::{Page, ScheduleRecord};

/// Checks a schedule as config validation would, and computes its first fire time.
fn check(deps: &Deps, spec: &ScheduleSpec) -> Result<Option<i64>, ApiError> {
    let bad = |m: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_schedule", m);
    let cron = CronSpec::parse(&spec.cron, &spec.timezone).map_err(bad)?;
    if spec.name.trim().is_empty() {
        return Err(bad("name must not be empty".into()));
    }
    if spec.prompt.as_deref().is_none_or(|p| p.trim().is_empty()) {
        return Err(bad(
            "prompt is required (prompt_file only works in the configuration)".into(),
        ));
    }
    if !deps.settings.brains.contains_key(&spec.brain) {
        return Err(bad(format!("no brain named {:?}", spec.brain)));
    }
    deps.settings.check_target(&spec.target).map_err(bad)?;
    Ok(cron.next_after(deps.clock.now_ms()))
}

async fn find(deps: &Deps, id: i64) -> Result<ScheduleRecord, ApiError> {
    deps.store
        .get_schedule(id)
        .await?
        .ok_or_else(|| ApiError::not_found("schedule"))
}

/// List schedules.
#[utoipa::path(
    get,
    path = "/schedules",
    tag = "schedules",
    operation_id = "list_schedules",
    responses(
        (status = 200, description = "Every schedule", body = schema::ScheduleList),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn list(State(deps): State<Deps>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "items": deps.store.list_schedules().await? })))
}

/// One schedule.
#[utoipa::path(
    get,
    path = "/schedules/{id}",
    tag = "schedules",
    operation_id = "get_schedule",
    params(("id" = i64, Path, description = "Schedule id")),
    responses(
        (status = 200, description = "The schedule", body = schema::Schedule),
        (status = 400, description = "`invalid_parameter`: the id is not an integer", body = ErrorBody),
        (status = 404, description = "`not_found`: no such schedule", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn get(State(deps): State<Deps>, Path(id): Path<i64>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(find(&deps, id).await?)))
}

/// Create a schedule.
///
/// Checked as the configuration would be: cron and time zone, a prompt, a configured brain and a
/// valid target.
#[utoipa::path(
    post,
    path = "/schedules",
    tag = "schedules",
    operation_id = "create_schedule",
    request_body = schema::ScheduleSpec,
    responses(
        (status = 201, description = "The schedule, created", body = schema::Schedule),
        (status = 400, description = "`invalid_body`: not JSON, or not a schedule (missing or unknown fields)", body = ErrorBody),
        (status = 409, description = "`name_taken`: a schedule with that name exists", body = ErrorBody),
        (status = 413, description = "`body_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_schedule`: cron, time zone, prompt, brain or target is not valid", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn create(
    State(deps): State<Deps>,
    JsonBody(spec): JsonBody<ScheduleSpec>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let next = check(&deps, &spec)?;
    let taken = deps.store.list_schedules().await?;
    if taken.iter().any(|s| s.name == spec.name) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "name_taken",
            format!("a schedule named {:?} exists", spec.name),
        ));
    }
    let now = deps.clock.now_ms();
    let max = deps.settings.scheduler.max_failures;
    let s = deps
        .store
        .put_schedule(&spec, "api", next, max, now)
        .await?;
    Ok((StatusCode::CREATED, Json(json!(s))))
}

/// Replace a schedule's definition.
///
/// The name cannot change. Checked as in `create_schedule`.
#[utoipa::path(
    put,
    path = "/schedules/{id}",
    tag = "schedules",
    operation_id = "update_schedule",
    params(("id" = i64, Path, description = "Schedule id")),
    request_body = schema::ScheduleSpec,
    responses(
        (status = 200, description = "The schedule, updated", body = schema::Schedule),
        (status = 400, description = "`invalid_body`: not JSON, or not a schedule; `invalid_parameter`: the id is not an integer, or the name changed", body = ErrorBody),
        (status = 404, description = "`not_found`: no such schedule", body = ErrorBody),
        (status = 413, description = "`body_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`", body = ErrorBody),
        (status = 422, description = "`invalid_schedule`: cron, time zone, prompt, brain or target is not valid", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn update(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
    JsonBody(spec): JsonBody<ScheduleSpec>,
) -> Result<Json<Value>, ApiError> {
    let old = find(&deps, id).await?;
    if spec.name != old.name {
        return Err(ApiError::bad_parameter("a schedule's name cannot change"));
    }
    let next = check(&deps, &spec)?;
    let now = deps.clock.now_ms();
    let max = deps.settings.scheduler.max_failures;
    let s = deps
        .store
        .put_schedule(&spec, &old.source, next, max, now)
        .await?;
    Ok(Json(json!(s)))
}

/// Enable a schedule.
///
/// Its next fire time is computed from now.
#[utoipa::path(
    post,
    path = "/schedules/{id}/enable",
    tag = "schedules",
    operation_id = "enable_schedule",
    params(("id" = i64, Path, description = "Schedule id")),
    responses(
        (status = 200, description = "The schedule, enabled", body = schema::Schedule),
        (status = 400, description = "`invalid_parameter`: the id is not an integer, or the stored cron no longer parses", body = ErrorBody),
        (status = 404, description = "`not_found`: no such schedule", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn enable(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let s = find(&deps, id).await?;
    let now = deps.clock.now_ms();
    let next = CronSpec::parse(&s.spec.cron, &s.spec.timezone)
        .map_err(ApiError::bad_parameter)?
        .next_after(now);
    deps.store
        .set_schedule_enabled(id, true, next, None, now)
        .await?;
    Ok(Json(json!(find(&deps, id).await?)))
}

/// Disable a schedule.
#[utoipa::path(
    post,
    path = "/schedules/{id}/disable",
    tag = "schedules",
    operation_id = "disable_schedule",
    params(("id" = i64, Path, description = "Schedule id")),
    responses(
        (status = 200, description = "The schedule, disabled", body = schema::Schedule),
        (status = 400, description = "`invalid_parameter`: the id is not an integer", body = ErrorBody),
        (status = 404, description = "`not_found`: no such schedule", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn disable(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    find(&deps, id).await?;
    let now = deps.clock.now_ms();
    deps.store
        .set_schedule_enabled(id, false, None, Some("disabled by an operator"), now)
        .await?;
    Ok(Json(json!(find(&deps, id).await?)))
}

/// Delete a schedule and its run history.
#[utoipa::path(
    delete,
    path = "/schedules/{id}",
    tag = "schedules",
    operation_id = "delete_schedule",
    params(("id" = i64, Path, description = "Schedule id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "`invalid_parameter`: the id is not an integer", body = ErrorBody),
        (status = 404, description = "`not_found`: no such schedule", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn delete(State(deps): State<Deps>, Path(id): Path<i64>) -> Result<StatusCode, ApiError> {
    if deps.store.delete_schedule(id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("schedule"))
    }
}

/// Run a schedule now.
///
/// Queues its briefing task at once; the regular fire times do not change.
#[utoipa::path(
    post,
    path = "/schedules/{id}/run",
    tag = "schedules",
    operation_id = "run_schedule",
    params(("id" = i64, Path, description = "Schedule id")),
    responses(
        (status = 202, description = "The briefing task is queued", body = schema::RunStarted),
        (status = 400, description = "`invalid_parameter`: the id is not an integer", body = ErrorBody),
        (status = 404, description = "`not_found`: no such schedule", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn run_now(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let s = find(&deps, id).await?;
    let task = Scheduler::new(deps.clone()).run_now(&s).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "task_id": task }))))
}

/// A schedule's run history, newest first.
#[utoipa::path(
    get,
    path = "/schedules/{id}/runs",
    tag = "schedules",
    operation_id = "list_schedule_runs",
    params(("id" = i64, Path, description = "Schedule id"), PageQuery),
    responses(
        (status = 200, description = "A page of runs", body = schema::RunPage),
        (status = 400, description = "`invalid_parameter`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such schedule", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn runs(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
    Query(q): Query<PageQuery>,
) -> Result<Json<Value>, ApiError> {
    find(&deps, id).await?;
    let page = Page {
        before: q.cursor,
        limit: limit(q.limit)?,
    };
    let items = deps.store.schedule_runs(id, &page).await?;
    let next = (items.len() == page.limit)
        .then(|| items.last().map(|r| r.id))
        .flatten();
    Ok(Json(json!({ "items": items, "next_cursor": next })))
}
