//! `[scheduler]` and `[[schedules]]`: cron briefings.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The scheduler loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSettings {
    pub enabled: bool,
    /// How often due schedules are looked for.
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// A fire missed by less than this (e.g. while the gateway was down) still runs, once; older
    /// ones are skipped and recorded.
    #[serde(with = "humantime_serde")]
    pub staleness: Duration,
    /// A schedule is disabled after this many consecutive failed runs.
    pub max_failures: u32,
    /// What a brain answers for "nothing to report" in a `silent_unless_news` schedule.
    pub silent_token: String,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            poll_interval: Duration::from_secs(1),
            staleness: Duration::from_secs(3600),
            max_failures: 5,
            silent_token: "NOTHING_TO_REPORT".to_owned(),
        }
    }
}

/// One schedule (from config, or created through the admin API).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// Unique name.
    pub name: String,
    /// Cron expression: 5 fields (`min hour day month weekday`) or 6–7 with seconds first.
    pub cron: String,
    /// IANA time zone the expression is read in (e.g. `Europe/Berlin`).
    #[serde(default = "utc")]
    pub timezone: String,
    /// What the brain is asked (or `prompt_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_file: Option<PathBuf>,
    /// Where the result goes.
    pub target: Target,
    #[serde(default = "default_brain")]
    pub brain: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Runs once, then disables itself.
    #[serde(default)]
    pub one_shot: bool,
    /// Deliver nothing when the brain answers the scheduler's `silent_token`.
    #[serde(default)]
    pub silent_unless_news: bool,
}

/// Where a briefing is delivered; its conversation is that target's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Target {
    /// A conversation of a signed webhook; the result is POSTed to `callback_url` (signed with
    /// that webhook's secret) and readable through the admin API.
    Webhook {
        webhook: String,
        conversation: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        callback_url: Option<String>,
    },
    /// A Nextcloud Talk room of a configured account (`[talk.<account>]`, default `main`).
    Talk {
        #[serde(default = "main_account")]
        account: String,
        room: String,
    },
    /// An e-mail address, sent from a configured mailbox (`[email.<account>]`, default `main`).
    Email {
        #[serde(default = "main_account")]
        account: String,
        to: String,
    },
}

impl Target {
    /// The channel instance and conversation a briefing lives in.
    pub fn conversation(&self) -> (String, String) {
        match self {
            Target::Webhook {
                webhook,
                conversation,
                ..
            } => (format!("webhook:{webhook}"), conversation.clone()),
            Target::Talk { account, room } => (format!("talk:{account}"), room.clone()),
            Target::Email { account, to } => (format!("email:{account}"), to.clone()),
        }
    }
}

fn main_account() -> String {
    "main".to_owned()
}

fn utc() -> String {
    "UTC".to_owned()
}

fn default_brain() -> String {
    "default".to_owned()
}

fn yes() -> bool {
    true
}
