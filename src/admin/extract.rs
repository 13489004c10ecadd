//! Axum's `Path`, `Query` and `Json` extractors, answering their rejections with the admin API's
//! JSON error shape (see [`ApiError`]'s conversions) instead of plain text.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::ApiError;

/// Path parameters; a malformed one (`/admin/tasks/abc`) is a 400 `invalid_parameter`.
pub struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(v) = axum::extract::Path::from_request_parts(parts, state).await?;
        Ok(Self(v))
    }
}

/// Query parameters; a malformed or unknown one is a 400 `invalid_parameter`.
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Query(v) =
            axum::extract::Query::from_request_parts(parts, state).await?;
        Ok(Self(v))
    }
}

/// A JSON body: 415 without `Content-Type: application/json`, 413 over the body limit, 400
/// `invalid_body` when it does not parse as `T`.
pub struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let axum::Json(v) = axum::Json::from_request(request, state).await?;
        Ok(Self(v))
    }
}
