//! `ctxgate doctor`: checks the configuration, the store and every configured peer, one line
//! per check with a diagnosis and what to do.

use std::path::Path;

use crate::brain::BrainError;
use crate::config::{BrainKind, Settings};
use crate::store::{OpenedStore, display_url};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone)]
pub struct Check {
    pub status: Status,
    pub name: String,
    pub detail: String,
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        write!(f, "{s}  {:<22} {}", self.name, self.detail)
    }
}

fn check(status: Status, name: impl Into<String>, detail: impl Into<String>) -> Check {
    Check {
        status,
        name: name.into(),
        detail: detail.into(),
    }
}

/// IMAP: log in and select the mailbox. SMTP: connect, EHLO and log in.
async fn email_checks(name: &str, mail: &crate::config::EmailSettings) -> Vec<Check> {
    let imap_key = format!("imap {name}");
    let smtp_key = format!("smtp {name}");
    let imap = match crate::email::imap_config(name, mail) {
        Ok(c) => c,
        Err(e) => return vec![check(Status::Fail, imap_key, format!("{e:#}"))],
    };
    let imap_check = match ctxgate_email::imap::ImapSession::connect(&imap).await {
        Ok(mut session) => match session.select().await {
            Ok(state) => {
                let idle = session.supports_idle().await.unwrap_or(false);
                session.logout().await;
                check(
                    Status::Ok,
                    imap_key,
                    format!(
                        "logged in to {}:{} as {}; {} has {} messages (UIDVALIDITY {}){}",
                        mail.imap_host,
                        mail.imap_port,
                        mail.username,
                        mail.mailbox,
                        state.exists,
                        state.uid_validity,
                        if idle {
                            ", IDLE offered"
                        } else {
                            ", no IDLE: polling"
                        }
                    ),
                )
            }
            Err(e) => check(
                Status::Fail,
                imap_key,
                format!("{e}; check email.{name}.mailbox (it must exist)"),
            ),
        },
        Err(e) => check(
            Status::Fail,
            imap_key,
            format!("{e}; check email.{name}.imap_host, imap_port, imap_security and the password"),
        ),
    };
    let smtp_check = match crate::email::smtp_sender(name, mail) {
        Ok(sender) => match sender.check().await {
            Ok(()) => check(
                Status::Ok,
                smtp_key,
                format!(
                    "{}:{} accepts EHLO{}",
                    mail.smtp_host,
                    mail.smtp_port,
                    if mail.smtp_auth { " and the login" } else { "" }
                ),
            ),
            Err(e) => check(
                Status::Fail,
                smtp_key,
                format!(
                    "{e}; check email.{name}.smtp_host, smtp_port, smtp_security and smtp_auth"
                ),
            ),
        },
        Err(e) => check(Status::Fail, smtp_key, format!("{e:#}")),
    };
    vec![imap_check, smtp_check]
}

/// Poll mode: logs in and lists the rooms. Bot mode: the server must answer; the bot itself can
/// only be checked from Talk (`occ talk:bot:list`).
async fn talk_check(name: &str, talk: &crate::config::TalkSettings) -> Check {
    use ctxgate_talk::TalkError;
    let key = format!("talk {name}");
    if talk.mode == crate::config::TalkMode::Bot {
        return check(
            Status::Ok,
            key,
            format!(
                "bot mode: Talk must POST to /talk/{name}/bot (occ talk:bot:install ... <this gateway's URL>/talk/{name}/bot)"
            ),
        );
    }
    let Some(password) = &talk.password else {
        return check(
            Status::Fail,
            key,
            "no app password: set password or password_file",
        );
    };
    let client = match ctxgate_talk::TalkClient::new(
        &talk.base_url,
        &talk.user,
        password.expose(),
        std::time::Duration::from_secs(15),
    ) {
        Ok(c) => c,
        Err(e) => return check(Status::Fail, key, e.to_string()),
    };
    match client.rooms(None).await {
        Ok((rooms, _)) => {
            let watched = rooms
                .iter()
                .filter(|r| talk.rooms.is_empty() || talk.rooms.contains(&r.token))
                .count();
            check(
                Status::Ok,
                key,
                format!(
                    "logged in to {} as {}; {} rooms, {watched} watched",
                    talk.base_url,
                    talk.user,
                    rooms.len()
                ),
            )
        }
        Err(TalkError::Unauthorized) => check(
            Status::Fail,
            key,
            format!(
                "{} refused the login of {:?}: create an app password (Settings → Security) and set talk.{name}.password",
                talk.base_url, talk.user
            ),
        ),
        Err(TalkError::Status { status: 404, .. }) => check(
            Status::Fail,
            key,
            format!(
                "{} has no Talk API: is the Talk app (spreed) enabled?",
                talk.base_url
            ),
        ),
        Err(e) => check(
            Status::Fail,
            key,
            format!(
                "cannot reach {}: {e}; check talk.{name}.base_url and the network",
                talk.base_url
            ),
        ),
    }
}

pub async fn run(settings: &Settings, origin: &str) -> Vec<Check> {
    let mut out = vec![check(Status::Ok, "config", format!("{origin} is valid"))];
    out.push(store(settings).await);
    out.push(match &settings.admin.token {
        Some(_) => check(Status::Ok, "admin api", "on (bearer token configured)"),
        None => check(
            Status::Warn,
            "admin api",
            "off: set admin.token (or CTXGATE__ADMIN__TOKEN) to see tasks and conversations",
        ),
    });
    for (name, hook) in settings.webhooks.iter().filter(|(_, w)| w.enabled) {
        let key = format!("webhook {name}");
        out.push(match (&hook.secret, &hook.secret_file) {
            (Some(_), _) => check(
                Status::Ok,
                key,
                format!("POST /webhooks/{name}, secret set"),
            ),
            (None, Some(path)) => check(
                Status::Ok,
                key,
                format!(
                    "POST /webhooks/{name}; a secret will be generated into {}",
                    path.display()
                ),
            ),
            (None, None) => check(Status::Fail, key, "no secret: set secret or secret_file"),
        });
    }
    for (name, talk) in settings.talk.iter().filter(|(_, t)| t.enabled) {
        out.push(talk_check(name, talk).await);
    }
    for (name, mail) in settings.email.iter().filter(|(_, e)| e.enabled) {
        out.extend(email_checks(name, mail).await);
    }
    let brains = match crate::brain::build_all(settings) {
        Ok(b) => b,
        Err(e) => {
            out.push(check(
                Status::Fail,
                "brains",
                format!("cannot set up: {e:#}"),
            ));
            return out;
        }
    };
    for (name, b) in &settings.brains {
        let key = format!("brain {name}");
        out.push(match b.kind {
            BrainKind::Echo => check(
                Status::Warn,
                key,
                "the built-in echo brain: answers quote the message; configure a model",
            ),
            BrainKind::Cli => cli(key, &b.command[0]),
            BrainKind::Openai | BrainKind::Anthropic => {
                let fast = brains.get(name).and_then(|b| b.fast());
                match fast {
                    Some(f) => match f.complete("Reply with the single word OK.").await {
                        Ok((text, _)) => check(
                            Status::Ok,
                            key,
                            format!(
                                "answered {:?}",
                                text.trim().chars().take(40).collect::<String>()
                            ),
                        ),
                        Err(e) => check(Status::Fail, key, diagnose(&e, b.base_url.as_deref())),
                    },
                    None => check(Status::Fail, key, "has no completer"),
                }
            }
        });
    }
    out
}

async fn store(settings: &Settings) -> Check {
    let url = display_url(&settings.store.url);
    match OpenedStore::open(&settings.store).await {
        Err(e) => check(
            Status::Fail,
            "store",
            format!(
                "cannot open {}: {e}; check store.url and that its folder is writable",
                url
            ),
        ),
        Ok(s) => {
            let pending = s.pending_migrations().await;
            s.close().await;
            match pending {
                Ok(0) => check(Status::Ok, "store", format!("{} is up to date", url)),
                Ok(n) => check(
                    Status::Ok,
                    "store",
                    format!(
                        "{}: {n} migration(s) will be applied at start-up (or run ctxgate migrate)",
                        url
                    ),
                ),
                Err(e) => check(Status::Fail, "store", format!("{}: {e}", url)),
            }
        }
    }
}

fn cli(key: String, program: &str) -> Check {
    let found = if program.contains('/') {
        Path::new(program).is_file().then(|| program.to_owned())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join(program))
                .find(|p| p.is_file())
                .map(|p| p.display().to_string())
        })
    };
    match found {
        Some(path) => check(Status::Ok, key, format!("command found at {path}")),
        None => check(
            Status::Fail,
            key,
            format!("command {program:?} not found; check brains.*.command and PATH"),
        ),
    }
}

/// What a failed tiny call means, and what to do about it.
fn diagnose(e: &BrainError, base: Option<&str>) -> String {
    let base = base.unwrap_or("the default URL");
    let text = e.to_string();
    let hint = if text.contains("401") || text.contains("403") {
        "the provider refused the credentials: check api_key / api_key_file / api_key_env"
    } else if text.contains("404") {
        "not found: check base_url (OpenAI-compatible servers usually end in /v1) and model"
    } else if matches!(e, BrainError::Timeout(_)) {
        "no answer in time: is the server reachable and not overloaded? (timeout)"
    } else if text.contains("request failed") {
        "cannot connect: is the server running at base_url?"
    } else if text.contains("429") {
        "rate limited: the key works, but the provider is throttling"
    } else {
        "see the provider's answer"
    };
    format!(
        "{hint} ({base}): {}",
        text.chars().take(200).collect::<String>()
    )
}
