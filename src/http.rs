//! The HTTP server's routes: health, the webhook channel and the admin API, with a body limit, a
//! request timeout and a trace span per request.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use ctxgate_contract::Intake;
use ctxgate_webhook::{WebhookEndpoint, WebhookReceiver};
use serde_json::json;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;

use crate::admin::{self, ApiError, ErrorBody};
use crate::deps::Deps;

pub fn router(deps: Deps, intake: Arc<dyn Intake>) -> Router {
    let settings = deps.settings.clone();
    let endpoints: Vec<WebhookEndpoint> = settings
        .webhooks
        .iter()
        .filter(|(_, w)| w.enabled)
        .filter_map(|(name, w)| {
            Some(WebhookEndpoint {
                name: name.clone(),
                secret: w.secret.as_ref()?.expose().as_bytes().to_vec(),
                agent: None,
                window_secs: w.timestamp_tolerance.as_secs() as i64,
            })
        })
        .collect();
    let mut app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .with_state(deps.clone())
        .merge(WebhookReceiver::new(endpoints, intake.clone()).router())
        .merge(
            ctxgate_talk::receiver::BotReceiver::new(crate::talk::bot_endpoints(&settings), intake)
                .router(),
        );
    match admin::router(deps) {
        Some(admin) => app = app.nest(admin::PREFIX, admin),
        None => tracing::warn!(
            "admin API disabled: no admin token configured (set admin.token, admin.token_file or CTXGATE__ADMIN__TOKEN)"
        ),
    }
    app.fallback(|| async { ApiError::not_found("route") })
        .layer(DefaultBodyLimit::max(settings.http.body_limit_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            settings.http.request_timeout,
        ))
        // Outside the timeout, so that its 408 is JSON too.
        .layer(axum::middleware::map_response(admin::json_errors))
        .layer(TraceLayer::new_for_http())
}

/// The process answers.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
struct Status {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    status: String,
}

/// The public routes in the OpenAPI document (the admin routes are added in `crate::admin`).
#[derive(OpenApi)]
#[openapi(
    paths(healthz, ready, metrics, receive_webhook, receive_talk_bot),
    tags(
        (name = "health", description = "Liveness, readiness and metrics; no token."),
        (name = "inbound", description = "Messages from channels, each authenticated by its own signature."),
    )
)]
struct PublicApi;

pub fn public_openapi() -> utoipa::openapi::OpenApi {
    PublicApi::openapi()
}

/// The process is up.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "health",
    operation_id = "healthz",
    responses((status = 200, description = "`{\"status\": \"ok\"}`", body = Status))
)]
async fn healthz() -> axum::Json<serde_json::Value> {
    axum::Json(json!({"status": "ok"}))
}

/// Prometheus metrics.
///
/// OpenMetrics text: tasks by status and source, task and brain latency, tokens, poll lag, outbox
/// backlog, deliveries by outcome, triage fail-open count.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "health",
    operation_id = "metrics",
    responses((
        status = 200,
        description = "The metrics",
        content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8",
        body = String
    ))
)]
async fn metrics(State(deps): State<Deps>) -> impl IntoResponse {
    match deps.store.backlog().await {
        Ok((pending, running, outbox)) => {
            deps.metrics.tasks_pending.set(pending);
            deps.metrics.tasks_running.set(running);
            deps.metrics.outbox_backlog.set(outbox);
        }
        Err(e) => tracing::warn!(error = %e, "metrics: backlog unavailable"),
    }
    channel_metrics(&deps);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        deps.metrics.render(),
    )
}

/// Poll lag and reachability of the polled channels, read from their status at scrape time.
fn channel_metrics(deps: &Deps) {
    let label = |channel: String| crate::metrics::ChannelLabels { channel };
    let now = chrono::Utc::now();
    let leases = deps.leases.lock().expect("leases lock").clone();
    for lease in leases.iter().map(|l| l.get()) {
        let labels = crate::metrics::LeaseLabels { lease: lease.name };
        deps.metrics
            .lease_held
            .get_or_create(&labels)
            .set(i64::from(lease.held));
    }
    for (name, poller) in deps.talk_pollers.get().into_iter().flatten() {
        let status = poller.current().status();
        let channel = crate::talk::channel_name(name);
        let lag = status
            .rooms
            .iter()
            .filter_map(|r| r.last_lag_secs)
            .fold(0.0, f64::max);
        deps.metrics
            .poll_lag
            .get_or_create(&label(channel.clone()))
            .set(lag);
        let up = status.backoff_until.is_none_or(|until| until <= now);
        deps.metrics
            .channel_up
            .get_or_create(&label(channel))
            .set(i64::from(up));
    }
    for (name, tracker) in deps.email_trackers.get().into_iter().flatten() {
        let status = tracker.current().status();
        let channel = crate::email::channel_name(name);
        let lag = status.last_poll_at.map_or(0.0, |at| {
            (now - at).num_milliseconds().max(0) as f64 / 1000.0
        });
        deps.metrics
            .poll_lag
            .get_or_create(&label(channel.clone()))
            .set(lag);
        deps.metrics
            .channel_up
            .get_or_create(&label(channel))
            .set(i64::from(status.connected));
    }
}

/// The store answers.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "health",
    operation_id = "readyz",
    responses(
        (status = 200, description = "`{\"status\": \"ready\"}`", body = Status),
        (status = 503, description = "`store_unavailable`: the store is not reachable; `store_unwritable`: its disk is full or the database is read-only (with `reason`)", body = ErrorBody),
    )
)]
async fn ready(State(deps): State<Deps>) -> impl IntoResponse {
    if let Some(u) = deps.health.unwritable() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"error": {
                "code": "store_unwritable",
                "message": format!(
                    "the store cannot take writes ({}) since {}: {}; intake and work are paused until it can",
                    u.reason, u.since.to_rfc3339(), u.message
                ),
                "reason": u.reason,
            }})),
        );
    }
    match deps.store.ping().await {
        Ok(()) => (StatusCode::OK, axum::Json(json!({"status": "ready"}))),
        Err(e) => {
            tracing::warn!(error = %e, "not ready: store unreachable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(
                    json!({"error": {"code": "store_unavailable", "message": "the store is not reachable"}}),
                ),
            )
        }
    }
}

/// Receive a message on a signed webhook.
///
/// Served by the webhook channel (`channels/webhook`); see `docs/webhooks.md` for the signature.
/// Only for the OpenAPI document.
#[utoipa::path(
    post,
    path = "/webhooks/{name}",
    tag = "inbound",
    operation_id = "receive_webhook",
    params(
        ("name" = String, Path, description = "A configured, enabled webhook"),
        ("x-ctxgate-timestamp" = i64, Header, description = "Unix seconds, within the webhook's tolerance"),
        ("x-ctxgate-signature" = String, Header, description = "HMAC-SHA256 of the timestamp and body with the webhook's secret"),
    ),
    request_body(
        content = serde_json::Value,
        description = "`conversation`, `sender`, `text`, and optionally `sender_name`, `message_id`, `reply_to`, `callback_url`, `trigger`, `agent`",
        example = json!({"conversation": "support-7", "sender": "u1", "text": "hello"})
    ),
    responses(
        (status = 202, description = "Stored; `task_id`, `conversation_id`, `message_id`, `duplicate`", body = serde_json::Value),
        (status = 401, description = "Missing, stale or wrong signature, or a replay", body = ErrorBody),
        (status = 404, description = "`unknown_webhook`", body = ErrorBody),
        (status = 413, description = "`body_too_large`", body = ErrorBody),
        (status = 422, description = "The payload is not a valid message", body = ErrorBody),
        (status = 503, description = "`store_unavailable` or `shutting_down`: retry", body = ErrorBody),
    )
)]
#[allow(dead_code)]
fn receive_webhook() {}

/// Receive a Nextcloud Talk bot event.
///
/// Served by the Talk channel (`channels/talk`) for accounts in bot mode; see `docs/talk.md`.
/// Only for the OpenAPI document.
#[utoipa::path(
    post,
    path = "/talk/{account}/bot",
    tag = "inbound",
    operation_id = "receive_talk_bot",
    params(
        ("account" = String, Path, description = "A Talk account in bot mode"),
        ("X-Nextcloud-Talk-Random" = String, Header, description = "The signature's random"),
        ("X-Nextcloud-Talk-Signature" = String, Header, description = "HMAC-SHA256 of random and body with the bot secret"),
        ("X-Nextcloud-Talk-Backend" = String, Header, description = "The Nextcloud server, which must be the configured one"),
    ),
    request_body(content = serde_json::Value, description = "An Activity Streams event from Talk"),
    responses(
        (status = 200, description = "Stored, or ignored (`{\"status\": \"ignored\"}`)", body = serde_json::Value),
        (status = 400, description = "`bad_payload` or `invalid_event`", body = ErrorBody),
        (status = 401, description = "`missing_signature` or `bad_signature`", body = ErrorBody),
        (status = 403, description = "`unknown_backend`", body = ErrorBody),
        (status = 404, description = "`unknown_account`", body = ErrorBody),
        (status = 503, description = "`store_unavailable` or `shutting_down`: retry", body = ErrorBody),
    )
)]
#[allow(dead_code)]
fn receive_talk_bot() {}
