use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{Brain, BrainError, BrainReply, BrainRequest};
use crate::domain::Usage;

/// One scripted behaviour.
#[derive(Debug, Clone)]
pub enum Step {
    Reply(BrainReply),
    Fail(BrainError),
    /// Never answers (a stuck provider, or a worker killed while waiting).
    Hang,
}

/// A test brain: plays a script of steps in order (then answers `re: <message>`), and records
/// every request it was given.
#[derive(Clone)]
pub struct ScriptedBrain {
    script: Arc<Mutex<VecDeque<Step>>>,
    seen: Arc<Mutex<Vec<BrainRequest>>>,
    calls: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Default for ScriptedBrain {
    fn default() -> Self {
        Self {
            script: Arc::default(),
            seen: Arc::default(),
            calls: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }
}

impl ScriptedBrain {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn then(&self, step: Step) -> &Self {
        self.script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(step);
        self
    }

    pub fn then_reply(&self, text: &str) -> &Self {
        self.then(Step::Reply(BrainReply {
            text: text.to_owned(),
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
            },
            actions: Vec::new(),
        }))
    }

    /// Resolves once at least `n` requests have arrived.
    pub async fn wait_for_calls(&self, n: usize) {
        let mut rx = self.calls.subscribe();
        let _ = rx.wait_for(|c| *c >= n).await;
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<BrainRequest> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl Brain for ScriptedBrain {
    async fn complete(&self, request: &BrainRequest) -> Result<BrainReply, BrainError> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request.clone());
        self.calls.send_modify(|c| *c += 1);
        let step = self
            .script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        match step {
            Some(Step::Reply(r)) => Ok(r),
            Some(Step::Fail(e)) => Err(e),
            Some(Step::Hang) => std::future::pending().await,
            None => Ok(BrainReply {
                text: format!("re: {}", request.message.text),
                usage: Usage {
                    prompt_tokens: 1,
                    completion_tokens: 1,
                },
                actions: Vec::new(),
            }),
        }
    }
}
