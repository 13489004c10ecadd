use std::time::Duration;

use async_trait::async_trait;
use ctxgate_contract::{ChannelError, Delivered, OutboundMessage, Sink};
use reqwest::StatusCode;
use serde_json::json;

use crate::signature::{self, SIGNATURE_HEADER, TIMESTAMP_HEADER};

/// Delivers answers to the `callback_url` recorded with the triggering request, signed with the
/// webhook's secret. Without a callback URL the answer stays readable through the admin API only.
pub struct CallbackSink {
    channel: String,
    secret: Vec<u8>,
    http: reqwest::Client,
}

impl CallbackSink {
    pub fn new(name: &str, secret: Vec<u8>, timeout: Duration) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("ctxgate/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            channel: crate::channel_name(name),
            secret,
            http,
        })
    }
}

#[async_trait]
impl Sink for CallbackSink {
    fn channel(&self) -> &str {
        &self.channel
    }

    #[tracing::instrument(skip_all, fields(channel = %self.channel, key = %message.idempotency_key))]
    async fn deliver(&self, message: &OutboundMessage) -> Result<Delivered, ChannelError> {
        let Some(url) = message.meta.get("callback_url").and_then(|v| v.as_str()) else {
            return Ok(Delivered::default());
        };
        let body = serde_json::to_vec(&json!({
            "task_id": message.task_id,
            "conversation": message.conversation,
            "reply_to": message.reply_to,
            "text": message.text,
            "idempotency_key": message.idempotency_key,
        }))
        .map_err(|e| ChannelError::Permanent(format!("cannot encode the callback body: {e}")))?;
        let ts = chrono::Utc::now().timestamp();
        let response = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("idempotency-key", &message.idempotency_key)
            .header(TIMESTAMP_HEADER, ts.to_string())
            .header(SIGNATURE_HEADER, signature::sign(&self.secret, ts, &body))
            .body(body)
            .send()
            .await
            .map_err(|e| ChannelError::transient(format!("callback request failed: {e}")))?;
        let status = response.status();
        if status.is_success() {
            return Ok(Delivered::default());
        }
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        if status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::REQUEST_TIMEOUT
            || status.is_server_error()
        {
            Err(ChannelError::Transient {
                message: format!("callback answered {status}"),
                retry_after,
            })
        } else {
            Err(ChannelError::Permanent(format!(
                "callback answered {status}"
            )))
        }
    }
}
