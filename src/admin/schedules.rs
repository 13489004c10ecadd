//! `/admin/schedules`: list, create, update, enable/disable, delete, run now, run history.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, limit};
use crate::config::ScheduleSpec;
use crate::deps::Deps;
use crate::scheduler::{CronSpec, Scheduler};
use crate::store::{Page, ScheduleRecord};

fn body<T>(b: Result<Json<T>, JsonRejection>) -> Result<T, ApiError> {
    b.map(|Json(v)| v)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", e.body_text()))
}

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

pub async fn list(State(deps): State<Deps>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "items": deps.store.list_schedules().await? })))
}

pub async fn get(State(deps): State<Deps>, Path(id): Path<i64>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(find(&deps, id).await?)))
}

pub async fn create(
    State(deps): State<Deps>,
    spec: Result<Json<ScheduleSpec>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let spec = body(spec)?;
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

pub async fn update(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
    spec: Result<Json<ScheduleSpec>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let spec = body(spec)?;
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

pub async fn delete(State(deps): State<Deps>, Path(id): Path<i64>) -> Result<StatusCode, ApiError> {
    if deps.store.delete_schedule(id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("schedule"))
    }
}

pub async fn run_now(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let s = find(&deps, id).await?;
    let task = Scheduler::new(deps.clone()).run_now(&s).await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "task_id": task }))))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsQuery {
    cursor: Option<i64>,
    limit: Option<usize>,
}

pub async fn runs(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
    query: Result<Query<RunsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query?;
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
