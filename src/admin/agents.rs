//! `GET /admin/agents` and `POST /admin/agents/{id}/reset`: the configured assistants, what
//! each is doing, its brain sessions, and a way to make one start its sessions over.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::extract::{Path, Query};
use super::{ApiError, ErrorBody};
use crate::deps::Deps;
use crate::domain::ConversationId;

/// One assistant and how it is doing.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentStatus {
    pub id: String,
    pub name: String,
    /// The agent's own brain; `null` means each channel's brain.
    pub brain: Option<String>,
    /// Channel instances it answers on; empty means all.
    pub serves: Vec<String>,
    /// Whether it answers messages addressed to no agent.
    pub default: bool,
    /// `working` (a task is running), `error` (its newest finished task failed) or `idle`.
    pub status: String,
    pub running_tasks: i64,
    pub pending_tasks: i64,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_activity: Option<DateTime<Utc>>,
    /// The error of its newest finished task, when that failed.
    pub last_error: Option<String>,
    /// Brain sessions it keeps (one per conversation, brains that keep sessions only).
    pub sessions: i64,
    /// Age of its newest session in seconds.
    pub newest_session_age_secs: Option<i64>,
    /// Input tokens of its largest session (a session is renewed past
    /// `session_max_input_tokens`).
    pub max_session_input_tokens: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub agents: Vec<AgentStatus>,
}

/// The configured agents (or the implicit `default` one), what each is doing and its sessions.
#[utoipa::path(
    get,
    path = "/agents",
    tag = "agents",
    operation_id = "list_agents",
    responses(
        (status = 200, description = "The agents", body = AgentList),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn list(State(deps): State<Deps>) -> Result<Json<AgentList>, ApiError> {
    let activity = deps.store.agent_activity().await?;
    let now = deps.clock.now_ms();
    let at = |ms: i64| Utc.timestamp_millis_opt(ms).single();
    let agents = deps
        .settings
        .agent_list()
        .into_iter()
        .map(|a| {
            let act = activity
                .iter()
                .find(|x| x.agent == a.id)
                .cloned()
                .unwrap_or_default();
            let status = if act.running > 0 {
                "working"
            } else if act.last_outcome.as_deref() == Some("failed") {
                "error"
            } else {
                "idle"
            };
            AgentStatus {
                name: a.display_name().to_owned(),
                id: a.id,
                brain: a.brain,
                serves: a.serves,
                default: a.default,
                status: status.to_owned(),
                running_tasks: act.running,
                pending_tasks: act.pending,
                last_activity: act.last_activity.and_then(at),
                last_error: act
                    .last_error
                    .filter(|_| act.last_outcome.as_deref() == Some("failed")),
                sessions: act.sessions,
                newest_session_age_secs: act
                    .newest_session_started_at
                    .filter(|t| *t > 0)
                    .map(|t| (now - t).max(0) / 1000),
                max_session_input_tokens: act.max_session_input_tokens,
            }
        })
        .collect();
    Ok(Json(AgentList { agents }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ResetQuery {
    /// Only the session in this conversation (default: all of the agent's sessions).
    conversation: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ResetDone {
    /// Sessions that will start over at the agent's next task in their conversation.
    pub sessions_reset: u64,
}

/// Make an agent start its brain sessions over.
///
/// Each reset session is not resumed again: the agent's next task in that conversation starts
/// a new session, restored from the gateway's history with the context-restored notice.
#[utoipa::path(
    post,
    path = "/agents/{id}/reset",
    tag = "agents",
    operation_id = "reset_agent",
    params(("id" = String, Path, description = "Agent id"), ResetQuery),
    responses(
        (status = 200, description = "How many sessions were reset", body = ResetDone),
        (status = 400, description = "`invalid_parameter`", body = ErrorBody),
        (status = 404, description = "`not_found`: no such agent", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn reset(
    State(deps): State<Deps>,
    Path(id): Path<String>,
    Query(q): Query<ResetQuery>,
) -> Result<Json<ResetDone>, ApiError> {
    if deps.settings.agent(&id).is_none() {
        return Err(ApiError::not_found("agent"));
    }
    let n = deps
        .store
        .reset_sessions(&id, q.conversation.map(ConversationId), "admin_reset")
        .await?;
    tracing::info!(agent = %id, sessions = n, "agent sessions reset by the admin API");
    Ok(Json(ResetDone { sessions_reset: n }))
}
