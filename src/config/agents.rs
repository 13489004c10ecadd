//! `[[agents]]`: several named assistants behind one gateway, each with its own brain, prompt,
//! history window and session rules, serving the channel instances it lists.
//!
//! With no `[[agents]]` one implicit agent, `default`, serves every channel with the channel's
//! brain and prompt, so single-assistant setups need no change.

use std::path::PathBuf;
use std::time::Duration;

use ctxgate_contract::{AgentHandle, addressed_agents};
use serde::{Deserialize, Serialize};

use super::ConversationSettings;

/// One assistant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSettings {
    /// Stable id: lowercase letters, digits, `-`, `_`. Users address it as `@id`.
    pub id: String,
    /// Display name (default: the id); `@Name` addresses it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The brain answering for this agent (default: the channel's brain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brain: Option<String>,
    /// The agent's system prompt (or `system_prompt_file`, read again for every task so that
    /// an edit takes effect — and starts new sessions — without a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt_file: Option<PathBuf>,
    /// Channel instances it answers on (`talk:main`, `email:main`, `webhook:default`); empty
    /// means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serves: Vec<String>,
    /// Answers messages addressed to no agent on the channels it serves (one-to-one Talk rooms,
    /// a mention of the Talk account itself, mail to the plain address, webhooks without
    /// `agent`). At most one default per channel; without one the first agent serving the
    /// channel is its default.
    #[serde(default)]
    pub default: bool,
    /// Overrides of `[conversation]` for this agent's context.
    #[serde(default, skip_serializing_if = "ConversationOverrides::is_empty")]
    pub conversation: ConversationOverrides,
    /// A brain that keeps its own session starts a new one (restored from the store) once the
    /// session's input tokens pass this ceiling.
    #[serde(default = "default_session_max_tokens")]
    pub session_max_input_tokens: u64,
    /// … or after this long without a task.
    #[serde(default = "default_session_idle", with = "humantime_serde")]
    pub session_idle_timeout: Duration,
}

fn default_session_max_tokens() -> u64 {
    150_000
}

fn default_session_idle() -> Duration {
    Duration::from_secs(30 * 60)
}

/// The `[conversation]` settings an agent may set for itself.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookback_count: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_context_tokens: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_include_recent: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_recency_hours: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_recall: Option<bool>,
}

impl ConversationOverrides {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// `base` with these overrides applied.
    pub fn apply(&self, base: &ConversationSettings) -> ConversationSettings {
        let mut out = base.clone();
        if let Some(v) = self.lookback_count {
            out.lookback_count = v;
        }
        if let Some(v) = self.max_context_tokens {
            out.max_context_tokens = v;
        }
        if let Some(v) = self.always_include_recent {
            out.always_include_recent = v;
        }
        if let Some(v) = self.context_recency_hours {
            out.context_recency_hours = v;
        }
        if let Some(v) = self.archive_recall {
            out.archive_recall = v;
        }
        out
    }
}

impl AgentSettings {
    /// The implicit agent of a gateway without `[[agents]]`.
    pub fn implicit() -> Self {
        Self {
            id: crate::intake::DEFAULT_AGENT.to_owned(),
            name: None,
            brain: None,
            system_prompt: None,
            system_prompt_file: None,
            serves: Vec::new(),
            default: true,
            conversation: ConversationOverrides::default(),
            session_max_input_tokens: default_session_max_tokens(),
            session_idle_timeout: default_session_idle(),
        }
    }

    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }

    pub fn serves(&self, channel: &str) -> bool {
        self.serves.is_empty() || self.serves.iter().any(|c| c == channel)
    }

    /// How channels recognise it: `@id` and `@Name` (compared case-insensitively).
    pub fn handle(&self) -> AgentHandle {
        let mut names = vec![self.id.clone()];
        if let Some(n) = &self.name
            && !n.eq_ignore_ascii_case(&self.id)
        {
            names.push(n.clone());
        }
        AgentHandle {
            id: self.id.clone(),
            names,
        }
    }

    /// The system prompt as it is now: the file read again when one is set (falling back to
    /// the text read at start-up if the file cannot be read).
    pub fn current_prompt(&self) -> Option<String> {
        if let Some(path) = &self.system_prompt_file {
            match std::fs::read_to_string(path) {
                Ok(text) => return Some(text.trim_end().to_owned()),
                Err(e) => tracing::warn!(agent = %self.id, path = %path.display(), error = %e,
                    "cannot read the agent's prompt file; using the text read at start-up"),
            }
        }
        self.system_prompt.clone()
    }
}

/// The agents addressed in `text` among `agents` (see [`ctxgate_contract::addressed_agents`]).
pub fn mentioned<'a>(
    text: &str,
    agents: impl IntoIterator<Item = &'a AgentSettings>,
) -> Vec<String> {
    let handles: Vec<AgentHandle> = agents.into_iter().map(AgentSettings::handle).collect();
    addressed_agents(text, &handles)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_are_addressed_by_id_and_display_name() {
        let agents = [
            AgentSettings {
                id: "reviewer".into(),
                name: Some("Review Bot".into()),
                ..AgentSettings::implicit()
            },
            AgentSettings {
                id: "planner".into(),
                ..AgentSettings::implicit()
            },
        ];
        assert_eq!(
            mentioned("@review bot, then @PLANNER", &agents),
            ["reviewer", "planner"]
        );
    }

    #[test]
    fn overrides_replace_only_what_they_set() {
        let base = ConversationSettings::default();
        let o = ConversationOverrides {
            lookback_count: Some(7),
            ..Default::default()
        };
        let out = o.apply(&base);
        assert_eq!(out.lookback_count, 7);
        assert_eq!(out.max_context_tokens, base.max_context_tokens);
    }
}
