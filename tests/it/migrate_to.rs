//! `ctxgate migrate --to`: a SQLite store filled through the real gateway (webhook intake, the
//! worker with a scripted brain, the outbox, the scheduler, a channel cursor) is copied by the
//! real binary into a fresh PostgreSQL database, and read back through `PgStore`: the same
//! records, archive search on the copy, fresh ids after it, nothing changed by a second run, a
//! differing target refused without writing anything, and clear refusals with a non-zero exit.
//!
//! The callback receiver is a wiremock server that answers every POST with 200, as
//! docs/webhooks.md ("Callbacks") says a receiver acknowledges an answer.

use std::panic::AssertUnwindSafe;
use std::process::{Output, Stdio};
use std::time::Duration;

use ctxgate::brain::{BrainError, BrainReply, ScriptedBrain, Step};
use ctxgate::config::{ScheduleSpec, StoreSettings, Target};
use ctxgate::domain::{ConversationId, MessageId, TaskId, Usage};
use ctxgate::outbox::DeliverOnce;
use ctxgate::scheduler::Scheduler;
use ctxgate::store::postgres::PgStore;
use ctxgate::store::sqlite::SqliteStore;
use ctxgate::store::{Bound, Page, Store};
use ctxgate::worker::RunOnce;
use ctxgate_contract::CursorUpdate;
use futures_util::FutureExt;
use serde_json::{Value, json};
use sqlx::{Executor, PgPool, SqlitePool};
use tokio::process::Command;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{TestApp, spawn_app_with_brain};
use crate::store_contract::{NOW, PgDatabase, message, posted, task};

const BIN: &str = env!("CARGO_BIN_EXE_ctxgate");

/// Every table holding data (the FTS5 index and `archive_index_state` are not copied).
const TABLES: [&str; 9] = [
    "conversations",
    "messages",
    "tasks",
    "task_attempts",
    "outbox",
    "cursors",
    "brain_sessions",
    "schedules",
    "schedule_runs",
];

/// The message with a NUL (which PostgreSQL text cannot hold) and text beyond ASCII.
const ODD_TEXT: &str = "Grüße aus Zürich\u{0} – planning the fjord crossing 🚣";

struct Source {
    app: TestApp,
    dir: tempfile::TempDir,
    url: String,
    callback: MockServer,
}

impl Source {
    async fn post(&self, body: Value) -> Value {
        let r = self.app.post_webhook(&body).await;
        assert_eq!(r.status(), 202, "{body}");
        r.json().await.unwrap()
    }

    /// Runs the worker and the outbox until nothing is due.
    async fn drain(&self) {
        let worker = self.app.worker("w");
        while worker.run_once().await.unwrap() != RunOnce::Empty {}
        let outbox = self.app.outbox();
        while !matches!(outbox.run_once().await.unwrap(), DeliverOnce::Empty) {}
    }

    /// `ctxgate migrate --to <target>` with a config file naming this store.
    async fn migrate_to(&self, target: &str) -> Output {
        let config = self.dir.path().join("ctxgate.toml");
        write_config(&config, &self.url);
        run(self.dir.path(), &config, target).await
    }
}

async fn run(dir: &std::path::Path, config: &std::path::Path, target: &str) -> Output {
    let out = Command::new(BIN)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .arg("--config")
        .arg(config)
        .args(["migrate", "--to", target])
        .stdin(Stdio::null())
        .output();
    tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("migrate --to ends within 120 s")
        .unwrap()
}

fn write_config(path: &std::path::Path, store_url: &str) {
    std::fs::write(path, format!("[store]\nurl = \"{store_url}\"\n")).unwrap();
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A gateway on a fresh SQLite file that has seen: a webhook conversation answered by a brain
/// that keeps sessions and delivered to a callback, a message that asks nothing, a task that
/// failed for good, a schedule that fired, and a channel event that moved a cursor.
async fn filled_source() -> Source {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("ctxgate.db").display());
    let callback = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&callback)
        .await;
    let brain = ScriptedBrain::with_sessions();
    brain
        .then(Step::Reply(BrainReply {
            text: "Gute Reise über den Fjord!".into(),
            usage: Usage {
                prompt_tokens: 42,
                completion_tokens: 7,
            },
            actions: Vec::new(),
            session: Some("session-1".into()),
        }))
        .then(Step::Fail(BrainError::Permanent(
            "the model refused".into(),
        )));
    let store_url = url.clone();
    let app = spawn_app_with_brain(brain, move |s| {
        s.store.url = store_url;
        s.schedules.push(ScheduleSpec {
            name: "digest".into(),
            cron: "*/5 * * * *".into(),
            timezone: "UTC".into(),
            prompt: Some("What is new today?".into()),
            prompt_file: None,
            target: Target::Webhook {
                webhook: "default".into(),
                conversation: "me".into(),
                callback_url: None,
            },
            brain: "default".into(),
            enabled: true,
            one_shot: false,
            silent_unless_news: false,
        });
    })
    .await;
    let source = Source {
        app,
        dir,
        url,
        callback,
    };
    let cb = format!("{}/cb", source.callback.uri());
    source
        .post(
            json!({"conversation": "trip", "sender": "ann", "text": ODD_TEXT,
                     "message_id": "t-1", "callback_url": cb}),
        )
        .await;
    source.drain().await;
    source
        .post(
            json!({"conversation": "trip", "sender": "ann", "trigger": false,
                     "text": "by the way, the ferry leaves at nine"}),
        )
        .await;
    source
        .post(json!({"conversation": "other", "sender": "bob", "text": "a question"}))
        .await;
    source.drain().await;
    source.app.advance(Duration::from_secs(300));
    assert_eq!(
        Scheduler::new(source.app.deps.clone())
            .tick()
            .await
            .unwrap(),
        1
    );
    source.drain().await;
    let mut event = posted("room-1", "talk-1", "a message from a Talk room");
    message(&mut event).meta = json!({"note": "a NUL\u{0} in JSON"});
    event.cursor = Some(CursorUpdate {
        scope: "room-1".into(),
        value: "4711".into(),
    });
    source
        .app
        .deps
        .store
        .ingest(&event, None, NOW)
        .await
        .unwrap();
    source
}

async fn counts_sqlite(pool: &SqlitePool) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for t in TABLES {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {t}"))
            .fetch_one(pool)
            .await
            .unwrap();
        out.push((t.to_owned(), n));
    }
    out
}

async fn counts_pg(pool: &PgPool) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for t in TABLES {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {t}"))
            .fetch_one(pool)
            .await
            .unwrap();
        out.push((t.to_owned(), n));
    }
    out
}

async fn ids(pool: &SqlitePool, table: &str) -> Vec<i64> {
    sqlx::query_scalar(&format!("SELECT id FROM {table} ORDER BY id"))
        .fetch_all(pool)
        .await
        .unwrap()
}

/// A record as JSON, with each NUL (in text or escaped in JSON) as the copy stores it.
fn as_copied<T: serde::Serialize>(record: &T) -> String {
    serde_json::to_string(record)
        .unwrap()
        .replace("\\u0000", "\u{FFFD}")
}

fn same<T: serde::Serialize>(from_sqlite: &T, from_pg: &T, what: &str) {
    assert_eq!(
        as_copied(from_sqlite),
        serde_json::to_string(from_pg).unwrap(),
        "{what}"
    );
}

/// Runs `case` with a fresh PostgreSQL database, dropped afterwards (also when it fails).
async fn with_database<F, Fut>(case: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let db = PgDatabase::create().await;
    let outcome = AssertUnwindSafe(case(db.url())).catch_unwind().await;
    db.drop().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_moves_to_postgres_with_its_history_and_a_second_run_changes_nothing() {
    let source = filled_source().await;
    with_database(|target| async move {
        let out = source.migrate_to(&target).await;
        let (said, progress) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{progress}");

        let sqlite_store = SqliteStore::connect(&StoreSettings {
            url: source.url.clone(),
            ..StoreSettings::default()
        })
        .await
        .unwrap();
        let sqlite = SqlitePool::connect(&source.url).await.unwrap();
        let pg_store = PgStore::connect(&target, &StoreSettings::default())
            .await
            .unwrap();
        let pg = pg_store.pool().clone();

        // Every table, with the same number of rows, none of them empty; progress per table on
        // stderr, the summary on stdout.
        let before = counts_sqlite(&sqlite).await;
        assert_eq!(before, counts_pg(&pg).await);
        for (table, n) in &before {
            assert!(*n > 0, "the fixture fills {table}");
            assert!(
                said.contains(&format!("{table}: {n} rows, {n} copied, 0 already there")),
                "{said}"
            );
            assert!(
                progress.contains(&format!("{table}: {n}/{n} rows")),
                "{progress}"
            );
        }
        assert!(said.contains("messages_fts"), "{said}");

        // The records read back through each store are the same (NUL aside).
        for id in ids(&sqlite, "conversations").await {
            let id = ConversationId(id);
            let theirs = pg_store.get_conversation(id).await.unwrap();
            same(
                &sqlite_store.get_conversation(id).await.unwrap(),
                &theirs,
                "conversation",
            );
            assert!(theirs.is_some());
        }
        for id in ids(&sqlite, "messages").await {
            let id = MessageId(id);
            same(
                &sqlite_store.get_message(id).await.unwrap(),
                &pg_store.get_message(id).await.unwrap(),
                "message",
            );
        }
        for id in ids(&sqlite, "tasks").await {
            let id = TaskId(id);
            same(
                &sqlite_store.get_task(id).await.unwrap(),
                &pg_store.get_task(id).await.unwrap(),
                "task",
            );
            same(
                &sqlite_store.task_attempts(id).await.unwrap(),
                &pg_store.task_attempts(id).await.unwrap(),
                "attempts",
            );
            same(
                &sqlite_store.deliveries_for_task(id).await.unwrap(),
                &pg_store.deliveries_for_task(id).await.unwrap(),
                "deliveries",
            );
        }
        let schedules = sqlite_store.list_schedules().await.unwrap();
        same(
            &schedules,
            &pg_store.list_schedules().await.unwrap(),
            "schedules",
        );
        same(
            &sqlite_store
                .schedule_runs(schedules[0].id, &Page::default())
                .await
                .unwrap(),
            &pg_store
                .schedule_runs(schedules[0].id, &Page::default())
                .await
                .unwrap(),
            "schedule runs",
        );
        assert_eq!(
            pg_store
                .cursor("talk:main", "room-1")
                .await
                .unwrap()
                .as_deref(),
            Some("4711")
        );

        // Spot checks of what matters most: the odd text, the tasks' outcomes, the ids.
        let trip = pg_store
            .find_conversation("webhook:default", "trip")
            .await
            .unwrap()
            .expect("the trip conversation");
        let odd = pg_store
            .find_message(trip.id, "t-1")
            .await
            .unwrap()
            .expect("the first message");
        assert_eq!(odd.text, ODD_TEXT.replace('\0', "\u{FFFD}"));
        assert_eq!(
            pg_store
                .get_session(trip.id, "default")
                .await
                .unwrap()
                .unwrap()
                .session_id,
            "session-1"
        );
        let statuses: Vec<(String, Option<String>)> =
            sqlx::query_as("SELECT status, result_text FROM tasks ORDER BY id")
                .fetch_all(&pg)
                .await
                .unwrap();
        assert!(
            statuses.contains(&(
                "completed".into(),
                Some("Gute Reise über den Fjord!".into())
            )),
            "{statuses:?}"
        );
        assert!(statuses.iter().any(|(s, _)| s == "failed"), "{statuses:?}");

        // PostgreSQL's JSON functions refuse an escaped NUL: the copy replaced it.
        let note: String = sqlx::query_scalar(
            "SELECT meta::json ->> 'note' FROM messages WHERE channel_message_id = 'talk-1'",
        )
        .fetch_one(&pg)
        .await
        .unwrap();
        assert_eq!(note, "a NUL\u{FFFD} in JSON");

        // Archive recall on PostgreSQL finds the copied message (tsv is filled from its text).
        let hits = pg_store
            .archive_search(trip.id, "\"fjord\" OR \"crossing\"", Bound::default(), 5)
            .await
            .unwrap();
        assert!(hits.iter().any(|h| h.message.id == odd.id), "{hits:?}");

        // A second run: nothing copied, nothing changed.
        let again = source.migrate_to(&target).await;
        let said = text(&again.stdout);
        assert!(again.status.success(), "{}", text(&again.stderr));
        for (table, n) in &before {
            assert!(
                said.contains(&format!("{table}: {n} rows, 0 copied, {n} already there")),
                "{said}"
            );
        }
        assert_eq!(before, counts_pg(&pg).await);

        // New rows on PostgreSQL get fresh ids: the sequences are past the copied ones.
        let max = |table: &'static str| {
            let sqlite = sqlite.clone();
            async move { *ids(&sqlite, table).await.last().unwrap() }
        };
        let receipt = pg_store
            .ingest(
                &posted("room-2", "new-1", "first message after the move"),
                Some(&task("after-move")),
                NOW,
            )
            .await
            .unwrap();
        assert!(receipt.conversation_id > max("conversations").await);
        assert!(receipt.message_id.unwrap() > max("messages").await);
        assert!(receipt.task_id.unwrap() > max("tasks").await);
        let mut spec = schedules[0].spec.clone();
        spec.name = "after-move".into();
        let new_schedule = pg_store
            .put_schedule(&spec, "api", None, 3, NOW)
            .await
            .unwrap();
        assert!(new_schedule.id > max("schedules").await);

        sqlite_store.close().await;
        sqlite.close().await;
        pg_store.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_holding_different_rows_is_refused_and_left_unchanged() {
    let source = filled_source().await;
    with_database(|target| async move {
        let first = source.migrate_to(&target).await;
        assert!(first.status.success(), "{}", text(&first.stderr));
        let pg = PgPool::connect(&target).await.unwrap();
        pg.execute("UPDATE conversations SET updated_at = updated_at + 1 WHERE id = 1")
            .await
            .unwrap();
        // Meanwhile the source took a message in a new conversation (rows added, none changed).
        source
            .post(
                json!({"conversation": "later", "sender": "ann", "trigger": false,
                         "text": "one more thing"}),
            )
            .await;
        let held = counts_pg(&pg).await;

        let refused = source.migrate_to(&target).await;
        let err = text(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{err}");
        assert!(
            err.contains("table conversations")
                && err.contains("id = 1")
                && err.contains("updated_at"),
            "{err}"
        );
        assert_eq!(held, counts_pg(&pg).await, "nothing was written");

        // Once the row is as the source has it, the new message follows.
        pg.execute("UPDATE conversations SET updated_at = updated_at - 1 WHERE id = 1")
            .await
            .unwrap();
        let resumed = source.migrate_to(&target).await;
        let said = text(&resumed.stdout);
        assert!(resumed.status.success(), "{}", text(&resumed.stderr));
        for table in ["conversations", "messages"] {
            let n = held.iter().find(|(t, _)| t == table).unwrap().1;
            assert!(
                said.contains(&format!(
                    "{table}: {} rows, 1 copied, {n} already there",
                    n + 1
                )),
                "{said}"
            );
        }
        pg.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_the_problem_and_exit_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    let db_file = dir.path().join("data/ctxgate.db");
    let sqlite_url = format!("sqlite://{}", db_file.display());

    // A source that does not exist is not created (a wrong path must not "copy" nothing).
    write_config(&config, &sqlite_url);
    let out = run(dir.path(), &config, "postgres://postgres@127.0.0.1:5432/x").await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("does not exist"),
        "{}",
        text(&out.stderr)
    );
    assert!(!db_file.exists());

    let store = SqliteStore::connect(&StoreSettings {
        url: sqlite_url.clone(),
        ..StoreSettings::default()
    })
    .await
    .unwrap();
    store.migrate().await.unwrap();
    store.close().await;

    // The target must be PostgreSQL.
    let out = run(dir.path(), &config, "sqlite://other.db").await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--to must name a PostgreSQL"),
        "{}",
        text(&out.stderr)
    );

    // An unreachable target: reported at once, without its password.
    let started = std::time::Instant::now();
    let out = run(
        dir.path(),
        &config,
        "postgres://app:hunter2secret@127.0.0.1:1/nowhere",
    )
    .await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot connect to the target postgres://app:***@127.0.0.1:1/nowhere"),
        "{err}"
    );
    assert!(!err.contains("hunter2secret"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );

    with_database(|target| async move {
        // The source must be SQLite.
        write_config(&config, &target);
        let out = run(dir.path(), &config, &target).await;
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out.stderr).contains("is PostgreSQL already"),
            "{}",
            text(&out.stderr)
        );

        // A target migrated by a newer build.
        write_config(&config, &sqlite_url);
        let pg = PgStore::connect(&target, &StoreSettings::default())
            .await
            .unwrap();
        pg.migrate().await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (20990101000000, 'from the future', true, '\\x00', 1)",
        )
        .execute(pg.pool())
        .await
        .unwrap();
        let out = run(dir.path(), &config, &target).await;
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("20990101000000") && err.contains("newer"),
            "{err}"
        );
        pg.close().await;
    })
    .await;
}
