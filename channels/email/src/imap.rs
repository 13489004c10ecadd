//! IMAP fetching, I/O only: connect (TLS, STARTTLS or plain), log in, SELECT a mailbox, and
//! fetch the messages after a UID oldest-first in bounded batches.
//!
//! The loop that owns an [`ImapSession`] keeps the cursor `(UIDVALIDITY, last UID)`, the ledger,
//! retries with backoff ([`ImapError::is_retryable`]) and IDLE; see EMAIL.md.

use std::fmt::Debug;
use std::time::Duration;

use async_imap::{Client, Session};
use futures_util::TryStreamExt;
use secrecy::{ExposeSecret, SecretString};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;

use crate::security::{Security, tls_connector};

/// Where and how to read one mailbox.
#[derive(Debug, Clone)]
pub struct ImapConfig {
    pub host: String,
    pub port: u16,
    pub security: Security,
    pub username: String,
    pub password: SecretString,
    /// The mailbox to read, e.g. `INBOX`.
    pub mailbox: String,
    /// Most messages one [`ImapSession::fetch_after`] call returns.
    pub batch_size: usize,
    /// Limit for connecting and for each command.
    pub timeout: Duration,
}

/// What went wrong, phrased as what the caller should do.
#[derive(Debug, thiserror::Error)]
pub enum ImapError {
    /// Network trouble (refused, reset, DNS): retry with backoff.
    #[error("cannot reach {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    /// The TLS setup or handshake failed: retry, but a persistent failure is a configuration
    /// problem (wrong port or host name).
    #[error("TLS with {host} failed: {detail}")]
    Tls { host: String, detail: String },
    /// The server refused the credentials: give up until the configuration changes.
    #[error("login refused for {user}: {detail}")]
    Auth { user: String, detail: String },
    /// The mailbox cannot be selected (missing, no permission): give up.
    #[error("cannot select mailbox {mailbox}: {detail}")]
    Mailbox { mailbox: String, detail: String },
    /// The server did not answer in time: retry.
    #[error("IMAP {operation} timed out after {after:?}")]
    Timeout {
        operation: &'static str,
        after: Duration,
    },
    /// Anything else on the wire (lost connection, BAD/NO, unparsable response): retry.
    #[error("IMAP {operation} failed: {source}")]
    Protocol {
        operation: &'static str,
        source: async_imap::error::Error,
    },
}

impl ImapError {
    /// Whether a later attempt (new connection, with backoff) can succeed.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, ImapError::Auth { .. } | ImapError::Mailbox { .. })
    }
}

/// The selected mailbox: UIDVALIDITY is half of the cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MailboxState {
    pub uid_validity: u32,
    pub uid_next: Option<u32>,
    pub exists: u32,
}

/// One fetched message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedMessage {
    pub uid: u32,
    /// The complete RFC 5322 message (`BODY.PEEK[]`: fetching does not mark it seen).
    pub raw: Vec<u8>,
}

trait ImapIo: AsyncRead + AsyncWrite + Unpin + Send + Debug {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Debug> ImapIo for T {}
type Stream = Box<dyn ImapIo>;

/// A logged-in IMAP connection working on one mailbox.
#[derive(Debug)]
pub struct ImapSession {
    session: Session<Stream>,
    mailbox: String,
    batch_size: usize,
    timeout: Duration,
}

impl ImapSession {
    /// Connects, secures the connection as configured and logs in.
    #[tracing::instrument(skip_all, fields(host = %config.host, port = config.port, user = %config.username))]
    pub async fn connect(config: &ImapConfig) -> Result<Self, ImapError> {
        let mut client = within(config.timeout, "connect", open(config)).await??;
        let greeting = within(config.timeout, "greeting", client.read_response())
            .await?
            .map_err(|source| protocol("greeting", source.into()))?;
        if greeting.is_none() {
            return Err(protocol(
                "greeting",
                async_imap::error::Error::ConnectionLost,
            ));
        }
        if config.security == Security::StartTls {
            within(
                config.timeout,
                "STARTTLS",
                client.run_command_and_check_ok("STARTTLS", None),
            )
            .await?
            .map_err(|source| protocol("STARTTLS", source))?;
            let plain = client.into_inner();
            let tls = within(
                config.timeout,
                "TLS handshake",
                handshake(&config.host, plain),
            )
            .await??;
            client = Client::new(tls);
        }
        let login = client.login(&config.username, config.password.expose_secret());
        let session = match within(config.timeout, "login", login).await? {
            Ok(session) => session,
            Err((async_imap::error::Error::No(detail), _)) => {
                return Err(ImapError::Auth {
                    user: config.username.clone(),
                    detail,
                });
            }
            Err((source, _)) => return Err(protocol("login", source)),
        };
        tracing::debug!("logged in");
        Ok(Self {
            session,
            mailbox: config.mailbox.clone(),
            batch_size: config.batch_size.max(1),
            timeout: config.timeout,
        })
    }

    /// SELECTs the configured mailbox and reports its UIDVALIDITY.
    #[tracing::instrument(skip_all, fields(mailbox = %self.mailbox))]
    pub async fn select(&mut self) -> Result<MailboxState, ImapError> {
        let selected = within(self.timeout, "SELECT", self.session.select(&self.mailbox)).await?;
        let mailbox = match selected {
            Ok(mailbox) => mailbox,
            Err(async_imap::error::Error::No(detail)) => {
                return Err(ImapError::Mailbox {
                    mailbox: self.mailbox.clone(),
                    detail,
                });
            }
            Err(source) => return Err(protocol("SELECT", source)),
        };
        let uid_validity = mailbox.uid_validity.ok_or_else(|| ImapError::Mailbox {
            mailbox: self.mailbox.clone(),
            detail: "the server sent no UIDVALIDITY".to_owned(),
        })?;
        Ok(MailboxState {
            uid_validity,
            uid_next: mailbox.uid_next,
            exists: mailbox.exists,
        })
    }

    /// The next batch (at most `batch_size`) of messages with a UID above `last_uid`, oldest
    /// first. Empty when nothing is new.
    ///
    /// `UID n:*` always matches the highest message, even when its UID is below `n`; such
    /// answers are dropped here, so the caller never sees a message twice.
    #[tracing::instrument(skip_all, fields(mailbox = %self.mailbox, last_uid))]
    pub async fn fetch_after(&mut self, last_uid: u32) -> Result<Vec<FetchedMessage>, ImapError> {
        let query = format!("UID {}:*", last_uid.saturating_add(1));
        let found = within(self.timeout, "UID SEARCH", self.session.uid_search(&query))
            .await?
            .map_err(|source| protocol("UID SEARCH", source))?;
        let mut uids: Vec<u32> = found.into_iter().filter(|&uid| uid > last_uid).collect();
        uids.sort_unstable();
        uids.truncate(self.batch_size);
        if uids.is_empty() {
            return Ok(Vec::new());
        }
        let set = uids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let timeout = self.timeout;
        let fetches = within(timeout, "UID FETCH", async {
            let stream = self.session.uid_fetch(&set, "(UID BODY.PEEK[])").await?;
            stream.try_collect::<Vec<_>>().await
        })
        .await?
        .map_err(|source| protocol("UID FETCH", source))?;
        let mut messages: Vec<FetchedMessage> = fetches
            .iter()
            .filter_map(|fetch| {
                let uid = fetch.uid.filter(|uid| uids.binary_search(uid).is_ok())?;
                Some(FetchedMessage {
                    uid,
                    raw: fetch.body()?.to_vec(),
                })
            })
            .collect();
        messages.sort_unstable_by_key(|m| m.uid);
        messages.dedup_by_key(|m| m.uid);
        tracing::debug!(fetched = messages.len(), "batch fetched");
        Ok(messages)
    }

    /// Whether the server offers IDLE (RFC 2177).
    pub async fn supports_idle(&mut self) -> Result<bool, ImapError> {
        let caps = within(self.timeout, "CAPABILITY", self.session.capabilities())
            .await?
            .map_err(|source| protocol("CAPABILITY", source))?;
        Ok(caps.has_str("IDLE"))
    }

    /// Waits in IDLE until the server reports a change or `wait` passes (callers re-issue it
    /// well before the 29 minutes RFC 2177 allows). Returns the session for further commands.
    pub async fn idle(self, wait: Duration) -> Result<Self, ImapError> {
        let ImapSession {
            session,
            mailbox,
            batch_size,
            timeout,
        } = self;
        let mut handle = session.idle();
        within(timeout, "IDLE", handle.init())
            .await?
            .map_err(|source| protocol("IDLE", source))?;
        let (done, _stop) = handle.wait_with_timeout(wait);
        let outcome = within(wait + timeout, "IDLE", done).await?;
        outcome.map_err(|source| protocol("IDLE", source))?;
        let session = within(timeout, "DONE", handle.done())
            .await?
            .map_err(|source| protocol("DONE", source))?;
        Ok(ImapSession {
            session,
            mailbox,
            batch_size,
            timeout,
        })
    }

    /// Marks one message `\Seen`.
    pub async fn mark_seen(&mut self, uid: u32) -> Result<(), ImapError> {
        let timeout = self.timeout;
        within(timeout, "UID STORE", async {
            let stream = self
                .session
                .uid_store(uid.to_string(), "+FLAGS.SILENT (\\Seen)")
                .await?;
            stream.try_collect::<Vec<_>>().await
        })
        .await?
        .map_err(|source| protocol("UID STORE", source))?;
        Ok(())
    }

    /// Moves one message to `folder` (which must exist).
    pub async fn move_to(&mut self, uid: u32, folder: &str) -> Result<(), ImapError> {
        within(
            self.timeout,
            "UID MOVE",
            self.session.uid_mv(uid.to_string(), folder),
        )
        .await?
        .map_err(|source| protocol("UID MOVE", source))
    }

    /// Says goodbye; errors are irrelevant at this point and only logged.
    pub async fn logout(mut self) {
        if let Err(error) = within(self.timeout, "LOGOUT", self.session.logout()).await {
            tracing::debug!(%error, "logout failed");
        }
    }

    /// The underlying async-imap session, for commands this adapter does not wrap
    /// (APPEND, STORE, MOVE, IDLE).
    pub fn raw(&mut self) -> &mut Session<impl AsyncRead + AsyncWrite + Unpin + Send + Debug> {
        &mut self.session
    }
}

/// TCP connection, wrapped in TLS from the start when configured.
async fn open(config: &ImapConfig) -> Result<Client<Stream>, ImapError> {
    let addr = format!("{}:{}", config.host, config.port);
    let tcp = TcpStream::connect(&addr)
        .await
        .map_err(|source| ImapError::Connect {
            addr: addr.clone(),
            source,
        })?;
    let stream: Stream = match config.security {
        Security::Tls => handshake(&config.host, Box::new(tcp)).await?,
        Security::StartTls | Security::Plain => Box::new(tcp),
    };
    Ok(Client::new(stream))
}

async fn handshake(host: &str, stream: Stream) -> Result<Stream, ImapError> {
    let tls_error = |detail: String| ImapError::Tls {
        host: host.to_owned(),
        detail,
    };
    let connector = tls_connector().map_err(|e| tls_error(e.to_string()))?;
    let name = ServerName::try_from(host.to_owned()).map_err(|e| tls_error(e.to_string()))?;
    let tls = connector
        .connect(name, stream)
        .await
        .map_err(|e| tls_error(e.to_string()))?;
    Ok(Box::new(tls))
}

async fn within<F: Future>(
    after: Duration,
    operation: &'static str,
    future: F,
) -> Result<F::Output, ImapError> {
    tokio::time::timeout(after, future)
        .await
        .map_err(|_| ImapError::Timeout { operation, after })
}

fn protocol(operation: &'static str, source: async_imap::error::Error) -> ImapError {
    ImapError::Protocol { operation, source }
}
