//! What the HTTP brains share: turning a provider's answer into a decision (retry, retry after,
//! give up), keeping the raw body when it cannot be decoded.

use std::time::Duration;

use reqwest::StatusCode;
use serde::de::DeserializeOwned;

use super::{BrainError, Turn};
use ctxgate_contract::Role;

/// Most characters of a provider's body kept in an error.
const BODY_IN_ERRORS: usize = 2000;

fn clip(body: &str) -> String {
    let mut s: String = body.chars().take(BODY_IN_ERRORS).collect();
    if body.chars().count() > BODY_IN_ERRORS {
        s.push('…');
    }
    s
}

/// Sends a request and decodes a successful JSON answer.
pub async fn send<T: DeserializeOwned>(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<T, BrainError> {
    let response = request.timeout(timeout).send().await.map_err(|e| {
        if e.is_timeout() {
            BrainError::Timeout(timeout)
        } else {
            BrainError::Transient {
                message: format!("request failed: {e}"),
                retry_after: None,
            }
        }
    })?;
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = response.text().await.map_err(|e| {
        if e.is_timeout() {
            BrainError::Timeout(timeout)
        } else {
            BrainError::Transient {
                message: format!("reading the answer failed: {e}"),
                retry_after: None,
            }
        }
    })?;
    if status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || status.is_server_error()
    {
        return Err(BrainError::Transient {
            message: format!("provider answered {status}: {}", clip(&body)),
            retry_after,
        });
    }
    if !status.is_success() {
        return Err(BrainError::Permanent(format!(
            "provider answered {status}: {}",
            clip(&body)
        )));
    }
    serde_json::from_str(&body).map_err(|e| {
        BrainError::Permanent(format!(
            "cannot decode the provider's answer ({e}); body: {}",
            clip(&body)
        ))
    })
}

/// A context turn as chat content: user turns carry their speaker's name (rooms have several
/// people); the assistant's own turns are plain.
pub fn content(turn: &Turn) -> String {
    match turn.role {
        Role::User => format!("{}: {}", turn.speaker, turn.text),
        _ => turn.text.clone(),
    }
}

/// Triage answers are short lists of numbers.
pub const TRIAGE_MAX_TOKENS: u32 = 256;

/// The model triage uses: `fast_model`, else the brain's own.
pub fn fast_model(s: &crate::config::BrainSettings) -> String {
    s.fast_model
        .clone()
        .or_else(|| s.model.clone())
        .unwrap_or_default()
}

/// The system prompt, followed by the restored-context notice when there is one.
pub fn system(system: &str, notice: Option<&str>) -> String {
    match notice {
        Some(n) if system.is_empty() => n.to_owned(),
        Some(n) => format!("{system}\n\n{n}"),
        None => system.to_owned(),
    }
}
