//! The contract between ctxgate's core and its channel adapters.
//!
//! A channel speaks one outside protocol and turns what it sees into neutral [`InboundEvent`]s,
//! which it hands to an [`Intake`] (implemented by the core). Answers travel the other way as
//! [`OutboundMessage`]s through the channel's [`Sink`]. Channels never touch the store.

mod addressing;
mod error;
mod event;
mod outbound;

pub use addressing::{AgentHandle, addressed_agents};
pub use error::{ChannelError, IntakeError};
pub use event::{
    Audience, CursorUpdate, EventKind, InboundEvent, InboundMessage, IntakeReceipt, MessageKind,
    Role, SenderKind, SourceType,
};
pub use outbound::{Delivered, OutboundMessage};

use async_trait::async_trait;

/// Where channels hand their events. The core's implementation commits the message, the task (for
/// a trigger) and the cursor in one transaction before it returns.
#[async_trait]
pub trait Intake: Send + Sync {
    async fn submit(&self, event: InboundEvent) -> Result<IntakeReceipt, IntakeError>;

    /// The channel's last committed cursor for `scope` (a room, a mailbox), if any.
    async fn cursor(&self, channel: &str, scope: &str) -> Result<Option<String>, IntakeError>;

    /// The conversation (its id on the channel) holding a message with this channel message id,
    /// received or sent; e-mail uses it to join replies to their thread.
    async fn conversation_of(
        &self,
        channel: &str,
        channel_message_id: &str,
    ) -> Result<Option<String>, IntakeError>;
}

/// The outgoing half of a channel: delivers one answer. Implementations must use
/// [`OutboundMessage::idempotency_key`] so that a retried delivery does not post twice where the
/// peer allows it.
#[async_trait]
pub trait Sink: Send + Sync {
    /// The channel instance this sink delivers for, e.g. `webhook:default`.
    fn channel(&self) -> &str;
    async fn deliver(&self, message: &OutboundMessage) -> Result<Delivered, ChannelError>;
}
