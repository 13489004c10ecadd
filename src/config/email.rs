use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Secret;

/// Transport security of an IMAP or SMTP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MailSecurity {
    /// TLS from the first byte (IMAPS 993, SMTPS 465).
    Tls,
    /// STARTTLS before login (IMAP 143, submission 587).
    Starttls,
    /// No encryption: only for servers on loopback.
    Plain,
}

/// One mailbox the assistant answers (`[email.<name>]`), the channel instance `email:<name>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmailSettings {
    pub enabled: bool,
    /// The assistant's address: answers come from it, mail from it is never answered.
    pub address: String,
    /// The display name on answers.
    pub display_name: String,
    /// More addresses that are the gateway itself (aliases), never answered.
    pub aliases: Vec<String>,
    pub imap_host: String,
    pub imap_port: u16,
    pub imap_security: MailSecurity,
    /// The IMAP login (usually the address).
    pub username: String,
    /// The password of `username` for IMAP and SMTP (or `password_file`, or
    /// `CTXGATE__EMAIL__<NAME>__PASSWORD`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    pub mailbox: String,
    pub smtp_host: String,
    pub smtp_port: u16,
    pub smtp_security: MailSecurity,
    /// Log in to SMTP with `username`/`password` (off for a relay that accepts local mail).
    pub smtp_auth: bool,
    /// Use IMAP IDLE when the server offers it (re-issued before 29 minutes).
    pub idle: bool,
    /// Poll this often (also the longest IDLE before it is re-issued).
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Messages fetched per batch.
    pub batch_size: usize,
    /// After a message is recorded: `"seen"` (mark it read), `"none"`, or `"move"` to
    /// `processed_folder`.
    pub after_processing: String,
    pub processed_folder: String,
    /// Senders (addresses, or `@domain`) who may be answered; empty = anyone. Others' mail is
    /// recorded with `skipped: sender_not_allowed`.
    pub allowed_senders: Vec<String>,
    /// Answers per sender per hour; more mail is recorded with `skipped: rate_limited_sender`.
    pub per_sender_per_hour: usize,
    /// Answers per hour for the whole mailbox.
    pub per_mailbox_per_hour: usize,
    /// Timeout of each IMAP command and SMTP exchange.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub max_backoff: Duration,
    /// Subject of briefings sent to this mailbox's schedule targets.
    pub briefing_subject: String,
    pub brain: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt_file: Option<PathBuf>,
}

impl Default for EmailSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            address: String::new(),
            display_name: "Assistant".to_owned(),
            aliases: Vec::new(),
            imap_host: String::new(),
            imap_port: 993,
            imap_security: MailSecurity::Tls,
            username: String::new(),
            password: None,
            password_file: None,
            mailbox: "INBOX".to_owned(),
            smtp_host: String::new(),
            smtp_port: 465,
            smtp_security: MailSecurity::Tls,
            smtp_auth: true,
            idle: true,
            poll_interval: Duration::from_secs(300),
            batch_size: 50,
            after_processing: "seen".to_owned(),
            processed_folder: String::new(),
            allowed_senders: Vec::new(),
            per_sender_per_hour: 20,
            per_mailbox_per_hour: 60,
            timeout: Duration::from_secs(30),
            max_backoff: Duration::from_secs(300),
            briefing_subject: "Your briefing".to_owned(),
            brain: "default".to_owned(),
            system_prompt: None,
            system_prompt_file: None,
        }
    }
}

impl EmailSettings {
    pub(super) fn check(&self) -> Result<(), (&'static str, String)> {
        if !self.address.contains('@') {
            return Err(("address", "must be the assistant's e-mail address".into()));
        }
        if self.imap_host.trim().is_empty() {
            return Err(("imap_host", "set the IMAP server".into()));
        }
        if self.smtp_host.trim().is_empty() {
            return Err(("smtp_host", "set the SMTP server".into()));
        }
        if self.username.trim().is_empty() {
            return Err(("username", "set the IMAP login".into()));
        }
        if self.password.is_none() && self.password_file.is_none() {
            return Err(("password", "set password or password_file".into()));
        }
        match self.after_processing.as_str() {
            "seen" | "none" => {}
            "move" if !self.processed_folder.trim().is_empty() => {}
            "move" => return Err(("processed_folder", "name the folder to move mail to".into())),
            _ => {
                return Err((
                    "after_processing",
                    "must be \"seen\", \"none\" or \"move\"".into(),
                ));
            }
        }
        if self.batch_size == 0 {
            return Err(("batch_size", "must be at least 1".into()));
        }
        if self.poll_interval.is_zero() {
            return Err(("poll_interval", "must be positive".into()));
        }
        Ok(())
    }
}
