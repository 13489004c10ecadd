use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Secret;

/// How an account receives messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TalkMode {
    /// Log in as a Nextcloud user with an app password and poll (history, DMs, group rooms).
    #[default]
    Poll,
    /// A Talk bot installed with `occ talk:bot:install`: Talk POSTs each message to
    /// `/talk/{account}/bot`; answers go through the bot API. No history beyond what it receives.
    Bot,
}

/// One Nextcloud Talk account (`[talk.<name>]`), the channel instance `talk:<name>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TalkSettings {
    pub enabled: bool,
    /// The Nextcloud server, e.g. `https://cloud.example.org`.
    pub base_url: String,
    pub mode: TalkMode,
    /// Poll mode: the assistant's Nextcloud user.
    pub user: String,
    /// Poll mode: an app password of that user (or `password_file`, or
    /// `CTXGATE__TALK__<NAME>__PASSWORD`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    /// Bot mode: the shared secret given to `occ talk:bot:install` (at least 40 characters; or
    /// `secret_file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// Bot mode: in group rooms, answer messages containing `@<bot_name>` or replying to the bot.
    pub bot_name: String,
    /// Bot mode: answer every message, not only mentions and replies (for rooms used only with
    /// the assistant).
    pub bot_answer_all: bool,
    /// Rooms (tokens) to watch and answer in; empty = every room the account is in.
    pub rooms: Vec<String>,
    /// Users whose messages may be answered; empty = anyone in a watched room. Others' messages
    /// still enter history (marked `skipped: sender_not_allowed`).
    pub allowed_users: Vec<String>,
    /// Answers one sender may ask for per hour on this account; past it, their messages enter
    /// history marked `skipped: rate_limited_sender`. 0 = no limit.
    pub per_sender_per_hour: usize,
    /// How often the list of rooms active since the last look is fetched (one request however
    /// many rooms).
    #[serde(with = "humantime_serde")]
    pub room_list_interval: Duration,
    /// A full room list (which notices rooms the account left) this often.
    #[serde(with = "humantime_serde")]
    pub full_refresh_interval: Duration,
    /// A room is long-polled until it has been quiet this long.
    #[serde(with = "humantime_serde")]
    pub active_window: Duration,
    /// Long-poll `timeout` sent to Talk (the server caps it at 60 s).
    #[serde(with = "humantime_serde")]
    pub long_poll_timeout: Duration,
    /// HTTP timeout of one request; must exceed `long_poll_timeout`.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Longest wait between retries after errors (429 Retry-After is honoured up to this).
    #[serde(with = "humantime_serde")]
    pub max_backoff: Duration,
    /// When an answer takes longer than this, post a short acknowledgement first (`0s` = never).
    /// Acknowledgements are tagged `ctxgate:task:{id}:ack` and never enter context.
    #[serde(with = "humantime_serde")]
    pub ack_after: Duration,
    /// The acknowledgement's text.
    pub ack_text: String,
    /// The brain answering this account's rooms.
    pub brain: String,
    /// System prompt for this account's rooms instead of the brain's (or `system_prompt_file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt_file: Option<PathBuf>,
}

impl Default for TalkSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            base_url: String::new(),
            mode: TalkMode::Poll,
            user: String::new(),
            password: None,
            password_file: None,
            secret: None,
            secret_file: None,
            bot_name: "assistant".to_owned(),
            bot_answer_all: false,
            rooms: Vec::new(),
            allowed_users: Vec::new(),
            per_sender_per_hour: 120,
            room_list_interval: Duration::from_secs(3),
            full_refresh_interval: Duration::from_secs(300),
            active_window: Duration::from_secs(600),
            long_poll_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(45),
            max_backoff: Duration::from_secs(300),
            ack_after: Duration::ZERO,
            ack_text: "Working on it…".to_owned(),
            brain: "default".to_owned(),
            system_prompt: None,
            system_prompt_file: None,
        }
    }
}

impl TalkSettings {
    /// Checks that need no files; `(key, message)` on failure.
    pub(super) fn check(&self) -> Result<(), (&'static str, String)> {
        if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://")) {
            return Err(("base_url", "must be the server's http(s) URL".into()));
        }
        match self.mode {
            TalkMode::Poll => {
                if self.user.trim().is_empty() {
                    return Err(("user", "poll mode logs in as this user; set it".into()));
                }
                if self.password.is_none() && self.password_file.is_none() {
                    return Err((
                        "password",
                        "set an app password (password or password_file)".into(),
                    ));
                }
            }
            TalkMode::Bot => {
                if self.secret.is_none() && self.secret_file.is_none() {
                    return Err((
                        "secret",
                        "bot mode needs the secret given to occ talk:bot:install".into(),
                    ));
                }
            }
        }
        if self.long_poll_timeout > Duration::from_secs(60) || self.long_poll_timeout.is_zero() {
            return Err(("long_poll_timeout", "must be between 1 s and 60 s".into()));
        }
        if self.request_timeout <= self.long_poll_timeout {
            return Err((
                "request_timeout",
                "must exceed long_poll_timeout, or quiet rooms end in client timeouts".into(),
            ));
        }
        if self.room_list_interval.is_zero() {
            return Err(("room_list_interval", "must be positive".into()));
        }
        for token in &self.rooms {
            if !valid_token(token) {
                return Err((
                    "rooms",
                    format!("{token:?} is not a room token (lowercase letters and digits)"),
                ));
            }
        }
        Ok(())
    }
}

fn valid_token(t: &str) -> bool {
    (4..=64).contains(&t.len())
        && t.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}
