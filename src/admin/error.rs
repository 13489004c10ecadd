use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::store::StoreError;

/// An API error: a status, a stable snake_case code, and a message that never leaks internals.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

/// Every error answer of the gateway's HTTP API, whatever its status.
#[derive(Debug, Serialize, ToSchema)]
#[schema(examples(json!({"error": {"code": "not_found", "message": "task not found"}})))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, snake_case: `invalid_parameter`, `invalid_body`, `unauthorized`,
    /// `read_only_token`, `not_found`, `method_not_allowed`, `wrong_status`, `name_taken`,
    /// `body_too_large`, `unsupported_media_type`, `invalid_schedule`, `store_unavailable`, …
    #[schema(examples("not_found"))]
    pub code: String,
    /// What is wrong, for a person; never internals.
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        )
    }

    pub fn bad_parameter(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_parameter", message)
    }

    /// A route that exists, asked with a method it does not have (the `Allow` header, added by
    /// the router, lists those it has).
    pub fn method_not_allowed(method: &Method) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("{method} is not allowed here; the Allow header lists the methods that are"),
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e, "admin request failed in the store");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "the store could not answer; see the gateway log",
        )
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> Self {
        Self::bad_parameter(e.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(e: PathRejection) -> Self {
        if e.status() == StatusCode::BAD_REQUEST {
            Self::bad_parameter(e.body_text())
        } else {
            tracing::error!(error = %e.body_text(), "admin route without its path parameters");
            Self::new(e.status(), "internal", "the route is misconfigured")
        }
    }
}

impl From<JsonRejection> for ApiError {
    /// A body that does not parse as the documented shape is a 400 (`invalid_body`); checks of
    /// what a well-formed body means answer 422 in the handlers.
    fn from(e: JsonRejection) -> Self {
        match e {
            JsonRejection::MissingJsonContentType(_) => Self::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with Content-Type: application/json",
            ),
            e if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                e.body_text(),
            ),
            e => Self::new(StatusCode::BAD_REQUEST, "invalid_body", e.body_text()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

/// Turns an error answer that is not JSON (the framework's own: 405 with an empty body, 408 from
/// the timeout, a plain-text rejection) into the JSON error shape, keeping status and headers.
pub async fn json_errors(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.contains("+json"));
    if is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 16 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_lowercase()
    } else {
        text
    };
    let json = ApiError::new(status, code_for(status), message).into_response();
    let (json_parts, json_body) = json.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    if let Some(ct) = json_parts.headers.get(CONTENT_TYPE) {
        parts.headers.insert(CONTENT_TYPE, ct.clone());
    }
    Response::from_parts(parts, json_body)
}

fn code_for(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "unprocessable",
        StatusCode::TOO_MANY_REQUESTS => "too_many_requests",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        s if s.is_server_error() => "internal",
        _ => "error",
    }
}
