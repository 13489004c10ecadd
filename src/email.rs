//! Puts the configured mailboxes together: an IMAP tracker and an SMTP sink per `[email.<name>]`.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context as _;
use ctxgate_contract::{Intake, Sink};
use ctxgate_email::imap::ImapConfig;
use ctxgate_email::sink::EmailSink;
use ctxgate_email::smtp::{SmtpConfig, SmtpCredentials, SmtpSender};
use ctxgate_email::tracker::{AfterProcessing, Tracker, TrackerConfig};
use ctxgate_email::{EmailAddress, Mailbox, Security};
use tokio_util::sync::CancellationToken;

use crate::config::{EmailSettings, MailSecurity, Settings};

pub fn channel_name(account: &str) -> String {
    format!("email:{account}")
}

fn security(s: MailSecurity) -> Security {
    match s {
        MailSecurity::Tls => Security::Tls,
        MailSecurity::Starttls => Security::StartTls,
        MailSecurity::Plain => Security::Plain,
    }
}

fn enabled(settings: &Settings) -> impl Iterator<Item = (&String, &EmailSettings)> {
    settings.email.iter().filter(|(_, e)| e.enabled)
}

fn password(name: &str, e: &EmailSettings) -> anyhow::Result<secrecy::SecretString> {
    let p = e
        .password
        .as_ref()
        .with_context(|| format!("email.{name}.password is not set"))?;
    Ok(secrecy::SecretString::from(p.expose().to_owned()))
}

fn address(name: &str, raw: &str) -> anyhow::Result<EmailAddress> {
    EmailAddress::parse(raw).with_context(|| format!("email.{name}: {raw:?} is not an address"))
}

pub fn imap_config(name: &str, e: &EmailSettings) -> anyhow::Result<ImapConfig> {
    Ok(ImapConfig {
        host: e.imap_host.clone(),
        port: e.imap_port,
        security: security(e.imap_security),
        username: e.username.clone(),
        password: password(name, e)?,
        mailbox: e.mailbox.clone(),
        batch_size: e.batch_size,
        timeout: e.timeout,
    })
}

pub fn smtp_sender(name: &str, e: &EmailSettings) -> anyhow::Result<SmtpSender> {
    let own = address(name, &e.address)?;
    let config = SmtpConfig {
        host: e.smtp_host.clone(),
        port: e.smtp_port,
        security: security(e.smtp_security),
        credentials: if e.smtp_auth {
            Some(SmtpCredentials {
                username: e.username.clone(),
                password: password(name, e)?,
            })
        } else {
            None
        },
        hello_name: own.domain().unwrap_or("localhost").to_owned(),
        timeout: e.timeout,
    };
    SmtpSender::new(&config).with_context(|| format!("cannot set up SMTP for email.{name}"))
}

pub fn sinks(settings: &Settings) -> anyhow::Result<Vec<Arc<dyn Sink>>> {
    let mut out: Vec<Arc<dyn Sink>> = Vec::new();
    for (name, e) in enabled(settings) {
        let from = Mailbox::new(address(name, &e.address)?, Some(&e.display_name));
        out.push(Arc::new(EmailSink::new(
            &channel_name(name),
            from,
            smtp_sender(name, e)?,
            &e.briefing_subject,
        )));
    }
    Ok(out)
}

pub fn trackers(
    settings: &Settings,
    intake: Arc<dyn Intake>,
    cancel: &CancellationToken,
) -> anyhow::Result<BTreeMap<String, Tracker>> {
    let mut out = BTreeMap::new();
    for (name, e) in enabled(settings) {
        let mut own = vec![address(name, &e.address)?];
        for alias in &e.aliases {
            own.push(address(name, alias)?);
        }
        let config = TrackerConfig {
            agents: if settings.agents.is_empty() {
                Vec::new()
            } else {
                settings
                    .agents_serving(&channel_name(name))
                    .into_iter()
                    .map(|a| a.id)
                    .collect()
            },
            channel: channel_name(name),
            imap: imap_config(name, e)?,
            own,
            allowed_senders: e.allowed_senders.clone(),
            per_sender_per_hour: e.per_sender_per_hour,
            per_mailbox_per_hour: e.per_mailbox_per_hour,
            poll_interval: e.poll_interval,
            use_idle: e.idle,
            after: match e.after_processing.as_str() {
                "none" => AfterProcessing::Nothing,
                "move" => AfterProcessing::MoveTo(e.processed_folder.clone()),
                _ => AfterProcessing::MarkSeen,
            },
            max_backoff: e.max_backoff,
        };
        out.insert(
            name.clone(),
            Tracker::new(config, intake.clone(), cancel.child_token()),
        );
    }
    Ok(out)
}
