use async_trait::async_trait;

use super::{Brain, BrainError, BrainReply, BrainRequest};
use crate::domain::Usage;

/// Answers by quoting the message and saying how much context it was given. For trying the
/// gateway out before a model is configured.
pub struct EchoBrain;

#[async_trait]
impl Brain for EchoBrain {
    async fn complete(&self, request: &BrainRequest) -> Result<BrainReply, BrainError> {
        Ok(BrainReply {
            text: format!(
                "echo: {} ({} earlier message(s) in context; configure a brain to get real answers)",
                request.message.text,
                request.context.len()
            ),
            usage: Usage::default(),
            actions: Vec::new(),
            session: None,
        })
    }
}
