//! The e-mail channel end to end against the real Dovecot + OpenSMTPD that
//! `bash tests/services.sh` starts: mail in the assistant's mailbox → the real App's tracker,
//! worker, context engine and outbox → a threaded SMTP reply read back over IMAP.
//!
//! Each test reads its own new folder of the `bot` user (mail is put there with IMAP APPEND),
//! so runs never see each other's mail; answers go to alice's INBOX and are found by their
//! In-Reply-To.

use std::net::TcpStream;
use std::time::Duration;

use ctxgate::config::{EmailSettings, MailSecurity, Secret};
use ctxgate::outbox::Outbox;
use ctxgate::worker::Worker;
use ctxgate_email::imap::{ImapConfig, ImapSession};
use ctxgate_email::{MessageId, NormalizedMail, Security, normalize};
use secrecy::SecretString;

use crate::helpers::{TestApp, spawn_app_with};

const HOST: &str = "127.0.0.1";
const IMAP_PORT: u16 = 14143;
const SMTP_PORT: u16 = 14025;
const PASSWORD: &str = "secret";
const WAIT: Duration = Duration::from_secs(30);

fn require_stack() {
    for (what, port) in [("Dovecot IMAP", IMAP_PORT), ("OpenSMTPD", SMTP_PORT)] {
        let addr = format!("{HOST}:{port}").parse().unwrap();
        if TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err() {
            panic!(
                "{what} does not answer on {HOST}:{port}: the test mail stack is not running. \
                 Start it with `bash tests/services.sh` (as root) and rerun the tests."
            );
        }
    }
}

fn imap(user: &str, mailbox: &str) -> ImapConfig {
    ImapConfig {
        host: HOST.into(),
        port: IMAP_PORT,
        security: Security::Plain,
        username: user.into(),
        password: SecretString::from(PASSWORD),
        mailbox: mailbox.into(),
        batch_size: 50,
        timeout: Duration::from_secs(10),
    }
}

fn unique(prefix: &str) -> String {
    let id = MessageId::generate("x");
    format!(
        "{prefix}-{}",
        id.as_str().split('@').next().unwrap().replace('.', "-")
    )
}

struct Mail {
    app: TestApp,
    folder: String,
    admin: ImapSession,
}

async fn mail_app(tweak: impl FnOnce(&mut EmailSettings)) -> Mail {
    mail_app_with(tweak, |_| {}).await
}

async fn mail_app_with(
    tweak: impl FnOnce(&mut EmailSettings),
    tweak_settings: impl FnOnce(&mut ctxgate::config::Settings),
) -> Mail {
    require_stack();
    let folder = unique("ctxgate-e2e");
    let mut admin = ImapSession::connect(&imap("bot", "INBOX")).await.unwrap();
    admin.raw().create(&folder).await.expect("CREATE");
    let mut settings = EmailSettings {
        address: "bot@example.org".into(),
        display_name: "Assistant".into(),
        imap_host: HOST.into(),
        imap_port: IMAP_PORT,
        imap_security: MailSecurity::Plain,
        username: "bot".into(),
        password: Some(Secret::new(PASSWORD)),
        mailbox: folder.clone(),
        smtp_host: HOST.into(),
        smtp_port: SMTP_PORT,
        smtp_security: MailSecurity::Plain,
        smtp_auth: false,
        poll_interval: Duration::from_secs(2),
        max_backoff: Duration::from_millis(200),
        timeout: Duration::from_secs(10),
        ..EmailSettings::default()
    };
    tweak(&mut settings);
    let app = spawn_app_with(|s| {
        s.email.insert("main".into(), settings);
        tweak_settings(s);
    })
    .await;
    Mail { app, folder, admin }
}

impl Mail {
    fn start(&self) {
        let trackers = self.app.deps.email_trackers.get().unwrap();
        tokio::spawn(trackers["main"].current().run());
        tokio::spawn(Worker::new(self.app.deps.clone(), "mail-worker").run());
        tokio::spawn(Outbox::new(self.app.deps.clone(), "mail-outbox").run());
    }

    async fn deliver(&mut self, raw: &str) {
        let raw = raw.replace('\n', "\r\n");
        // Dovecot may answer one SERVERBUG while it rebuilds the index of a mailbox that was
        // deleted and created again under another session's feet; it recovers on its own.
        for attempt in 0..3 {
            match self
                .admin
                .raw()
                .append(&self.folder, None, None, raw.as_bytes())
                .await
            {
                Ok(()) => return,
                Err(e) if attempt < 2 => {
                    eprintln!("APPEND failed ({e}); once more with a new session");
                    self.admin = ImapSession::connect(&imap("bot", "INBOX")).await.unwrap();
                }
                Err(e) => panic!("APPEND: {e}"),
            }
        }
    }

    /// Waits until the tracker has read up to `n` messages of the folder.
    async fn taken(&self, n: u64) {
        let tracker = self.app.deps.email_trackers.get().unwrap()["main"].current();
        let deadline = tokio::time::Instant::now() + WAIT;
        while tracker.status().messages_taken < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the tracker read only {:?}",
                tracker.status()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Mail {
    fn drop(&mut self) {
        self.app.deps.shutdown.cancel();
    }
}

/// The answer to `parent` in alice's INBOX (OpenSMTPD queues, then delivers over LMTP).
async fn answer_to(parent: &str) -> NormalizedMail {
    find_in_alice(|mail| mail.in_reply_to.iter().any(|id| id.as_str() == parent)).await
}

async fn find_in_alice(found: impl Fn(&NormalizedMail) -> bool) -> NormalizedMail {
    let mut inbox = ImapSession::connect(&imap("alice", "INBOX")).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        inbox.select().await.unwrap();
        let mut last = 0;
        loop {
            let batch = inbox.fetch_after(last).await.unwrap();
            if batch.is_empty() {
                break;
            }
            for m in batch {
                last = m.uid;
                let mail = normalize(&m.raw).unwrap();
                if found(&mail) {
                    inbox.logout().await;
                    return mail;
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the expected mail did not arrive"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_mail_gets_a_threaded_reply_and_the_reply_to_it_has_the_exchange_as_context() {
    let mut m = mail_app(|_| {}).await;
    m.start();
    let first = format!("q1.{}@example.org", m.folder);
    m.deliver(&format!(
        "From: Alice <alice@example.org>\nTo: bot@example.org\nSubject: Lunch plans\n\
         Message-ID: <{first}>\nDate: Sun, 22 Nov 2026 08:00:00 +0000\n\n\
         Where should the team eat on Friday? The budget is 200 euros.\n\n\
         -- \nAlice, sent from her phone\n"
    ))
    .await;
    let answer = answer_to(&first).await;
    assert_eq!(answer.subject.as_deref(), Some("Re: Lunch plans"));
    assert_eq!(
        answer
            .references
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>(),
        [first.as_str()]
    );
    assert_eq!(
        answer.loop_headers.auto_submitted.as_deref(),
        Some("auto-replied")
    );
    assert_eq!(
        answer.from.as_ref().unwrap().address.as_str(),
        "bot@example.org"
    );
    assert_eq!(answer.to[0].address.as_str(), "alice@example.org");
    assert!(
        answer.body.text.starts_with("re: Subject: Lunch plans"),
        "{}",
        answer.body.text
    );
    assert!(
        !answer.body.text.contains("sent from her phone"),
        "signature stripped"
    );

    // Alice answers the answer, quoting it: same conversation, the exchange is context.
    let answer_id = answer.message_id.clone().unwrap().as_str().to_owned();
    let second = format!("q2.{}@example.org", m.folder);
    m.deliver(&format!(
        "From: Alice <alice@example.org>\nTo: bot@example.org\nSubject: Re: Lunch plans\n\
         Message-ID: <{second}>\nIn-Reply-To: <{answer_id}>\nReferences: <{first}> <{answer_id}>\n\
         Date: Sun, 22 Nov 2026 08:05:00 +0000\n\n\
         And if it rains?\n\nOn Sun, Nov 22, 2026, Assistant wrote:\n> re: earlier text\n"
    ))
    .await;
    let again = answer_to(&second).await;
    assert_eq!(
        again.subject.as_deref(),
        Some("Re: Lunch plans"),
        "a single Re:"
    );
    assert_eq!(
        again
            .references
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>(),
        [first.as_str(), answer_id.as_str(), second.as_str()]
    );
    let requests = m.app.brain.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].conversation_id, requests[1].conversation_id);
    assert_eq!(
        requests[1].message.text, "And if it rains?",
        "quote stripped"
    );
    let context: Vec<&str> = requests[1]
        .context
        .iter()
        .map(|t| t.text.as_str())
        .collect();
    assert!(
        context.iter().any(|t| t.contains("200 euros")),
        "{context:?}"
    );
    assert!(
        context
            .iter()
            .any(|t| t.starts_with("re: Subject: Lunch plans")),
        "{context:?}"
    );
}

#[tokio::test]
async fn robots_lists_bounces_and_the_gateway_itself_get_no_answer() {
    let mut m = mail_app(|_| {}).await;
    m.start();
    let f = m.folder.clone();
    let robots = [
        (
            "auto_submitted",
            format!(
                "From: alice@example.org\nTo: bot@example.org\nSubject: Out of office\nAuto-Submitted: auto-replied\nMessage-ID: <ooo.{f}@example.org>\n\nI am away.\n"
            ),
        ),
        (
            "mailing_list",
            format!(
                "From: alice@example.org\nTo: team@example.org\nSubject: [team] news\nList-Id: <team.example.org>\nMessage-ID: <list.{f}@example.org>\n\nNews.\n"
            ),
        ),
        (
            "robot_sender",
            format!(
                "From: MAILER-DAEMON@example.org\nTo: bot@example.org\nSubject: Undelivered Mail\nMessage-ID: <bounce.{f}@example.org>\n\nBounced.\n"
            ),
        ),
        (
            "own_address",
            format!(
                "From: Assistant <bot@example.org>\nTo: bot@example.org\nSubject: loop\nMessage-ID: <self.{f}@example.org>\n\nMyself.\n"
            ),
        ),
        (
            "bulk_precedence",
            format!(
                "From: alice@example.org\nTo: bot@example.org\nSubject: digest\nPrecedence: bulk\nMessage-ID: <bulk.{f}@example.org>\n\nDigest.\n"
            ),
        ),
    ];
    for (_, raw) in &robots {
        m.deliver(raw).await;
    }
    m.taken(robots.len() as u64).await;
    assert!(m.app.brain.requests().is_empty(), "no robot is answered");
    let store = &m.app.deps.store;
    for (reason, raw) in &robots {
        let id = raw
            .split("Message-ID: <")
            .nth(1)
            .unwrap()
            .split('>')
            .next()
            .unwrap();
        let conv = store
            .conversation_of_message("email:main", id)
            .await
            .unwrap()
            .expect("recorded");
        let conv = store
            .find_conversation("email:main", &conv)
            .await
            .unwrap()
            .unwrap();
        let message = store.find_message(conv.id, id).await.unwrap().unwrap();
        assert_eq!(message.meta["skipped"], *reason, "{id}");
    }
    let tasks = store.list_tasks(&Default::default()).await.unwrap();
    assert!(tasks.is_empty());
    // The operator sees every skipped message with its reason.
    let listed = m.app.admin_json("/admin/skipped?channel=email:main").await;
    let mut reasons: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["reason"].as_str().unwrap())
        .collect();
    reasons.sort();
    let mut expected: Vec<&str> = robots.iter().map(|(r, _)| *r).collect();
    expected.sort();
    assert_eq!(reasons, expected);
    let channels = m.app.admin_json("/admin/channels").await;
    let mailbox = channels["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["channel"] == "email:main")
        .unwrap()
        .clone();
    assert_eq!(mailbox["tracker"]["messages_skipped"], robots.len());
}

#[tokio::test]
async fn a_uidvalidity_change_answers_nothing_twice() {
    let mut m = mail_app(|s| s.after_processing = "none".into()).await;
    m.start();
    let ids: Vec<String> = (0..3)
        .map(|i| format!("r{i}.{}@example.org", m.folder))
        .collect();
    let raws: Vec<String> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            format!(
                "From: alice@example.org\nTo: bot@example.org\nSubject: question {i}\n\
                 Message-ID: <{id}>\n\nQuestion number {i}?\n"
            )
        })
        .collect();
    for raw in &raws {
        m.deliver(raw).await;
    }
    for id in &ids {
        answer_to(id).await;
    }
    assert_eq!(m.app.brain.requests().len(), 3);
    // The server renumbers the folder (recreated with the same mail: a new UIDVALIDITY).
    let tracker = m.app.deps.email_trackers.get().unwrap()["main"].current();
    let before = tracker.status().uid_validity.unwrap();
    let folder = m.folder.clone();
    m.admin.raw().delete(&folder).await.expect("DELETE");
    m.admin.raw().create(&folder).await.expect("CREATE");
    for raw in &raws {
        m.deliver(raw).await;
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = tracker.status();
        if s.uid_validity.is_some_and(|v| v != before) && s.messages_taken >= 6 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never re-read: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A new message after the renumbering is answered; none of the old ones again.
    let new_id = format!("r9.{}@example.org", m.folder);
    m.deliver(&format!(
        "From: alice@example.org\nTo: bot@example.org\nSubject: one more\nMessage-ID: <{new_id}>\n\nLast one?\n"
    ))
    .await;
    answer_to(&new_id).await;
    assert_eq!(
        m.app.brain.requests().len(),
        4,
        "old mail is not answered twice"
    );
    let tasks = m
        .app
        .deps
        .store
        .list_tasks(&Default::default())
        .await
        .unwrap();
    assert_eq!(tasks.len(), 4);
}

#[tokio::test]
async fn a_restart_in_the_middle_of_a_batch_answers_each_message_once() {
    let mut m = mail_app(|s| {
        s.batch_size = 2;
        s.after_processing = "none".into();
    })
    .await;
    tokio::spawn(Worker::new(m.app.deps.clone(), "mail-worker").run());
    tokio::spawn(Outbox::new(m.app.deps.clone(), "mail-outbox").run());
    let ids: Vec<String> = (0..5)
        .map(|i| format!("b{i}.{}@example.org", m.folder))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        m.deliver(&format!(
            "From: alice@example.org\nTo: bot@example.org\nSubject: batch {i}\nMessage-ID: <{id}>\n\nItem {i}?\n"
        ))
        .await;
    }
    let intake: std::sync::Arc<dyn ctxgate_contract::Intake> =
        std::sync::Arc::new(ctxgate::intake::IntakeService::new(m.app.deps.clone()));
    // The first process stops right after its first message is committed: in the middle of a
    // batch of two.
    let first_run = tokio_util::sync::CancellationToken::new();
    let stopping: std::sync::Arc<dyn ctxgate_contract::Intake> =
        std::sync::Arc::new(StopAfterOne {
            inner: intake.clone(),
            stop: first_run.clone(),
        });
    let trackers = ctxgate::email::trackers(&m.app.deps.settings, stopping, &first_run).unwrap();
    let first = trackers["main"].clone();
    first.clone().run().await;
    let taken_before = first.status().messages_taken;
    assert_eq!(taken_before, 1, "stopped after one message");
    // The next process continues from the committed cursor.
    let second_run = tokio_util::sync::CancellationToken::new();
    let trackers = ctxgate::email::trackers(&m.app.deps.settings, intake, &second_run).unwrap();
    let second = trackers["main"].clone();
    tokio::spawn(second.clone().run());
    for id in &ids {
        answer_to(id).await;
    }
    assert_eq!(
        second.status().messages_taken,
        5 - taken_before,
        "no message read twice"
    );
    assert_eq!(m.app.brain.requests().len(), 5);
    let tasks = m
        .app
        .deps
        .store
        .list_tasks(&Default::default())
        .await
        .unwrap();
    assert_eq!(tasks.len(), 5);
    second_run.cancel();
}

/// Intake that stops the tracker's process once one message is committed.
struct StopAfterOne {
    inner: std::sync::Arc<dyn ctxgate_contract::Intake>,
    stop: tokio_util::sync::CancellationToken,
}

#[async_trait::async_trait]
impl ctxgate_contract::Intake for StopAfterOne {
    async fn submit(
        &self,
        event: ctxgate_contract::InboundEvent,
    ) -> Result<ctxgate_contract::IntakeReceipt, ctxgate_contract::IntakeError> {
        let receipt = self.inner.submit(event).await;
        if receipt.is_ok() {
            self.stop.cancel();
        }
        receipt
    }

    async fn cursor(
        &self,
        channel: &str,
        scope: &str,
    ) -> Result<Option<String>, ctxgate_contract::IntakeError> {
        self.inner.cursor(channel, scope).await
    }

    async fn conversation_of(
        &self,
        channel: &str,
        id: &str,
    ) -> Result<Option<String>, ctxgate_contract::IntakeError> {
        self.inner.conversation_of(channel, id).await
    }
}

#[tokio::test]
async fn briefings_are_mailed_as_auto_generated() {
    let subject = unique("Briefing");
    let m = mail_app(|s| s.briefing_subject = subject.clone()).await;
    m.app.brain.then_reply("Three things today.");
    m.start();
    let created: serde_json::Value = m
        .app
        .http
        .post(format!("{}/admin/schedules", m.app.base))
        .bearer_auth(crate::helpers::ADMIN_TOKEN)
        .json(
            &serde_json::json!({"name": "daily", "cron": "0 7 * * *", "prompt": "Brief me.",
            "target": {"kind": "email", "to": "alice@example.org"}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_i64().expect("created");
    let r = m
        .app
        .http
        .post(format!("{}/admin/schedules/{id}/run", m.app.base))
        .bearer_auth(crate::helpers::ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let mail = find_in_alice(|mail| mail.subject.as_deref() == Some(subject.as_str())).await;
    assert_eq!(
        mail.loop_headers.auto_submitted.as_deref(),
        Some("auto-generated")
    );
    assert_eq!(mail.body.text, "Three things today.");
    assert!(mail.in_reply_to.is_empty());
}

/// Plus-addressing: mail to `bot+planner@…` is answered by the agent `planner`, mail to the
/// plain address by the mailbox's default agent; each answer says who wrote it.
#[tokio::test]
async fn plus_addresses_route_mail_to_agents() {
    use ctxgate::config::AgentSettings;
    let m = mail_app_with(
        |_| {},
        |s| {
            s.agents = vec![
                AgentSettings {
                    id: "reviewer".into(),
                    name: Some("Reviewer".into()),
                    ..AgentSettings::implicit()
                },
                AgentSettings {
                    id: "planner".into(),
                    name: Some("Planner".into()),
                    default: false,
                    ..AgentSettings::implicit()
                },
            ];
        },
    )
    .await;
    let mut m = m;
    m.start();
    let to_planner = format!("plus1.{}@example.org", m.folder);
    m.deliver(&format!(
        "From: Alice <alice@example.org>\nTo: Planner <bot+planner@example.org>\n\
         Subject: Next sprint\nMessage-ID: <{to_planner}>\nDate: Sun, 22 Nov 2026 08:00:00 +0000\n\n\
         What should we plan first?\n"
    ))
    .await;
    let plain = format!("plus2.{}@example.org", m.folder);
    m.deliver(&format!(
        "From: Alice <alice@example.org>\nTo: bot@example.org\nSubject: Review\n\
         Message-ID: <{plain}>\nDate: Sun, 22 Nov 2026 08:01:00 +0000\n\nPlease review.\n"
    ))
    .await;
    let planned = answer_to(&to_planner).await;
    assert!(
        planned
            .body
            .text
            .starts_with("Planner: re: Subject: Next sprint"),
        "{}",
        planned.body.text
    );
    let reviewed = answer_to(&plain).await;
    assert!(
        reviewed
            .body
            .text
            .starts_with("Reviewer: re: Subject: Review"),
        "{}",
        reviewed.body.text
    );
    let tasks = m
        .app
        .deps
        .store
        .list_tasks(&ctxgate::store::TaskFilter::default())
        .await
        .unwrap();
    let mut agents: Vec<&str> = tasks.iter().map(|t| t.agent.as_str()).collect();
    agents.sort();
    assert_eq!(agents, ["planner", "reviewer"], "one task each");
}

/// A flood from one sender: past `per_sender_per_hour` its mail is stored but not answered
/// (`rate_limited_sender`), other senders are still answered, and past `per_mailbox_per_hour`
/// nobody is (`rate_limited_mailbox`). Nothing is lost: every message is in the history.
#[tokio::test]
async fn a_flood_from_one_sender_is_held_to_the_hourly_limits() {
    let mut m = mail_app(|e| {
        e.per_sender_per_hour = 5;
        e.per_mailbox_per_hour = 6;
    })
    .await;
    m.start();
    let f = m.folder.clone();
    let mail = |from: &str, n: usize| {
        format!(
            "From: {from}@example.org\nTo: bot@example.org\nSubject: flood {n}\nMessage-ID: <flood.{n}.{from}.{f}@example.org>\n\nmessage {n} from {from}\n"
        )
    };
    let mut sent = Vec::new();
    for n in 0..12 {
        sent.push(("alice", n));
    }
    sent.push(("bob", 100));
    sent.push(("bob", 101));
    for (from, n) in &sent {
        m.deliver(&mail(from, *n)).await;
    }
    m.taken(sent.len() as u64).await;
    let store = &m.app.deps.store;
    let mut outcome = Vec::new();
    for (from, n) in &sent {
        let id = format!("flood.{n}.{from}.{f}@example.org");
        let conv = store
            .conversation_of_message("email:main", &id)
            .await
            .unwrap()
            .expect("every message is stored");
        let conv = store
            .find_conversation("email:main", &conv)
            .await
            .unwrap()
            .unwrap();
        let message = store.find_message(conv.id, &id).await.unwrap().unwrap();
        outcome.push((
            *from,
            message.meta["skipped"]
                .as_str()
                .unwrap_or("answered")
                .to_owned(),
        ));
    }
    let count = |from: &str, what: &str| {
        outcome
            .iter()
            .filter(|(f, o)| *f == from && o == what)
            .count()
    };
    assert_eq!(count("alice", "answered"), 5, "{outcome:?}");
    assert_eq!(count("alice", "rate_limited_sender"), 7, "{outcome:?}");
    // Oldest first: the first five of the flood were answered, the rest held.
    assert!(outcome[..5].iter().all(|(_, o)| o == "answered"));
    assert_eq!(outcome[12], ("bob", "answered".to_owned()));
    assert_eq!(outcome[13], ("bob", "rate_limited_mailbox".to_owned()));
    let tasks = store.list_tasks(&Default::default()).await.unwrap();
    assert_eq!(tasks.len(), 6);
}
