use serde::{Deserialize, Serialize};

/// One answer to deliver through a channel's [`crate::Sink`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutboundMessage {
    /// Unique per delivery and stable across retries (e.g. `ctxgate:task:42:result`).
    pub idempotency_key: String,
    /// The gateway's task id this answer belongs to, if any.
    pub task_id: Option<i64>,
    /// The conversation's id on the channel (room token, thread, webhook conversation).
    pub conversation: String,
    pub text: String,
    /// The channel message id this answers, when the channel supports threaded replies.
    pub reply_to: Option<String>,
    /// Channel-specific data recorded at intake (for example a webhook's `callback_url`).
    #[serde(default)]
    pub meta: serde_json::Value,
    /// 1 for the first try; more means an earlier try may have reached the peer, so a sink that
    /// can look (Talk) checks for the tagged post before sending again.
    #[serde(default = "first_attempt")]
    pub attempt: u32,
}

fn first_attempt() -> u32 {
    1
}

/// What the peer said about a delivered message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivered {
    /// The message's id on the channel, when the peer returns one.
    pub channel_message_id: Option<String>,
}
