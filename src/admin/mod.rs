//! The admin API under `/admin`: bearer-token protected, JSON in and out, stable error codes,
//! keyset paging (`?cursor=<id>&limit=<n>`, answers carry `next_cursor`).

mod agents;
mod channels;
mod context;
mod conversations;
mod error;
mod extract;
mod openapi;
mod schedules;
mod schema;
mod tasks;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::MethodRouter;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use utoipa::IntoParams;

pub use error::{ApiError, ErrorBody, ErrorDetail, json_errors};
pub use openapi::document as openapi_document;

use crate::config::Secret;
use crate::deps::Deps;

/// Where [`router`] is nested.
pub const PREFIX: &str = "/admin";

const MAX_LIMIT: usize = 500;

/// `(Method::M, path, on(MethodFilter::M, handler))`, the method written once.
macro_rules! table {
    ($($method:ident $path:literal => $handler:expr),* $(,)?) => {
        vec![$((
            Method::$method,
            $path,
            axum::routing::on(axum::routing::MethodFilter::$method, $handler),
        )),*]
    };
}

/// Every admin route: method, path under [`PREFIX`] (OpenAPI syntax), handler. The router is
/// built from this table and nothing else, and `tests/it/openapi.rs` checks it against the
/// OpenAPI document both ways: a route added here needs `#[utoipa::path]` on its handler and a
/// place in `openapi::AdminApi`'s `paths(...)`.
fn table() -> Vec<(Method, &'static str, MethodRouter<Deps>)> {
    table![
        GET "/openapi.json" => openapi::serve,
        GET "/tasks" => tasks::list,
        GET "/tasks/{id}" => tasks::detail,
        POST "/tasks/{id}/cancel" => tasks::cancel,
        POST "/tasks/{id}/retry" => tasks::retry,
        GET "/usage" => tasks::usage,
        GET "/config" => tasks::config,
        GET "/schedules" => schedules::list,
        POST "/schedules" => schedules::create,
        GET "/schedules/{id}" => schedules::get,
        PUT "/schedules/{id}" => schedules::update,
        DELETE "/schedules/{id}" => schedules::delete,
        POST "/schedules/{id}/enable" => schedules::enable,
        POST "/schedules/{id}/disable" => schedules::disable,
        POST "/schedules/{id}/run" => schedules::run_now,
        GET "/schedules/{id}/runs" => schedules::runs,
        GET "/channels" => channels::list,
        GET "/skipped" => channels::skipped,
        GET "/conversations" => conversations::list,
        GET "/conversations/{id}" => conversations::detail,
        GET "/conversations/{id}/messages" => conversations::messages,
        GET "/conversations/{id}/context" => context::preview,
        GET "/agents" => agents::list,
        POST "/agents/{id}/reset" => agents::reset,
    ]
}

/// The admin routes served, as (method, full path in OpenAPI syntax such as
/// `/admin/tasks/{id}`); `GET` ones answer `HEAD` too.
pub fn routes() -> Vec<(Method, String)> {
    table()
        .into_iter()
        .map(|(method, path, _)| (method, format!("{PREFIX}{path}")))
        .collect()
}

/// The admin routes (to nest under [`PREFIX`]), or `None` when no token is configured (the API is then disabled).
pub fn router(deps: Deps) -> Option<Router> {
    let tokens = Tokens {
        full: deps.settings.admin.token.clone()?,
        read_only: deps.settings.admin.read_only_token.clone(),
    };
    let routes = table()
        .into_iter()
        .fold(Router::new(), |router, (_, path, handler)| {
            router.route(path, handler)
        })
        // After the routes: it applies to those present.
        .method_not_allowed_fallback(|method: Method| async move {
            ApiError::method_not_allowed(&method)
        })
        .fallback(|| async { ApiError::not_found("admin route") })
        .with_state(deps)
        .layer(middleware::from_fn_with_state(tokens, require_token));
    Some(routes)
}

/// Keyset paging, the same on every list that pages.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// The `next_cursor` of the previous page; omit it for the first page.
    cursor: Option<i64>,
    /// Items per page, 1–500.
    #[param(minimum = 1, maximum = 500, default = 50)]
    limit: Option<usize>,
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
