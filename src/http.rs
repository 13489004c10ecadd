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

use crate::admin::{self, ApiError};
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
        .route(
            "/healthz",
            get(|| async { axum::Json(json!({"status": "ok"})) }),
        )
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .with_state(deps.clone())
        .merge(WebhookReceiver::new(endpoints, intake.clone()).router())
        .merge(
            ctxgate_talk::receiver::BotReceiver::new(crate::talk::bot_endpoints(&settings), intake)
                .router(),
        );
    match admin::router(deps) {
        Some(admin) => app = app.nest("/admin", admin),
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
        .layer(TraceLayer::new_for_http())
}

async fn metrics(State(deps): State<Deps>) -> impl IntoResponse {
    match deps.store.backlog().await {
        Ok((pending, running, outbox)) => {
            deps.metrics.tasks_pending.set(pending);
            deps.metrics.tasks_running.set(running);
            deps.metrics.outbox_backlog.set(outbox);
        }
        Err(e) => tracing::warn!(error = %e, "metrics: backlog unavailable"),
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        deps.metrics.render(),
    )
}

async fn ready(State(deps): State<Deps>) -> impl IntoResponse {
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
