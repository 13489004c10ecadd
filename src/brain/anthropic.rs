//! Anthropic Messages API (`POST {base_url}/v1/messages`): the system prompt is separate, and
//! turns must alternate user/assistant starting with the user — consecutive turns of one role
//! are merged, and assistant turns before the first user turn are dropped.

use std::sync::Arc;

use async_trait::async_trait;
use ctxgate_contract::Role;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{TRIAGE_MAX_TOKENS, content, fast_model, send, system};
use super::{Brain, BrainError, BrainReply, BrainRequest, Completer, Turn};
use crate::config::BrainSettings;
use crate::domain::Usage;

const DEFAULT_BASE: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";

#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    url: String,
    settings: Arc<BrainSettings>,
}

pub struct AnthropicBrain {
    client: Client,
}

impl AnthropicBrain {
    pub fn new(settings: &BrainSettings) -> anyhow::Result<Self> {
        let base = settings
            .base_url
            .clone()
            .unwrap_or_else(|| DEFAULT_BASE.to_owned());
        Ok(Self {
            client: Client {
                http: reqwest::Client::builder().build()?,
                url: format!("{}/v1/messages", base.trim_end_matches('/')),
                settings: Arc::new(settings.clone()),
            },
        })
    }
}

#[derive(Deserialize)]
struct Answer {
    content: Vec<Block>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// Turns → alternating messages (merge same-role neighbours; drop leading assistant turns).
pub fn alternate<'a>(turns: impl Iterator<Item = &'a Turn>) -> Vec<Value> {
    let mut out: Vec<(Role, String)> = Vec::new();
    for turn in turns {
        let role = if turn.role == Role::Assistant {
            Role::Assistant
        } else {
            Role::User
        };
        if out.is_empty() && role == Role::Assistant {
            continue;
        }
        match out.last_mut() {
            Some((r, text)) if *r == role => {
                text.push_str("\n\n");
                text.push_str(&content(turn));
            }
            _ => out.push((role, content(turn))),
        }
    }
    out.into_iter()
        .map(|(role, text)| json!({"role": role.as_str(), "content": text}))
        .collect()
}

impl Client {
    async fn messages(
        &self,
        model: &str,
        system_prompt: &str,
        messages: Vec<Value>,
        max_tokens: u32,
        temperature: Option<f32>,
    ) -> Result<(String, Usage), BrainError> {
        let s = &self.settings;
        let mut body = json!({"model": model, "max_tokens": max_tokens, "messages": messages});
        if !system_prompt.is_empty() {
            body["system"] = json!(system_prompt);
        }
        if let Some(t) = temperature {
            body["temperature"] = json!(t);
        }
        let mut request = self
            .http
            .post(&self.url)
            .header("anthropic-version", API_VERSION)
            .json(&body);
        if let Some(key) = &s.api_key {
            request = request.header("x-api-key", key.expose());
        }
        for (k, v) in &s.extra_headers {
            request = request.header(k, v);
        }
        let answer: Answer = send(request, s.timeout).await?;
        let text: String = answer
            .content
            .into_iter()
            .filter(|b| b.kind == "text")
            .filter_map(|b| b.text)
            .collect::<Vec<_>>()
            .join("");
        if text.is_empty() {
            return Err(BrainError::Permanent(
                "the answer has no text content".into(),
            ));
        }
        let usage = answer.usage.map_or_else(Usage::default, |u| Usage {
            prompt_tokens: u.input_tokens,
            completion_tokens: u.output_tokens,
        });
        Ok((text, usage))
    }
}

#[async_trait]
impl Brain for AnthropicBrain {
    async fn complete(&self, request: &BrainRequest) -> Result<BrainReply, BrainError> {
        let s = &self.client.settings;
        let messages = alternate(
            request
                .context
                .iter()
                .chain(std::iter::once(&request.message)),
        );
        let system_prompt = system(&request.system, request.restored_notice.as_deref());
        let model = s.model.clone().unwrap_or_default();
        let (text, usage) = self
            .client
            .messages(
                &model,
                &system_prompt,
                messages,
                s.max_tokens,
                s.temperature,
            )
            .await?;
        Ok(BrainReply::text(text, usage))
    }

    fn fast(&self) -> Option<Arc<dyn Completer>> {
        Some(Arc::new(AnthropicFast(self.client.clone())))
    }
}

struct AnthropicFast(Client);

#[async_trait]
impl Completer for AnthropicFast {
    async fn complete(&self, prompt: &str) -> Result<(String, Usage), BrainError> {
        let s = &self.0.settings;
        let model = fast_model(s);
        let messages = vec![json!({"role": "user", "content": prompt})];
        self.0
            .messages(&model, "", messages, TRIAGE_MAX_TOKENS, Some(0.0))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn t(role: Role, text: &str) -> Turn {
        Turn {
            role,
            speaker: "ann".into(),
            text: text.into(),
            timestamp: Utc::now(),
        }
    }

    #[test]
    fn turns_alternate_starting_with_the_user() {
        let turns = [
            t(Role::Assistant, "briefing"),
            t(Role::User, "a"),
            t(Role::User, "b"),
            t(Role::Assistant, "c"),
            t(Role::Assistant, "d"),
            t(Role::User, "e"),
        ];
        let m = alternate(turns.iter());
        let shape: Vec<(&str, &str)> = m
            .iter()
            .map(|v| (v["role"].as_str().unwrap(), v["content"].as_str().unwrap()))
            .collect();
        assert_eq!(
            shape,
            vec![
                ("user", "ann: a\n\nann: b"),
                ("assistant", "c\n\nd"),
                ("user", "ann: e")
            ]
        );
    }
}
