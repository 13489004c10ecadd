use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{Brain, BrainError, BrainReply, BrainRequest, Completer};
use crate::domain::Usage;

/// One scripted behaviour.
#[derive(Debug, Clone)]
pub enum Step {
    Reply(BrainReply),
    Fail(BrainError),
    /// Never answers (a stuck provider, or a worker killed while waiting).
    Hang,
    /// Answers once the gate is opened (a slow provider the test controls).
    Gated(Arc<tokio::sync::Notify>, BrainReply),
}

/// A test brain: plays a script of steps in order (then answers `re: <message>`), and records
/// every request it was given.
#[derive(Clone)]
pub struct ScriptedBrain {
    script: Arc<Mutex<VecDeque<Step>>>,
    seen: Arc<Mutex<Vec<BrainRequest>>>,
    calls: Arc<tokio::sync::watch::Sender<usize>>,
    fast: Option<Arc<ScriptedCompleter>>,
    sessions: bool,
}

/// A scripted fast completer: answers from a queue (then fails), records prompts.
#[derive(Default)]
pub struct ScriptedCompleter {
    answers: Mutex<VecDeque<Result<String, BrainError>>>,
    prompts: Mutex<Vec<String>>,
}

impl ScriptedCompleter {
    pub fn answer(&self, a: Result<&str, BrainError>) -> &Self {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(a.map(str::to_owned));
        self
    }

    pub fn prompts(&self) -> Vec<String> {
        self.prompts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait]
impl Completer for ScriptedCompleter {
    async fn complete(&self, prompt: &str) -> Result<(String, Usage), BrainError> {
        self.prompts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(prompt.to_owned());
        let next = self
            .answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        match next {
            Some(Ok(text)) => Ok((
                text,
                Usage {
                    prompt_tokens: 100,
                    completion_tokens: 7,
                },
            )),
            Some(Err(e)) => Err(e),
            None => Err(BrainError::Permanent(
                "the script has no more answers".into(),
            )),
        }
    }
}

impl Default for ScriptedBrain {
    fn default() -> Self {
        Self {
            script: Arc::default(),
            seen: Arc::default(),
            calls: Arc::new(tokio::sync::watch::Sender::new(0)),
            fast: None,
            sessions: false,
        }
    }
}

impl ScriptedBrain {
    pub fn new() -> Self {
        Self::default()
    }

    /// A scripted brain that keeps sessions (like a CLI agent resumed by id).
    pub fn with_sessions() -> Self {
        Self {
            sessions: true,
            ..Self::default()
        }
    }

    /// A scripted brain with a scripted fast completer for triage.
    pub fn with_fast(fast: Arc<ScriptedCompleter>) -> Self {
        Self {
            fast: Some(fast),
            ..Self::default()
        }
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
            session: None,
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
    fn keeps_sessions(&self) -> bool {
        self.sessions
    }

    fn fast(&self) -> Option<Arc<dyn Completer>> {
        self.fast.clone().map(|f| f as Arc<dyn Completer>)
    }

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
            Some(Step::Gated(gate, reply)) => {
                gate.notified().await;
                Ok(reply)
            }
            None => Ok(BrainReply {
                text: format!("re: {}", request.message.text),
                usage: Usage {
                    prompt_tokens: 1,
                    completion_tokens: 1,
                },
                actions: Vec::new(),
                session: None,
            }),
        }
    }
}
