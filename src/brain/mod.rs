//! The brain seam: what the worker hands an LLM provider and what comes back.

mod anthropic;
mod cli;
mod echo;
mod http;
mod openai;
mod scripted;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use ctxgate_contract::Role;
use serde::Serialize;

pub use anthropic::AnthropicBrain;
pub use cli::CliBrain;
pub use echo::EchoBrain;
pub use openai::OpenAiBrain;
pub use scripted::{ScriptedBrain, ScriptedCompleter, Step};

use crate::domain::{Action, Usage};

/// Builds every configured brain, by name.
pub fn build_all(
    settings: &crate::config::Settings,
) -> anyhow::Result<std::collections::HashMap<String, Arc<dyn Brain>>> {
    use crate::config::BrainKind;
    let mut brains: std::collections::HashMap<String, Arc<dyn Brain>> = Default::default();
    for (name, b) in &settings.brains {
        let brain: Arc<dyn Brain> = match b.kind {
            BrainKind::Echo => Arc::new(EchoBrain),
            BrainKind::Openai => Arc::new(OpenAiBrain::new(b)?),
            BrainKind::Anthropic => Arc::new(AnthropicBrain::new(b)?),
            BrainKind::Cli => Arc::new(CliBrain::new(b)),
        };
        brains.insert(name.clone(), brain);
    }
    Ok(brains)
}

/// The completer context triage uses for tasks of `brain`: with `selection_model = "fast"` the
/// brain's own fast completer, else the fast completer of the brain it names.
pub fn triage_completer(
    brains: &std::collections::HashMap<String, Arc<dyn Brain>>,
    selection_model: &str,
    brain: &str,
) -> Option<Arc<dyn Completer>> {
    let source = if selection_model == "fast" {
        brain
    } else {
        selection_model
    };
    brains.get(source).and_then(|b| b.fast())
}

/// One turn of prior conversation shown to the brain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    pub role: Role,
    /// Who wrote it (display name or id).
    pub speaker: String,
    pub text: String,
    pub timestamp: DateTime<Utc>,
}

/// Everything a brain sees for one task: the system prompt, the selected context (oldest first)
/// and the message to answer. Nothing from another conversation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BrainRequest {
    pub task_id: i64,
    pub conversation_id: i64,
    pub system: String,
    /// Set when the brain's own session could not be resumed and the context was rebuilt from
    /// the store; brains put it before the context.
    pub restored_notice: Option<String>,
    pub context: Vec<Turn>,
    pub message: Turn,
    /// The brain's own session to resume (brains that keep sessions only).
    pub session: Option<String>,
}

/// What a brain that lost its session is told before the history from the store.
pub const RESTORED_NOTICE: &str = "[The previous session could not be resumed. The conversation \
    so far was restored from the gateway's history below.]";

#[derive(Debug, Clone, PartialEq)]
pub struct BrainReply {
    pub text: String,
    pub usage: Usage,
    pub actions: Vec<Action>,
    /// The session to resume next time (brains that keep sessions only).
    pub session: Option<String>,
}

impl BrainReply {
    /// A plain answer: no actions, no session.
    pub fn text(text: String, usage: Usage) -> Self {
        Self {
            text,
            usage,
            actions: Vec::new(),
            session: None,
        }
    }
}

/// What went wrong, phrased as what the worker should do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BrainError {
    /// Worth retrying (429, 5xx, connection reset); the provider may have said when.
    #[error("transient brain error: {message}")]
    Transient {
        message: String,
        retry_after: Option<Duration>,
    },
    /// Retrying cannot help (4xx, refused prompt, bad configuration).
    #[error("brain error: {0}")]
    Permanent(String),
    #[error("the brain did not answer within {0:?}")]
    Timeout(Duration),
    /// The session asked for could not be resumed; the caller should start a new one with the
    /// history restored from the store.
    #[error("the brain could not resume session {0:?}")]
    SessionLost(String),
}

impl BrainError {
    pub fn is_retryable(&self) -> bool {
        !matches!(self, BrainError::Permanent(_) | BrainError::SessionLost(_))
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            BrainError::Transient { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

#[async_trait]
pub trait Brain: Send + Sync {
    async fn complete(&self, request: &BrainRequest) -> Result<BrainReply, BrainError>;

    /// Whether the brain keeps its own conversation state between calls (a CLI agent resumed by
    /// session id). Such brains are given only what is new since their last call.
    fn keeps_sessions(&self) -> bool {
        false
    }

    /// The small, fast model used for context triage, if this brain has one.
    fn fast(&self) -> Option<Arc<dyn Completer>> {
        None
    }
}

/// A plain prompt-in, text-out completion (used by context triage).
#[async_trait]
pub trait Completer: Send + Sync {
    async fn complete(&self, prompt: &str) -> Result<(String, Usage), BrainError>;
}
