//! Settings: a documented schema, loaded from TOML with environment overrides.
//!
//! `config/default.toml` documents every key and equals [`Settings::default`] (a test keeps them
//! equal). Loading is in [`load`], checks that need more than types in [`validate`].

mod agents;
mod brain;
mod email;
mod load;
mod schedule;
mod secret;
mod talk;
mod validate;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use agents::{AgentSettings, ConversationOverrides, mentioned};
pub use brain::{BrainKind, BrainSettings, CliOutput, PromptInput};
pub use email::{EmailSettings, MailSecurity};
pub use load::{ConfigError, load, load_str};
pub use schedule::{ScheduleSpec, SchedulerSettings, Target};
pub use secret::Secret;
pub use talk::{TalkMode, TalkSettings};

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub http: HttpSettings,
    pub store: StoreSettings,
    pub admin: AdminSettings,
    pub telemetry: TelemetrySettings,
    pub worker: WorkerSettings,
    pub outbox: OutboxSettings,
    pub conversation: ConversationSettings,
    /// Named brains; tasks use `default` unless a channel or schedule names another.
    pub brains: BTreeMap<String, BrainSettings>,
    /// Named signed webhooks, served at `POST /webhooks/{name}`.
    pub webhooks: BTreeMap<String, WebhookSettings>,
    /// Nextcloud Talk accounts (`[talk.<name>]`), channel instances `talk:<name>`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub talk: BTreeMap<String, TalkSettings>,
    /// Mailboxes (`[email.<name>]`), channel instances `email:<name>`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub email: BTreeMap<String, EmailSettings>,
    pub scheduler: SchedulerSettings,
    /// Cron briefings (`[[schedules]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<ScheduleSpec>,
    /// Named assistants (`[[agents]]`); none means one implicit agent, `default`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentSettings>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            http: HttpSettings::default(),
            store: StoreSettings::default(),
            admin: AdminSettings::default(),
            telemetry: TelemetrySettings::default(),
            worker: WorkerSettings::default(),
            outbox: OutboxSettings::default(),
            conversation: ConversationSettings::default(),
            scheduler: SchedulerSettings::default(),
            schedules: Vec::new(),
            agents: Vec::new(),
            talk: BTreeMap::new(),
            email: BTreeMap::new(),
            brains: BTreeMap::from([("default".to_owned(), BrainSettings::default())]),
            webhooks: BTreeMap::from([(
                "default".to_owned(),
                WebhookSettings {
                    secret_file: Some(PathBuf::from("data/webhook-default.secret")),
                    ..WebhookSettings::default()
                },
            )]),
        }
    }
}

impl Settings {
    /// The brain and the own system prompt of a configured channel instance
    /// (`webhook:<name>`, `talk:<name>`, `email:<name>`).
    fn channel(&self, channel: &str) -> Option<(&str, Option<&String>)> {
        let (kind, name) = channel.split_once(':')?;
        match kind {
            "webhook" => self
                .webhooks
                .get(name)
                .map(|w| (w.brain.as_str(), w.system_prompt.as_ref())),
            "talk" => self
                .talk
                .get(name)
                .map(|t| (t.brain.as_str(), t.system_prompt.as_ref())),
            "email" => self
                .email
                .get(name)
                .map(|e| (e.brain.as_str(), e.system_prompt.as_ref())),
            _ => None,
        }
    }

    /// How many answers one sender may ask for per hour on `channel` (Talk and webhooks; e-mail
    /// keeps its own limits in the tracker); `None` = no limit.
    pub fn per_sender_limit(&self, channel: &str) -> Option<usize> {
        let (kind, name) = channel.split_once(':')?;
        let limit = match kind {
            "webhook" => self.webhooks.get(name)?.per_sender_per_hour,
            "talk" => self.talk.get(name)?.per_sender_per_hour,
            _ => 0,
        };
        (limit > 0).then_some(limit)
    }

    /// The system prompt for a conversation on `channel` answered by `brain`: the channel's own
    /// prompt when it has one, else the brain's.
    pub fn system_prompt_for(&self, channel: &str, brain: &str) -> String {
        self.channel(channel)
            .and_then(|(_, prompt)| prompt.cloned())
            .or_else(|| self.brains.get(brain).map(|b| b.system_prompt.clone()))
            .unwrap_or_default()
    }

    /// The configured agents, or the implicit `default` one when there are none.
    pub fn agent_list(&self) -> Vec<AgentSettings> {
        if self.agents.is_empty() {
            vec![AgentSettings::implicit()]
        } else {
            self.agents.clone()
        }
    }

    /// The agent `id` (the implicit one when no agents are configured).
    pub fn agent(&self, id: &str) -> Option<AgentSettings> {
        self.agent_list().into_iter().find(|a| a.id == id)
    }

    /// The agents answering on a channel instance.
    pub fn agents_serving(&self, channel: &str) -> Vec<AgentSettings> {
        self.agent_list()
            .into_iter()
            .filter(|a| a.serves(channel))
            .collect()
    }

    /// The agent answering messages addressed to no agent on `channel`.
    pub fn default_agent_for(&self, channel: &str) -> Option<String> {
        let serving = self.agents_serving(channel);
        serving
            .iter()
            .find(|a| a.default)
            .or(serving.first())
            .map(|a| a.id.clone())
    }

    /// The brain answering for `agent` on `channel`: the agent's own, else the channel's.
    pub fn brain_for(&self, channel: &str, agent: &str) -> String {
        self.agent(agent)
            .and_then(|a| a.brain)
            .unwrap_or_else(|| self.brain_for_channel(channel).to_owned())
    }

    /// The system prompt of `agent` on `channel` answered by `brain`: the agent's own prompt
    /// (its file read again now), else the channel's, else the brain's.
    pub fn prompt_for_agent(&self, channel: &str, agent: &str, brain: &str) -> String {
        self.agent(agent)
            .and_then(|a| a.current_prompt())
            .unwrap_or_else(|| self.system_prompt_for(channel, brain))
    }

    /// `[conversation]` with the agent's overrides.
    pub fn conversation_for(&self, agent: &str) -> ConversationSettings {
        match self.agents.iter().find(|a| a.id == agent) {
            Some(a) => a.conversation.apply(&self.conversation),
            None => self.conversation.clone(),
        }
    }

    /// When to acknowledge a slow answer on a channel, and with what text.
    pub fn ack_for(&self, channel: &str) -> Option<(Duration, String)> {
        let talk = self.talk.get(channel.strip_prefix("talk:")?)?;
        (!talk.ack_after.is_zero()).then(|| (talk.ack_after, talk.ack_text.clone()))
    }

    /// The brain that answers messages arriving on a channel instance.
    pub fn brain_for_channel(&self, channel: &str) -> &str {
        self.channel(channel).map_or("default", |(brain, _)| brain)
    }
}

/// The HTTP server: webhooks, health and the admin API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSettings {
    /// Address to listen on. Port 0 picks a free port.
    pub listen: SocketAddr,
    /// Largest accepted request body in bytes (larger ones get 413).
    pub body_limit_bytes: usize,
    /// Requests taking longer are answered 408.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8686)),
            body_limit_bytes: 1024 * 1024,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// The durable store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    /// `sqlite://PATH` (created if missing) or `sqlite::memory:`.
    pub url: String,
    /// How long a connection waits for a lock held by another process.
    #[serde(with = "humantime_serde")]
    pub busy_timeout: Duration,
    /// SQLite `synchronous`: `normal` (durable across process crashes; the WAL default) or `full`
    /// (also across power loss, slower).
    pub synchronous: Synchronous,
    /// Connections used for reads (writes go through one connection).
    pub read_connections: u32,
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            url: "sqlite://data/ctxgate.db".to_owned(),
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Normal,
            read_connections: 4,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    Normal,
    Full,
}

/// The admin API under `/admin`. Without a token it is disabled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct AdminSettings {
    /// Bearer token for full access (or set `token_file`, or `CTXGATE__ADMIN__TOKEN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// File holding the token (trailing whitespace ignored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// A second token that may only read (GET), e.g. for dashboards (or `read_only_token_file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_token: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_token_file: Option<PathBuf>,
}

/// Logs and traces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetrySettings {
    /// `pretty` for people, `json` for log collectors.
    pub format: LogFormat,
    /// A tracing filter (`info`, `ctxgate=debug,sqlx=warn`, …); `RUST_LOG` overrides it.
    pub filter: String,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            format: LogFormat::Pretty,
            filter: "info,sqlx=warn".to_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Pretty,
    Json,
}

/// The task worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerSettings {
    /// Tasks run at the same time (never two of one conversation for the same agent).
    pub count: usize,
    /// How long a claimed task stays with its worker without a heartbeat.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    /// How often a running task renews its lease (must be well below `lease`).
    #[serde(with = "humantime_serde")]
    pub heartbeat: Duration,
    /// How often an idle worker looks for due tasks (new tasks wake it at once).
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Attempts before a task is marked failed.
    pub max_attempts: u32,
    /// Wait before attempt 2, 3, …; the last value repeats.
    #[serde(with = "duration_list")]
    pub retry_backoff: Vec<Duration>,
    /// Quick re-tries of a transient brain error (429, 5xx, timeout) within one attempt.
    pub fast_retries: u32,
    /// First wait of a quick re-try; doubles each time; a longer Retry-After wins.
    #[serde(with = "humantime_serde")]
    pub fast_retry_backoff: Duration,
    /// On shutdown, running tasks get this long to finish before they are handed back.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            count: 2,
            lease: Duration::from_secs(60),
            heartbeat: Duration::from_secs(15),
            poll_interval: Duration::from_secs(1),
            max_attempts: 3,
            retry_backoff: vec![
                Duration::from_secs(60),
                Duration::from_secs(240),
                Duration::from_secs(960),
            ],
            fast_retries: 2,
            fast_retry_backoff: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(20),
        }
    }
}

/// Delivery of answers through the channels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutboxSettings {
    /// How often the delivery loop looks for due deliveries (new answers wake it at once).
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Delivery attempts before an answer is marked undeliverable.
    pub max_attempts: u32,
    /// First wait after a failed delivery; doubles each time up to `max_backoff`.
    #[serde(with = "humantime_serde")]
    pub initial_backoff: Duration,
    #[serde(with = "humantime_serde")]
    pub max_backoff: Duration,
    /// How long one delivery may hold its claim.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
}

impl Default for OutboxSettings {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(1),
            max_attempts: 10,
            initial_backoff: Duration::from_secs(5),
            max_backoff: Duration::from_secs(600),
            lease: Duration::from_secs(60),
        }
    }
}

/// Which prior messages go into the prompt (see CONTEXT.md). Defaults are the reference
/// behaviour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConversationSettings {
    /// No history at all when false.
    pub enabled: bool,
    /// Newest messages considered by the interactive selection.
    pub lookback_count: usize,
    /// With this many candidates or fewer, include all, no triage.
    pub skip_selection_threshold: usize,
    /// Completer used for triage: `fast` = the task brain's fast completer.
    pub selection_model: String,
    /// Bound on the whole triage call.
    #[serde(with = "humantime_serde")]
    pub selection_timeout: Duration,
    /// False includes every candidate without triage.
    pub use_selection: bool,
    /// The newest N candidates are always included.
    pub always_include_recent: usize,
    /// Max characters per assistant message in the prompt (0 = no limit).
    pub context_truncation: usize,
    /// Drop candidates older than this many hours before the newest one (0 = off).
    pub context_recency_hours: u64,
    /// Floor for the recency filter.
    pub context_min_messages: usize,
    /// Newest N scheduled/briefing results added back to interactive context.
    pub previous_tasks_count: usize,
    /// Messages fetched from the Talk cache for context (and backfilled on first sight).
    pub talk_context_limit: usize,
    /// The Talk cache keeps the newest N messages per room.
    pub talk_cache_max_per_conversation: usize,
    /// Token budget of the whole context (0 = no budget, and no archive recall).
    pub max_context_tokens: usize,
    /// Tokenizer counting the budget: `cl100k_base` or `o200k_base`.
    pub tokenizer: Tokenizer,
    /// Fill the budget left after the selection with the best matches from the archive.
    pub archive_recall: bool,
    /// Full-text matches examined per recall.
    pub archive_candidates: usize,
    /// Turns on each side of an archive match brought along with it.
    pub archive_neighbours: usize,
    /// Longer archive messages are cut to this many tokens around the match (0 = never).
    pub archive_snippet_tokens: usize,
    /// Also search for words related to the message's words in meaning or form (English).
    pub archive_related_words: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    Cl100kBase,
    O200kBase,
}

impl Default for ConversationSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            lookback_count: 25,
            skip_selection_threshold: 3,
            selection_model: "fast".to_owned(),
            selection_timeout: Duration::from_secs(30),
            use_selection: true,
            always_include_recent: 5,
            context_truncation: 0,
            context_recency_hours: 0,
            context_min_messages: 10,
            previous_tasks_count: 3,
            talk_context_limit: 100,
            talk_cache_max_per_conversation: 200,
            max_context_tokens: 4000,
            tokenizer: Tokenizer::Cl100kBase,
            archive_recall: true,
            archive_candidates: 200,
            archive_neighbours: 1,
            archive_snippet_tokens: 200,
            archive_related_words: true,
        }
    }
}

/// One signed webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhookSettings {
    pub enabled: bool,
    /// Shared HMAC secret (or `secret_file`, or `CTXGATE__WEBHOOKS__<NAME>__SECRET`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<Secret>,
    /// File holding the secret. When `secret` is unset and the file does not exist yet, a random
    /// secret is generated into it at start-up (mode 0600).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// Signed requests must carry a timestamp within this window of the gateway's clock.
    #[serde(with = "humantime_serde")]
    pub timestamp_tolerance: Duration,
    /// Timeout of one callback delivery.
    #[serde(with = "humantime_serde")]
    pub callback_timeout: Duration,
    /// The brain answering this webhook's messages.
    pub brain: String,
    /// System prompt for this webhook's conversations instead of the brain's (or
    /// `system_prompt_file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt_file: Option<PathBuf>,
    /// Answers one sender (the request's `sender`) may ask for per hour; past it, their
    /// messages are stored marked `skipped: rate_limited_sender`. 0 = no limit.
    pub per_sender_per_hour: usize,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            secret: None,
            secret_file: None,
            timestamp_tolerance: Duration::from_secs(300),
            callback_timeout: Duration::from_secs(10),
            brain: "default".to_owned(),
            system_prompt: None,
            system_prompt_file: None,
            per_sender_per_hour: 0,
        }
    }
}

/// `["1m", "4m"]` as a list of durations.
mod duration_list {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[Duration], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|d| humantime::format_duration(*d).to_string()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|s| humantime::parse_duration(s).map_err(serde::de::Error::custom))
            .collect()
    }
}
