use std::time::Duration;

/// What went wrong talking to a channel's peer, phrased as what the caller should do.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// Try again later; the peer may have said when.
    #[error("transient channel error: {message}")]
    Transient {
        message: String,
        retry_after: Option<Duration>,
    },
    /// Retrying cannot help (bad request, unknown target, refused by policy).
    #[error("permanent channel error: {0}")]
    Permanent(String),
}

impl ChannelError {
    pub fn transient(message: impl Into<String>) -> Self {
        Self::Transient {
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient { .. })
    }
}

/// Why intake could not take an event.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    /// The event itself is unusable; the channel should report it and move on.
    #[error("invalid event: {0}")]
    Invalid(String),
    /// The store could not commit; the channel should retry later without advancing its cursor.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The gateway is shutting down and takes no more work.
    #[error("gateway is shutting down")]
    ShuttingDown,
}
