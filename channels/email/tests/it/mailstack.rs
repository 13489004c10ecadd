//! Against the real Dovecot + OpenSMTPD that `bash tests/services.sh` starts (EMAIL.md): these
//! tests fail loudly, with that command, when the servers are not up.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use ctxgate_email::guards::check;
use ctxgate_email::imap::{ImapConfig, ImapError, ImapSession};
use ctxgate_email::smtp::OutgoingMail;
use ctxgate_email::smtp::{SmtpConfig, SmtpSender};
use ctxgate_email::{MessageId, NormalizedMail, Security, SkipReason, normalize};
use secrecy::SecretString;

use crate::outgoing::bot;
use crate::support::mail;

const HOST: &str = "127.0.0.1";
const IMAP_PORT: u16 = 14143;
const SMTP_PORT: u16 = 14025;
const PASSWORD: &str = "secret";

/// Panics with the command to run unless both servers accept connections.
fn require_stack() {
    for (what, port) in [("Dovecot IMAP", IMAP_PORT), ("OpenSMTPD", SMTP_PORT)] {
        let addr = format!("{HOST}:{port}").parse().expect("socket address");
        if TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err() {
            panic!(
                "{what} does not answer on {HOST}:{port}: the test mail stack is not running. \
                 Start it with `bash tests/services.sh` (as root) and rerun the tests."
            );
        }
    }
}

fn imap(user: &str, mailbox: &str, batch_size: usize) -> ImapConfig {
    ImapConfig {
        host: HOST.into(),
        port: IMAP_PORT,
        security: Security::Plain,
        username: user.into(),
        password: SecretString::from(PASSWORD),
        mailbox: mailbox.into(),
        batch_size,
        timeout: Duration::from_secs(10),
    }
}

fn smtp() -> SmtpConfig {
    SmtpConfig {
        host: HOST.into(),
        port: SMTP_PORT,
        security: Security::Plain,
        credentials: None,
        hello_name: "gw.example.org".into(),
        timeout: Duration::from_secs(10),
    }
}

/// A mailbox name no other run uses.
fn unique(prefix: &str) -> String {
    let id = MessageId::generate("x");
    format!(
        "{prefix}-{}",
        id.as_str()
            .split('@')
            .next()
            .unwrap_or_default()
            .replace('.', "-")
    )
}

async fn session(config: &ImapConfig) -> ImapSession {
    ImapSession::connect(config)
        .await
        .unwrap_or_else(|e| panic!("IMAP login failed: {e}"))
}

/// Every message after `last_uid`, batch by batch (each batch oldest first).
async fn drain(session: &mut ImapSession, mut last_uid: u32) -> Vec<(u32, NormalizedMail)> {
    let mut all = Vec::new();
    loop {
        let batch = session.fetch_after(last_uid).await.expect("fetch");
        let Some(last) = batch.last() else { return all };
        last_uid = last.uid;
        for message in batch {
            all.push((
                message.uid,
                normalize(&message.raw).expect("fetched mail parses"),
            ));
        }
    }
}

#[tokio::test]
async fn a_threaded_reply_sent_over_smtp_arrives_over_imap() {
    require_stack();
    let parent = mail("plain"); // Alice asked the bot.
    let mut inbox = session(&imap("alice@example.org", "INBOX", 20)).await;
    let state = inbox.select().await.expect("select INBOX");
    let baseline = state.uid_next.unwrap_or(1).saturating_sub(1);

    let reply =
        OutgoingMail::reply(&parent, bot(), "Summary: ship onboarding, cut costs.").expect("reply");
    SmtpSender::new(&smtp())
        .expect("sender")
        .send(&reply)
        .await
        .expect("SMTP accepts");

    // OpenSMTPD queues, then delivers over LMTP: poll until it is there (bounded).
    let deadline = Instant::now() + Duration::from_secs(30);
    let received = loop {
        let fetched = drain(&mut inbox, baseline).await;
        if let Some((_, mail)) = fetched
            .into_iter()
            .find(|(_, m)| m.message_id.as_ref() == Some(&reply.message_id))
        {
            break mail;
        }
        assert!(
            Instant::now() < deadline,
            "the reply did not arrive within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    inbox.logout().await;

    assert_eq!(
        received.in_reply_to,
        [parent.message_id.clone().expect("parent id")]
    );
    assert_eq!(received.references, reply.references);
    assert_eq!(
        received.subject.as_deref(),
        Some("Re: Can you summarise the Q2 plan?")
    );
    assert_eq!(
        received.from.as_ref().map(|m| m.address.as_str()),
        Some("bot@example.org")
    );
    assert_eq!(received.to[0].address.as_str(), "alice@example.org");
    assert_eq!(
        received.loop_headers.auto_submitted.as_deref(),
        Some("auto-replied")
    );
    assert_eq!(received.body.text, "Summary: ship onboarding, cut costs.");
    assert_eq!(
        check(&received, &[bot().address]),
        Some(SkipReason::OwnAddress)
    );
}

#[tokio::test]
async fn fetching_is_oldest_first_in_bounded_batches_without_duplicates() {
    require_stack();
    let folder = unique("ctxgate-batch");
    let mut setup = session(&imap("bob", "INBOX", 1)).await;
    setup.raw().create(&folder).await.expect("CREATE");
    for i in 0..7 {
        let raw = format!(
            "From: carol@example.org\r\nTo: bob@example.org\r\nSubject: n{i}\r\n\
             Message-ID: <n{i}.{folder}@example.org>\r\n\r\nmessage {i}\r\n"
        );
        setup
            .raw()
            .append(&folder, None, None, raw.as_bytes())
            .await
            .expect("APPEND");
    }

    let mut reader = session(&imap("bob", &folder, 3)).await;
    let state = reader.select().await.expect("select");
    assert_eq!(state.exists, 7);
    let mut last_uid = 0;
    let mut sizes = Vec::new();
    let mut subjects = Vec::new();
    loop {
        let batch = reader.fetch_after(last_uid).await.expect("fetch");
        if batch.is_empty() {
            break;
        }
        sizes.push(batch.len());
        for message in &batch {
            assert!(message.uid > last_uid, "UIDs strictly increase");
            last_uid = message.uid;
            subjects.push(
                normalize(&message.raw)
                    .expect("parses")
                    .subject
                    .unwrap_or_default(),
            );
        }
    }
    assert_eq!(sizes, [3, 3, 1]);
    assert_eq!(subjects, ["n0", "n1", "n2", "n3", "n4", "n5", "n6"]);
    // `UID n:*` with n above the highest UID still names the highest message: nothing new.
    assert!(
        reader
            .fetch_after(last_uid)
            .await
            .expect("fetch")
            .is_empty()
    );
    assert!(
        reader
            .fetch_after(last_uid + 100)
            .await
            .expect("fetch")
            .is_empty()
    );
    // UIDVALIDITY is stable for the same mailbox.
    let again = reader.select().await.expect("select again");
    assert_eq!(again.uid_validity, state.uid_validity);
    reader.logout().await;

    setup.raw().delete(&folder).await.expect("DELETE");
    setup.logout().await;
}

#[tokio::test]
async fn a_recreated_mailbox_has_a_new_uidvalidity() {
    require_stack();
    let folder = unique("ctxgate-uidv");
    let mut admin = session(&imap("bob", "INBOX", 1)).await;
    admin.raw().create(&folder).await.expect("CREATE");
    let first = session(&imap("bob", &folder, 10))
        .await
        .select()
        .await
        .expect("select")
        .uid_validity;
    admin.raw().delete(&folder).await.expect("DELETE");
    admin.raw().create(&folder).await.expect("CREATE again");
    let second = session(&imap("bob", &folder, 10))
        .await
        .select()
        .await
        .expect("select")
        .uid_validity;
    assert_ne!(
        first, second,
        "the cursor must notice the change and resync"
    );
    admin.raw().delete(&folder).await.expect("DELETE");
    admin.logout().await;
}

#[tokio::test]
async fn wrong_password_is_not_retryable() {
    require_stack();
    let mut config = imap("alice", "INBOX", 1);
    config.password = SecretString::from("wrong");
    match ImapSession::connect(&config).await {
        Err(e @ ImapError::Auth { .. }) => assert!(!e.is_retryable(), "{e}"),
        other => panic!("expected an auth error, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_missing_mailbox_is_not_retryable() {
    require_stack();
    let mut missing = session(&imap("alice", "No/Such/Folder", 1)).await;
    match missing.select().await {
        Err(e @ ImapError::Mailbox { .. }) => assert!(!e.is_retryable(), "{e}"),
        other => panic!("expected a mailbox error, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_server_is_retryable() {
    let mut config = imap("alice", "INBOX", 1);
    config.port = 1; // Nothing listens there.
    match ImapSession::connect(&config).await {
        Err(e @ ImapError::Connect { .. }) => assert!(e.is_retryable(), "{e}"),
        other => panic!("expected a connection error, got {:?}", other.map(|_| ())),
    }
}
