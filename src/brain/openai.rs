//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`): OpenAI, Ollama,
//! vLLM, llama.cpp server and others speaking the same API.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{TRIAGE_MAX_TOKENS, content, fast_model, send, system};
use super::{Brain, BrainError, BrainReply, BrainRequest, Completer};
use crate::config::BrainSettings;
use crate::domain::Usage;

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    url: String,
    settings: Arc<BrainSettings>,
}

pub struct OpenAiBrain {
    client: Client,
}

impl OpenAiBrain {
    pub fn new(settings: &BrainSettings) -> anyhow::Result<Self> {
        let base = settings.base_url.clone().unwrap_or_default();
        Ok(Self {
            client: Client {
                http: reqwest::Client::builder().build()?,
                url: format!("{}/chat/completions", base.trim_end_matches('/')),
                settings: Arc::new(settings.clone()),
            },
        })
    }
}

#[derive(Deserialize)]
struct Answer {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl Client {
    async fn chat(
        &self,
        model: &str,
        messages: Vec<Value>,
        max_tokens: u32,
        temperature: Option<f32>,
    ) -> Result<(String, Usage), BrainError> {
        let s = &self.settings;
        let mut body = json!({"model": model, "messages": messages, "max_tokens": max_tokens});
        if let Some(t) = temperature {
            body["temperature"] = json!(t);
        }
        let mut request = self.http.post(&self.url).json(&body);
        if let Some(key) = &s.api_key {
            request = request.bearer_auth(key.expose());
        }
        if let Some(org) = &s.organization {
            request = request.header("OpenAI-Organization", org);
        }
        for (k, v) in &s.extra_headers {
            request = request.header(k, v);
        }
        let answer: Answer = send(request, s.timeout).await?;
        let text = answer
            .choices
            .into_iter()
            .next()
            .and_then(|c| c.message.content)
            .ok_or_else(|| BrainError::Permanent("the answer has no message content".into()))?;
        let usage = answer.usage.map_or_else(Usage::default, |u| Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
        });
        Ok((text, usage))
    }
}

#[async_trait]
impl Brain for OpenAiBrain {
    async fn complete(&self, request: &BrainRequest) -> Result<BrainReply, BrainError> {
        let s = &self.client.settings;
        let mut messages = vec![json!({
            "role": "system",
            "content": system(&request.system, request.restored_notice.as_deref()),
        })];
        for turn in request
            .context
            .iter()
            .chain(std::iter::once(&request.message))
        {
            messages.push(json!({"role": turn.role.as_str(), "content": content(turn)}));
        }
        let model = s.model.clone().unwrap_or_default();
        let (text, usage) = self
            .client
            .chat(&model, messages, s.max_tokens, s.temperature)
            .await?;
        Ok(BrainReply::text(text, usage))
    }

    fn fast(&self) -> Option<Arc<dyn Completer>> {
        Some(Arc::new(OpenAiFast(self.client.clone())))
    }
}

/// The triage completer: the fast model (or the main one), deterministic, short answers.
struct OpenAiFast(Client);

#[async_trait]
impl Completer for OpenAiFast {
    async fn complete(&self, prompt: &str) -> Result<(String, Usage), BrainError> {
        let s = &self.0.settings;
        let model = fast_model(s);
        let messages = vec![json!({"role": "user", "content": prompt})];
        self.0
            .chat(&model, messages, TRIAGE_MAX_TOKENS, Some(0.0))
            .await
    }
}
