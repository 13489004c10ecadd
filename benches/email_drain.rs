//! Time to drain 1,000 queued messages from the local Dovecot into tasks (target < 30 s): the
//! real tracker (IMAP fetch in batches, parse, guards, threading lookup, intake with the cursor)
//! against the mail stack of `bash tests/services.sh`.
//!
//! Run: `bash tests/services.sh && cargo bench --bench email_drain`

use std::time::{Duration, Instant};

use ctxgate::config::{EmailSettings, MailSecurity, Secret, Settings};
use ctxgate::{App, Overrides};
use ctxgate_email::imap::{ImapConfig, ImapSession};
use ctxgate_email::{MessageId, Security};

const MESSAGES: usize = 1000;

fn imap(mailbox: &str) -> ImapConfig {
    ImapConfig {
        host: "127.0.0.1".into(),
        port: 14143,
        security: Security::Plain,
        username: "bot".into(),
        password: secrecy::SecretString::from("secret"),
        mailbox: mailbox.into(),
        batch_size: 50,
        timeout: Duration::from_secs(30),
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let folder = format!(
            "ctxgate-drain-{}",
            MessageId::generate("x")
                .as_str()
                .split('@')
                .next()
                .unwrap()
                .replace('.', "-")
        );
        let mut admin = ImapSession::connect(&imap("INBOX"))
            .await
            .expect("the mail stack is not running: start it with `bash tests/services.sh`");
        admin.raw().create(&folder).await.expect("CREATE");
        let queued = Instant::now();
        for i in 0..MESSAGES {
            let raw = format!(
                "From: Sender {i} <sender{i}@example.org>\r\nTo: bot@example.org\r\n\
                 Subject: Question {i}\r\nMessage-ID: <drain{i}.{folder}@example.org>\r\n\
                 Date: Sun, 22 Nov 2026 08:00:00 +0000\r\n\r\n\
                 Hello,\r\n\r\nquestion number {i}: what is the plan for item {i}?\r\n\r\n\
                 > earlier quoted text\r\n\r\n-- \r\nSender {i}\r\n"
            );
            admin
                .raw()
                .append(&folder, None, None, raw.as_bytes())
                .await
                .expect("APPEND");
        }
        println!("queued {MESSAGES} messages in {:.1?}", queued.elapsed());

        let dir = tempfile::tempdir().unwrap();
        let mut s = Settings::default();
        s.http.listen = "127.0.0.1:0".parse().unwrap();
        s.store.url = format!("sqlite://{}", dir.path().join("drain.db").display());
        let hook = s.webhooks.get_mut("default").unwrap();
        hook.secret = Some(Secret::new("bench-secret-0123456789"));
        hook.secret_file = None;
        s.email.insert(
            "main".into(),
            EmailSettings {
                address: "bot@example.org".into(),
                imap_host: "127.0.0.1".into(),
                imap_port: 14143,
                imap_security: MailSecurity::Plain,
                username: "bot".into(),
                password: Some(Secret::new("secret")),
                mailbox: folder.clone(),
                smtp_host: "127.0.0.1".into(),
                smtp_port: 14025,
                smtp_security: MailSecurity::Plain,
                smtp_auth: false,
                after_processing: "seen".into(),
                // Every sender is distinct; the mailbox-wide limit would cap a burst this big.
                per_mailbox_per_hour: usize::MAX,
                ..EmailSettings::default()
            },
        );
        let app = App::build_with(s, Overrides::default()).await.unwrap();
        let deps = app.deps().clone();
        let tracker = deps.email_trackers.get().unwrap()["main"].current();
        let started = Instant::now();
        tokio::spawn(tracker.clone().run());
        let mut last_report = Instant::now();
        while (tracker.status().messages_taken as usize) < MESSAGES {
            if last_report.elapsed() > Duration::from_secs(5) {
                println!("  … {} taken", tracker.status().messages_taken);
                last_report = Instant::now();
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "stalled: {:?}",
                tracker.status()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let took = started.elapsed();
        let (pending, _, _) = deps.store.backlog().await.unwrap();
        println!(
            "drained {MESSAGES} messages into {pending} pending tasks in {took:.2?} ({:.0} msgs/s; \
             batches of 50, mark seen after each)",
            MESSAGES as f64 / took.as_secs_f64()
        );
        assert_eq!(pending as usize, MESSAGES);
        deps.shutdown.cancel();
        admin.raw().delete(&folder).await.expect("DELETE");
    });
}
