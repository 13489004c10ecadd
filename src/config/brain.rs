//! `[brains.<name>]`: the LLM providers.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Secret;

/// One brain. Keys beyond `kind`, `system_prompt` and `timeout` apply to some kinds only
/// (checked at start-up).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrainSettings {
    /// `echo` (quotes the message; for trying the gateway out), `openai` (any OpenAI-compatible
    /// chat completions server: OpenAI, Ollama, vLLM, llama.cpp), `anthropic`, or `cli` (a
    /// command run per task).
    pub kind: BrainKind,
    /// System prompt given before the context (or `system_prompt_file`).
    pub system_prompt: String,
    /// File holding the system prompt (read at start-up; wins over `system_prompt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt_file: Option<PathBuf>,
    /// Bound on one call (HTTP request or command run).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// `openai`/`anthropic`: the API base URL (e.g. `https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`, `https://api.anthropic.com`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `openai`/`anthropic`: the model answering tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `openai`/`anthropic`: a small, fast model for context triage (default: `model`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast_model: Option<String>,
    /// `openai`/`anthropic`: the API key (or `api_key_file`, or `api_key_env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_file: Option<PathBuf>,
    /// Name of an environment variable holding the API key (e.g. `OPENAI_API_KEY`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// `openai`/`anthropic`: most tokens of one answer.
    pub max_tokens: u32,
    /// `openai`/`anthropic`: sampling temperature (unset: the provider's default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// `openai`: the `OpenAI-Organization` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    /// `openai`/`anthropic`: extra HTTP headers sent with every request.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_headers: BTreeMap<String, String>,
    /// `cli`: the command and its arguments (no shell), e.g. `["my-agent", "--print"]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// `cli`: arguments added to resume a session; `{session}` is replaced by its id, e.g.
    /// `["--resume", "{session}"]`. Empty: the agent keeps no sessions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resume_args: Vec<String>,
    /// `cli`: the prompt on `stdin`, or in a `file` whose path replaces `{prompt_file}` in the
    /// arguments.
    pub prompt_input: PromptInput,
    /// `cli`: the answer is all of stdout (`plain`) or a field of a JSON object (`json`).
    pub output: CliOutput,
    /// `cli` with `output = "json"`: the field holding the answer.
    pub answer_field: String,
    /// `cli` with `output = "json"`: the field holding the session id to resume next time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_field: Option<String>,
    /// `cli`: environment variables passed through to the command (nothing else is).
    pub env_allow: Vec<String>,
    /// `cli`: folder under which each conversation gets its own working directory.
    pub workdir: PathBuf,
    /// Another brain asked once when this one still fails with a retryable error (429, 5xx,
    /// timeout) after its quick re-tries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Price of a million prompt tokens (any currency; shown as `cost` in usage totals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_price_per_million: Option<f64>,
    /// Price of a million completion tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_price_per_million: Option<f64>,
}

impl Default for BrainSettings {
    fn default() -> Self {
        Self {
            kind: BrainKind::Echo,
            system_prompt: "You are a helpful assistant.".to_owned(),
            system_prompt_file: None,
            timeout: Duration::from_secs(120),
            base_url: None,
            model: None,
            fast_model: None,
            api_key: None,
            api_key_file: None,
            api_key_env: None,
            max_tokens: 1024,
            temperature: None,
            organization: None,
            extra_headers: BTreeMap::new(),
            command: Vec::new(),
            resume_args: Vec::new(),
            prompt_input: PromptInput::Stdin,
            output: CliOutput::Plain,
            answer_field: "result".to_owned(),
            session_field: None,
            env_allow: vec!["PATH".to_owned(), "HOME".to_owned(), "LANG".to_owned()],
            workdir: PathBuf::from("data/agents"),
            fallback: None,
            prompt_price_per_million: None,
            completion_price_per_million: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BrainKind {
    Echo,
    Openai,
    Anthropic,
    Cli,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptInput {
    Stdin,
    File,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CliOutput {
    Plain,
    Json,
}

impl BrainSettings {
    /// What `usage` costs at this brain's prices, when it has any.
    pub fn cost(&self, usage: crate::domain::Usage) -> Option<f64> {
        if self.prompt_price_per_million.is_none() && self.completion_price_per_million.is_none() {
            return None;
        }
        let p = self.prompt_price_per_million.unwrap_or(0.0) * usage.prompt_tokens as f64;
        let c = self.completion_price_per_million.unwrap_or(0.0) * usage.completion_tokens as f64;
        Some((p + c) / 1_000_000.0)
    }

    /// Kind-specific checks; `Err((key suffix, message))`.
    pub(super) fn check(&self) -> Result<(), (&'static str, &'static str)> {
        match self.kind {
            BrainKind::Echo => Ok(()),
            BrainKind::Openai | BrainKind::Anthropic => {
                if self.model.as_deref().is_none_or(str::is_empty) {
                    return Err(("model", "is required for this kind of brain"));
                }
                if self.kind == BrainKind::Openai && self.base_url.is_none() {
                    return Err(("base_url", "is required (e.g. https://api.openai.com/v1)"));
                }
                if let Some(url) = &self.base_url
                    && !(url.starts_with("http://") || url.starts_with("https://"))
                {
                    return Err(("base_url", "must start with http:// or https://"));
                }
                Ok(())
            }
            BrainKind::Cli => {
                if self.command.is_empty() {
                    return Err(("command", "is required for a cli brain"));
                }
                if self.prompt_input == PromptInput::File
                    && !self.command.iter().any(|a| a.contains("{prompt_file}"))
                {
                    return Err((
                        "command",
                        "must contain {prompt_file} when prompt_input = \"file\"",
                    ));
                }
                if !self.resume_args.is_empty()
                    && (self.output != CliOutput::Json || self.session_field.is_none())
                {
                    return Err((
                        "resume_args",
                        "need output = \"json\" and a session_field to learn the session id",
                    ));
                }
                Ok(())
            }
        }
    }
}
