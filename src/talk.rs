//! Puts the configured Talk accounts together: a poller and a user sink per poll-mode account,
//! a bot endpoint and a bot sink per bot-mode account.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context as _;
use ctxgate_contract::{Intake, Sink};
use ctxgate_talk::TalkClient;
use ctxgate_talk::bot::BotClient;
use ctxgate_talk::client::DEFAULT_MAX_LENGTH;
use ctxgate_talk::poller::{Poller, PollerConfig};
use ctxgate_talk::receiver::BotEndpoint;
use ctxgate_talk::sink::TalkSink;
use tokio_util::sync::CancellationToken;

use crate::config::{Settings, TalkMode, TalkSettings};

pub fn channel_name(account: &str) -> String {
    format!("talk:{account}")
}

fn enabled(settings: &Settings) -> impl Iterator<Item = (&String, &TalkSettings)> {
    settings.talk.iter().filter(|(_, t)| t.enabled)
}

fn client(name: &str, t: &TalkSettings) -> anyhow::Result<TalkClient> {
    let password = t
        .password
        .as_ref()
        .with_context(|| format!("talk.{name}.password is not set"))?;
    TalkClient::new(&t.base_url, &t.user, password.expose(), t.request_timeout)
        .with_context(|| format!("cannot build the HTTP client of talk.{name}"))
}

/// One sink per enabled account.
pub fn sinks(settings: &Settings) -> anyhow::Result<Vec<Arc<dyn Sink>>> {
    let mut out: Vec<Arc<dyn Sink>> = Vec::new();
    for (name, t) in enabled(settings) {
        let channel = channel_name(name);
        let sink = match t.mode {
            TalkMode::Poll => TalkSink::user(&channel, client(name, t)?),
            TalkMode::Bot => {
                let secret = t
                    .secret
                    .as_ref()
                    .with_context(|| format!("talk.{name}.secret is not set"))?;
                let bot = BotClient::new(&t.base_url, secret.expose(), t.request_timeout)
                    .with_context(|| format!("cannot build the bot client of talk.{name}"))?;
                TalkSink::bot(&channel, bot, DEFAULT_MAX_LENGTH)
            }
        };
        out.push(Arc::new(sink));
    }
    Ok(out)
}

/// The bot-mode accounts served at `POST /talk/{account}/bot`.
pub fn bot_endpoints(settings: &Settings) -> Vec<BotEndpoint> {
    enabled(settings)
        .filter(|(_, t)| t.mode == TalkMode::Bot)
        .filter_map(|(name, t)| {
            Some(BotEndpoint {
                account: name.clone(),
                channel: channel_name(name),
                secret: t.secret.as_ref()?.expose().to_owned(),
                backend: t.base_url.clone(),
                bot_name: t.bot_name.clone(),
                answer_all: t.bot_answer_all,
                allowed_users: t.allowed_users.clone(),
                agents: agent_handles(settings, &channel_name(name)),
            })
        })
        .collect()
}

/// How the agents answering on `channel` are addressed there (none without `[[agents]]`: the
/// implicit agent is addressed by mentioning the account).
pub fn agent_handles(settings: &Settings, channel: &str) -> Vec<ctxgate_contract::AgentHandle> {
    if settings.agents.is_empty() {
        return Vec::new();
    }
    settings
        .agents_serving(channel)
        .iter()
        .map(|a| a.handle())
        .collect()
}

/// One poller per poll-mode account, not yet running.
pub fn pollers(
    settings: &Settings,
    intake: Arc<dyn Intake>,
    cancel: &CancellationToken,
) -> anyhow::Result<BTreeMap<String, Poller>> {
    let mut out = BTreeMap::new();
    for (name, t) in enabled(settings).filter(|(_, t)| t.mode == TalkMode::Poll) {
        let config = PollerConfig {
            channel: channel_name(name),
            rooms: t.rooms.clone(),
            allowed_users: t.allowed_users.clone(),
            room_list_interval: t.room_list_interval,
            full_refresh_interval: t.full_refresh_interval,
            active_window: t.active_window,
            long_poll_timeout: t.long_poll_timeout,
            backfill: settings.conversation.talk_context_limit,
            cache_max: settings.conversation.talk_cache_max_per_conversation,
            max_backoff: t.max_backoff,
            backfill_concurrency: 4,
            agents: agent_handles(settings, &channel_name(name)),
        };
        out.insert(
            name.clone(),
            Poller::new(
                config,
                client(name, t)?,
                intake.clone(),
                cancel.child_token(),
            ),
        );
    }
    Ok(out)
}
