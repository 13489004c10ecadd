//! Checks shared by the targets, and the way through a real axum router.

use super::engine::Outcome;

pub fn no_controls(what: &str, text: &str) -> Result<(), String> {
    match text.chars().find(|c| c.is_control()) {
        Some(c) => Err(format!(
            "{what} {text:?} carries the control character {c:?}"
        )),
        None => Ok(()),
    }
}

/// The label of a serde_json error: it is one of the named categories, never I/O on a slice.
pub fn json_error(e: &serde_json::Error) -> Result<String, String> {
    use serde_json::error::Category;
    let label = match e.classify() {
        Category::Syntax => "syntax",
        Category::Data => "data",
        Category::Eof => "eof",
        Category::Io => return Err(format!("an I/O error while reading a slice: {e}")),
    };
    if e.to_string().is_empty() {
        return Err("a JSON error without a message".into());
    }
    Ok(label.to_owned())
}

thread_local! {
    /// One runtime per executor thread for the targets that go through an axum router.
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
}

/// Accepts every event (the receivers under test only need an answer).
pub struct AcceptAll;

#[async_trait::async_trait]
impl ctxgate_contract::Intake for AcceptAll {
    async fn submit(
        &self,
        event: ctxgate_contract::InboundEvent,
    ) -> Result<ctxgate_contract::IntakeReceipt, ctxgate_contract::IntakeError> {
        if event.channel.is_empty() {
            return Err(ctxgate_contract::IntakeError::Invalid(
                "channel is empty".into(),
            ));
        }
        Ok(ctxgate_contract::IntakeReceipt {
            conversation_id: 1,
            message_id: Some(1),
            task_id: None,
            duplicate: false,
        })
    }

    async fn cursor(
        &self,
        _: &str,
        _: &str,
    ) -> Result<Option<String>, ctxgate_contract::IntakeError> {
        Ok(None)
    }

    async fn conversation_of(
        &self,
        _: &str,
        _: &str,
    ) -> Result<Option<String>, ctxgate_contract::IntakeError> {
        Ok(None)
    }
}

/// Sends `request` through `router`: never a 5xx, and every error is the JSON error shape with a
/// code. Returns `http <status> <code>`.
pub fn through_router(
    router: &axum::Router,
    request: axum::http::Request<axum::body::Body>,
) -> Outcome {
    use tower::ServiceExt;
    RUNTIME.with(|rt| {
        rt.block_on(async {
            let response = router
                .clone()
                .oneshot(request)
                .await
                .map_err(|e| format!("the router failed: {e}"))?;
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .map_err(|e| format!("unreadable response body: {e}"))?;
            if status.is_server_error() {
                return Err(format!(
                    "answered {status}: {}",
                    String::from_utf8_lossy(&body)
                ));
            }
            let json: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
                format!(
                    "answered {status} with a body that is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(&body)
                )
            })?;
            if status.is_client_error() {
                let code = json["error"]["code"]
                    .as_str()
                    .filter(|c| !c.is_empty())
                    .ok_or_else(|| format!("answered {status} without an error code: {json}"))?;
                return Ok(format!("http {} {code}", status.as_u16()));
            }
            Ok(format!("http {}", status.as_u16()))
        })
    })
}
