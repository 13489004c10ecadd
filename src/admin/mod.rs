//! The admin API under `/admin`: bearer-token protected, JSON in and out, stable error codes,
//! keyset paging (`?cursor=<id>&limit=<n>`, answers carry `next_cursor`).

mod channels;
mod context;
mod conversations;
mod error;
mod schedules;
mod tasks;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use error::ApiError;

use crate::config::Secret;
use crate::deps::Deps;

const MAX_LIMIT: usize = 500;

/// The admin routes (to nest under `/admin`), or `None` when no token is configured (the API is then disabled).
pub fn router(deps: Deps) -> Option<Router> {
    let tokens = Tokens {
        full: deps.settings.admin.token.clone()?,
        read_only: deps.settings.admin.read_only_token.clone(),
    };
    let routes = Router::new()
        .route("/tasks", get(tasks::list))
        .route("/tasks/{id}", get(tasks::detail))
        .route("/usage", get(tasks::usage))
        .route("/config", get(tasks::config))
        .route("/tasks/{id}/cancel", post(tasks::cancel))
        .route("/tasks/{id}/retry", post(tasks::retry))
        .route("/schedules", get(schedules::list).post(schedules::create))
        .route(
            "/schedules/{id}",
            get(schedules::get)
                .put(schedules::update)
                .delete(schedules::delete),
        )
        .route("/schedules/{id}/enable", post(schedules::enable))
        .route("/schedules/{id}/disable", post(schedules::disable))
        .route("/schedules/{id}/run", post(schedules::run_now))
        .route("/schedules/{id}/runs", get(schedules::runs))
        .route("/channels", get(channels::list))
        .route("/skipped", get(channels::skipped))
        .route("/conversations", get(conversations::list))
        .route("/conversations/{id}", get(conversations::detail))
        .route("/conversations/{id}/messages", get(conversations::messages))
        .route("/conversations/{id}/context", get(context::preview))
        .fallback(|| async { ApiError::not_found("admin route") })
        .with_state(deps)
        .layer(middleware::from_fn_with_state(tokens, require_token));
    Some(routes)
}

/// The admin tokens: full access, and optionally read-only (GET only).
#[derive(Clone)]
struct Tokens {
    full: Secret,
    read_only: Option<Secret>,
}

/// Compares digests in constant time (so neither content nor length leaks through timing).
fn same(given: &str, secret: &Secret) -> bool {
    let a = Sha256::digest(given.as_bytes());
    let b = Sha256::digest(secret.expose().as_bytes());
    bool::from(a.ct_eq(&b))
}

async fn require_token(
    State(tokens): State<Tokens>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let given = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let Some(given) = given else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send Authorization: Bearer <admin token>",
        ));
    };
    if same(given, &tokens.full) {
        return Ok(next.run(request).await);
    }
    if tokens.read_only.as_ref().is_some_and(|t| same(given, t)) {
        if request.method() == axum::http::Method::GET {
            return Ok(next.run(request).await);
        }
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "read_only_token",
            "the read-only token cannot change anything",
        ));
    }
    Err(ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "the admin token is not valid",
    ))
}

/// `limit` within 1..=500 (default 50).
fn limit(raw: Option<usize>) -> Result<usize, ApiError> {
    match raw {
        None => Ok(50),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::bad_parameter("limit must be between 1 and 500")),
    }
}

fn time_param(name: &str, raw: Option<&str>) -> Result<Option<i64>, ApiError> {
    raw.map(|s| {
        chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| t.timestamp_millis())
            .map_err(|_| ApiError::bad_parameter(format!("{name} must be an RFC 3339 time")))
    })
    .transpose()
}
