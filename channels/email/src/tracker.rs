//! The mailbox tracker: reads new mail oldest first and hands each message to intake with the
//! mailbox cursor `(UIDVALIDITY, last UID)`, so the message, its task and the cursor commit
//! together. IDLE when the server offers it (re-issued well before 29 minutes), a periodic poll as
//! the safety net, reconnects with backoff.
//!
//! Every message is recorded: answerable mail becomes a trigger; mail that must not be answered
//! (loop guards, sender policy, rate limits, unreadable) is stored with `meta.skipped` naming the
//! reason. Threads are conversations: a message joins the conversation of any message it
//! references that the gateway has seen or sent, else its thread key.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use ctxgate_contract::{
    Audience, CursorUpdate, EventKind, InboundEvent, InboundMessage, Intake, IntakeError,
    MessageKind, Role, SenderKind, SourceType,
};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::imap::{FetchedMessage, ImapConfig, ImapError, ImapSession};
use crate::thread::{references, related_ids, reply_subject, thread_key};
use crate::{EmailAddress, NormalizedMail, Normalizer};

/// What to do with a message once it is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterProcessing {
    Nothing,
    MarkSeen,
    MoveTo(String),
}

#[derive(Debug, Clone)]
pub struct TrackerConfig {
    /// Agent ids answering on this mailbox: mail to `<local>+<agent>@<domain>` of an own
    /// address is addressed to that agent.
    pub agents: Vec<String>,
    /// The channel instance, `email:<account>`.
    pub channel: String,
    pub imap: ImapConfig,
    /// The gateway's own addresses (never answered).
    pub own: Vec<EmailAddress>,
    /// Senders (addresses, or `@domain`) that may be answered; empty = anyone.
    pub allowed_senders: Vec<String>,
    /// Answers per sender per hour, and per mailbox per hour.
    pub per_sender_per_hour: usize,
    pub per_mailbox_per_hour: usize,
    pub poll_interval: Duration,
    pub use_idle: bool,
    pub after: AfterProcessing,
    pub max_backoff: Duration,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TrackerStatus {
    pub connected: bool,
    pub idle: bool,
    pub uid_validity: Option<u32>,
    pub last_uid: Option<u32>,
    pub last_poll_at: Option<chrono::DateTime<Utc>>,
    pub messages_taken: u64,
    pub messages_skipped: u64,
    pub last_error: Option<String>,
    pub last_error_at: Option<chrono::DateTime<Utc>>,
    pub backoff_until: Option<chrono::DateTime<Utc>>,
}

/// The agents a mail is addressed to by plus-address: `bot+reviewer@example.org` in To or Cc,
/// where `bot@example.org` is an own address and `reviewer` an agent of the mailbox.
fn plus_agents(mail: &NormalizedMail, own: &[EmailAddress], agents: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for m in mail.to.iter().chain(&mail.cc) {
        let address = m.address.as_str().to_lowercase();
        let Some((local, domain)) = address.rsplit_once('@') else {
            continue;
        };
        let Some((base, tag)) = local.split_once('+') else {
            continue;
        };
        let plain = format!("{base}@{domain}");
        let ours = own.iter().any(|o| o.as_str().eq_ignore_ascii_case(&plain));
        if let Some(agent) = agents.iter().find(|a| a.eq_ignore_ascii_case(tag))
            && ours
            && !out.contains(agent)
        {
            out.push(agent.clone());
        }
    }
    out
}

/// The cursor value: `<uidvalidity>:<last uid>`.
fn cursor_value(uid_validity: u32, uid: u32) -> String {
    format!("{uid_validity}:{uid}")
}

fn parse_cursor(v: &str) -> Option<(u32, u32)> {
    let (a, b) = v.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

#[derive(Clone)]
pub struct Tracker {
    config: Arc<TrackerConfig>,
    intake: Arc<dyn Intake>,
    cancel: CancellationToken,
    status: Arc<Mutex<TrackerStatus>>,
    rates: Arc<Mutex<Rates>>,
    normalizer: Arc<Normalizer>,
}

#[derive(Default)]
struct Rates {
    per_sender: HashMap<String, VecDeque<Instant>>,
    mailbox: VecDeque<Instant>,
}

enum Stop {
    Cancelled,
    Failed(ImapError),
    Intake(IntakeError),
}

impl From<ImapError> for Stop {
    fn from(e: ImapError) -> Self {
        Stop::Failed(e)
    }
}

impl Tracker {
    pub fn new(config: TrackerConfig, intake: Arc<dyn Intake>, cancel: CancellationToken) -> Self {
        Self {
            config: Arc::new(config),
            intake,
            cancel,
            status: Arc::default(),
            rates: Arc::default(),
            normalizer: Arc::new(Normalizer::default()),
        }
    }

    /// A tracker for the same mailbox with empty state, stopping when `cancel` is cancelled:
    /// for an instance that takes the mailbox over (it reads the cursor back from intake).
    pub fn renew(&self, cancel: CancellationToken) -> Self {
        Self {
            // This process's sending rates carry over (they are not kept in the store).
            rates: self.rates.clone(),
            ..Self::new((*self.config).clone(), self.intake.clone(), cancel)
        }
    }

    pub fn status(&self) -> TrackerStatus {
        self.status.lock().expect("status lock").clone()
    }

    fn note(&self, f: impl FnOnce(&mut TrackerStatus)) {
        f(&mut self.status.lock().expect("status lock"));
    }

    /// Runs until cancelled: connects, drains, waits (IDLE or poll), reconnects with backoff.
    pub async fn run(self) {
        let mut failures = 0u32;
        loop {
            let outcome = self.session().await;
            self.note(|s| {
                s.connected = false;
                s.idle = false;
            });
            let wait = match outcome {
                Stop::Cancelled => return,
                Stop::Failed(e) => {
                    failures += 1;
                    let wait = if e.is_retryable() {
                        Duration::from_secs(1)
                            .saturating_mul(2u32.saturating_pow(failures.min(16) - 1))
                            .min(self.config.max_backoff)
                    } else {
                        self.config.max_backoff
                    };
                    tracing::warn!(channel = %self.config.channel, error = %e, retry_in = ?wait,
                        "mailbox connection failed");
                    self.note(|s| {
                        s.last_error = Some(e.to_string());
                        s.last_error_at = Some(Utc::now());
                        s.backoff_until = Some(Utc::now() + wait);
                    });
                    wait
                }
                Stop::Intake(IntakeError::ShuttingDown) => return,
                Stop::Intake(e) => {
                    failures += 1;
                    tracing::error!(channel = %self.config.channel, error = %e, "cannot store mail");
                    Duration::from_secs(1).min(self.config.max_backoff)
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.cancel.cancelled() => return,
            }
        }
    }

    async fn session(&self) -> Stop {
        let mut session = match ImapSession::connect(&self.config.imap).await {
            Ok(s) => s,
            Err(e) => return e.into(),
        };
        let idle = self.config.use_idle && session.supports_idle().await.unwrap_or(false);
        self.note(|s| {
            s.connected = true;
            s.backoff_until = None;
        });
        loop {
            let state = match session.select().await {
                Ok(s) => s,
                Err(e) => return e.into(),
            };
            if let Err(stop) = self.drain(&mut session, state.uid_validity).await {
                return stop;
            }
            if self.cancel.is_cancelled() {
                session.logout().await;
                return Stop::Cancelled;
            }
            if idle {
                self.note(|s| s.idle = true);
                let wait = self.config.poll_interval.min(Duration::from_secs(25 * 60));
                let idled = tokio::select! {
                    r = session.idle(wait) => r,
                    _ = self.cancel.cancelled() => return Stop::Cancelled,
                };
                self.note(|s| s.idle = false);
                session = match idled {
                    Ok(s) => s,
                    Err(e) => return e.into(),
                };
            } else {
                tokio::select! {
                    _ = tokio::time::sleep(self.config.poll_interval) => {}
                    _ = self.cancel.cancelled() => {
                        session.logout().await;
                        return Stop::Cancelled;
                    }
                }
            }
        }
    }

    /// Reads everything new, batch by batch.
    async fn drain(&self, session: &mut ImapSession, uid_validity: u32) -> Result<(), Stop> {
        let channel = &self.config.channel;
        let scope = &self.config.imap.mailbox;
        let stored = self
            .intake
            .cursor(channel, scope)
            .await
            .map_err(Stop::Intake)?
            .and_then(|v| parse_cursor(&v));
        let mut last_uid = match stored {
            Some((validity, uid)) if validity == uid_validity => uid,
            Some((validity, _)) => {
                // The server renumbered the mailbox: read it again from the start. Messages
                // already recorded keep their Message-ID, so none is answered twice.
                tracing::warn!(%channel, old = validity, new = uid_validity,
                    "UIDVALIDITY changed; re-reading the mailbox");
                0
            }
            None => 0,
        };
        self.note(|s| {
            s.uid_validity = Some(uid_validity);
            s.last_uid = Some(last_uid);
            s.last_poll_at = Some(Utc::now());
        });
        loop {
            let batch = session.fetch_after(last_uid).await?;
            if batch.is_empty() {
                return Ok(());
            }
            for fetched in batch {
                if self.cancel.is_cancelled() {
                    return Err(Stop::Cancelled);
                }
                let uid = fetched.uid;
                let event = self.event(&fetched, uid_validity).await;
                let skipped = matches!(&event.kind, EventKind::Posted(m) if !m.trigger);
                self.intake.submit(event).await.map_err(Stop::Intake)?;
                match &self.config.after {
                    AfterProcessing::Nothing => {}
                    AfterProcessing::MarkSeen => session.mark_seen(uid).await?,
                    AfterProcessing::MoveTo(folder) => session.move_to(uid, folder).await?,
                }
                last_uid = uid;
                self.note(|s| {
                    s.last_uid = Some(uid);
                    s.messages_taken += 1;
                    if skipped {
                        s.messages_skipped += 1;
                    }
                });
            }
        }
    }

    async fn event(&self, fetched: &FetchedMessage, uid_validity: u32) -> InboundEvent {
        let channel = self.config.channel.clone();
        let cursor = Some(CursorUpdate {
            scope: self.config.imap.mailbox.clone(),
            value: cursor_value(uid_validity, fetched.uid),
        });
        let mail = match self.normalizer.normalize(&fetched.raw) {
            Ok(mail) => mail,
            Err(e) => {
                tracing::warn!(%channel, uid = fetched.uid, error = %e, "unreadable mail recorded");
                return InboundEvent {
                    channel,
                    conversation: "unreadable".to_owned(),
                    kind: EventKind::Posted(InboundMessage {
                        channel_message_id: format!("uid:{uid_validity}:{}", fetched.uid),
                        sender_id: "unknown".to_owned(),
                        sender_name: None,
                        sender_kind: SenderKind::User,
                        role: Role::User,
                        kind: MessageKind::Message,
                        text: format!("[unreadable message: {e}]"),
                        timestamp: Utc::now(),
                        reply_to: None,
                        source_type: SourceType::Email,
                        trigger: false,
                        agent: None,
                        audience: Audience::Everyone,
                        meta: serde_json::json!({
                            "skipped": format!("unreadable:{}", e.code()),
                            "uid": fetched.uid,
                            "size": fetched.raw.len(),
                        }),
                    }),
                    cursor,
                };
            }
        };
        let conversation = self.conversation_of(&mail).await;
        let skipped = self.skip_reason(&mail);
        let sender = mail
            .from
            .as_ref()
            .map(|m| m.address.as_str().to_lowercase())
            .unwrap_or_else(|| "unknown".to_owned());
        let message_id = mail.message_id.as_ref().map_or_else(
            || format!("uid:{uid_validity}:{}", fetched.uid),
            |id| id.as_str().to_owned(),
        );
        let mut text = String::new();
        if let Some(subject) = mail.subject.as_deref().filter(|s| !s.trim().is_empty())
            && mail.in_reply_to.is_empty()
            && mail.references.is_empty()
        {
            text.push_str(&format!("Subject: {subject}\n\n"));
        }
        text.push_str(mail.body.text.trim());
        if !mail.attachments.is_empty() {
            let names: Vec<String> = mail
                .attachments
                .iter()
                .map(|a| {
                    format!(
                        "[{}]",
                        a.name.clone().unwrap_or_else(|| a.content_type.clone())
                    )
                })
                .collect();
            text.push_str(&format!("\n\nAttachments: {}", names.join(", ")));
        }
        let reply_to = mail
            .in_reply_to
            .first()
            .or(mail.references.last())
            .map(|id| id.as_str().to_owned());
        let reply = serde_json::json!({
            "to": if mail.reply_to.is_empty() { mail.from.iter().cloned().collect() } else { mail.reply_to.clone() },
            "subject": reply_subject(mail.subject.as_deref().unwrap_or_default()),
            "in_reply_to": mail.message_id,
            "references": references(&mail),
        });
        let mut meta = serde_json::json!({
            "reply": reply,
            "uid": fetched.uid,
            "attachments": mail.attachments,
        });
        if let Some(reason) = &skipped {
            meta["skipped"] = reason.clone().into();
        }
        InboundEvent {
            channel,
            conversation,
            kind: EventKind::Posted(InboundMessage {
                channel_message_id: message_id,
                sender_id: sender,
                sender_name: mail.from.as_ref().and_then(|m| m.name.clone()),
                sender_kind: SenderKind::User,
                role: Role::User,
                kind: MessageKind::Message,
                text,
                timestamp: mail.date.map_or_else(Utc::now, |d| d.with_timezone(&Utc)),
                reply_to,
                source_type: SourceType::Email,
                trigger: skipped.is_none(),
                agent: None,
                audience: match plus_agents(&mail, &self.config.own, &self.config.agents) {
                    agents if agents.is_empty() => Audience::Everyone,
                    agents => Audience::Addressed {
                        agents,
                        users: Vec::new(),
                    },
                },
                meta,
            }),
            cursor,
        }
    }

    /// The conversation of any referenced message the gateway knows (one it received or sent),
    /// else the thread key.
    async fn conversation_of(&self, mail: &NormalizedMail) -> String {
        for id in related_ids(mail).iter().rev() {
            match self
                .intake
                .conversation_of(&self.config.channel, id.as_str())
                .await
            {
                Ok(Some(conversation)) => return conversation,
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot look up the thread; using its key");
                    break;
                }
            }
        }
        thread_key(mail).to_string()
    }

    fn skip_reason(&self, mail: &NormalizedMail) -> Option<String> {
        if let Some(reason) = crate::guards::check(mail, &self.config.own) {
            return Some(reason.code().to_owned());
        }
        let sender = mail.from.as_ref()?.address.as_str().to_lowercase();
        if !self.config.allowed_senders.is_empty()
            && !self.config.allowed_senders.iter().any(|a| {
                let a = a.to_lowercase();
                if a.starts_with('@') {
                    sender.ends_with(&a)
                } else {
                    a == sender
                }
            })
        {
            return Some("sender_not_allowed".to_owned());
        }
        let mut rates = self.rates.lock().expect("rates lock");
        let now = Instant::now();
        let hour = Duration::from_secs(3600);
        let Rates {
            per_sender,
            mailbox,
        } = &mut *rates;
        mailbox.retain(|t| now.duration_since(*t) < hour);
        let mine = per_sender.entry(sender).or_default();
        mine.retain(|t| now.duration_since(*t) < hour);
        if mine.len() >= self.config.per_sender_per_hour {
            return Some("rate_limited_sender".to_owned());
        }
        if mailbox.len() >= self.config.per_mailbox_per_hour {
            return Some("rate_limited_mailbox".to_owned());
        }
        mine.push_back(now);
        mailbox.push_back(now);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip() {
        assert_eq!(parse_cursor(&cursor_value(7, 42)), Some((7, 42)));
        assert_eq!(parse_cursor("garbage"), None);
    }

    #[test]
    fn plus_addresses_of_own_addresses_name_agents() {
        let raw = "From: alice@example.org\r\nTo: Bot <BOT+Reviewer@example.org>, x+planner@other.org\r\n\
                   Cc: bot+planner@example.org, bot+nobody@example.org\r\nSubject: hi\r\n\r\nbody\r\n";
        let mail = Normalizer::default().normalize(raw.as_bytes()).unwrap();
        let own = [EmailAddress::parse("bot@example.org").unwrap()];
        let agents = ["reviewer".to_owned(), "planner".to_owned()];
        assert_eq!(plus_agents(&mail, &own, &agents), ["reviewer", "planner"]);
        assert!(plus_agents(&mail, &own, &[]).is_empty());
    }
}
