//! Signed generic webhooks.
//!
//! `POST /webhooks/{name}` with a JSON [`WebhookPayload`], signed with HMAC-SHA256 over
//! `"{timestamp}.{raw body}"` (see [`signature`]). Accepted requests become neutral
//! [`ctxgate_contract::InboundEvent`]s handed to the core's intake; answers are POSTed back to the
//! request's `callback_url` by [`CallbackSink`], signed the same way.

mod payload;
mod receiver;
mod replay;
pub mod signature;
mod sink;

pub use payload::{PayloadError, WebhookPayload};
pub use receiver::{WebhookEndpoint, WebhookReceiver};
pub use sink::CallbackSink;

/// The channel instance name of the webhook called `name`.
pub fn channel_name(name: &str) -> String {
    format!("webhook:{name}")
}
