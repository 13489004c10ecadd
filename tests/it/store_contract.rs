//! One contract for the store, written once against `Arc<dyn Store>` and run on both backends:
//! SQLite (a fresh file in a temporary folder) and PostgreSQL (a fresh database per test,
//! created through the server's `test` or `postgres` database and dropped afterwards).
//!
//! Each case is an `async fn(Arc<dyn Store>)`; `contract!` turns a list of them into tests
//! named `store_contract::<area>::sqlite::<case>` and `…::postgres::<case>`. The PostgreSQL
//! half needs a server (`CTXGATE_TEST_POSTGRES`, default `postgres://postgres@127.0.0.1:5432`)
//! and fails, naming how to start one, when none answers: it is never skipped.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use ctxgate::config::{ScheduleSpec, StoreSettings, Target};
use ctxgate::domain::{TaskId, Usage};
use ctxgate::store::postgres::PgStore;
use ctxgate::store::sqlite::SqliteStore;
use ctxgate::store::{Completion, NewDelivery, NewTask, Store};
use ctxgate_contract::{
    Audience, EventKind, InboundEvent, InboundMessage, MessageKind, Role, SenderKind, SourceType,
};
use futures_util::FutureExt;
use serde_json::json;
use sqlx::{Connection, Executor, PgConnection};

/// Generates the SQLite and PostgreSQL tests of the listed cases (functions of the module).
macro_rules! contract {
    ($($case:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    crate::store_contract::on_sqlite(super::$case).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    crate::store_contract::on_postgres(super::$case).await;
                }
            )+
        }
    };
}

mod history;
mod intake;
mod lease;
mod outbox;
mod reports;
mod schedules;
mod tasks;

/// 2026-01-01T00:00:00Z
pub const NOW: i64 = 1_767_225_600_000;

// --- backends ---------------------------------------------------------------------------------

/// Runs `case` on a migrated SQLite store in a temporary folder.
pub async fn on_sqlite<F, Fut>(case: F)
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let settings = StoreSettings {
        url: format!("sqlite://{}", dir.path().join("store.db").display()),
        ..StoreSettings::default()
    };
    let store = SqliteStore::connect(&settings).await.unwrap();
    assert!(store.migrate().await.unwrap() >= 1);
    assert_eq!(store.migrate().await.unwrap(), 0, "migrations run once");
    case(Arc::new(store.clone())).await;
    store.close().await;
}

/// Runs `case` on a migrated PostgreSQL store in a database of its own, dropped afterwards
/// (also when the case fails).
pub async fn on_postgres<F, Fut>(case: F)
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()>,
{
    let db = PgDatabase::create().await;
    let store = db.store().await;
    assert!(store.migrate().await.unwrap() >= 1);
    assert_eq!(store.migrate().await.unwrap(), 0, "migrations run once");
    assert_eq!(store.pending_migrations().await.unwrap(), 0);
    let outcome = AssertUnwindSafe(case(Arc::new(store.clone())))
        .catch_unwind()
        .await;
    store.close().await;
    db.drop().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// A throwaway database on the test server.
pub struct PgDatabase {
    server: String,
    name: String,
}

impl PgDatabase {
    /// The server's URL without a database name.
    fn server() -> String {
        std::env::var("CTXGATE_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned())
    }

    /// A connection to a database that exists on every server (`test`, else `postgres`).
    async fn admin(server: &str) -> PgConnection {
        let mut last = String::new();
        for db in ["test", "postgres"] {
            let url = format!("{server}/{db}");
            match tokio::time::timeout(Duration::from_secs(10), PgConnection::connect(&url)).await {
                Ok(Ok(conn)) => return conn,
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "no answer within 10 s".to_owned(),
            }
        }
        panic!(
            "PostgreSQL does not answer at {server} ({last}). The store contract tests need it: \
             start the server with `service postgresql start` (Debian; or \
             `pg_ctlcluster <version> main start`), or point CTXGATE_TEST_POSTGRES at one \
             (a URL without database name, for a user allowed to create databases)."
        );
    }

    pub async fn create() -> Self {
        let server = Self::server();
        let name = format!("ctxgate_test_{:016x}", rand::random::<u64>());
        let mut admin = Self::admin(&server).await;
        admin
            .execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .unwrap_or_else(|e| panic!("cannot create the test database {name}: {e}"));
        admin.close().await.unwrap();
        Self { server, name }
    }

    pub fn url(&self) -> String {
        format!("{}/{}", self.server, self.name)
    }

    pub async fn store(&self) -> PgStore {
        PgStore::connect(&self.url(), &StoreSettings::default())
            .await
            .unwrap()
    }

    pub async fn drop(self) {
        let mut admin = Self::admin(&self.server).await;
        admin
            .execute(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name).as_str())
            .await
            .unwrap_or_else(|e| panic!("cannot drop the test database {}: {e}", self.name));
        admin.close().await.unwrap();
    }
}

// --- fixtures ---------------------------------------------------------------------------------

pub fn at(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).unwrap()
}

/// A user's message in `talk:main`, written at `NOW`, asking for an answer.
pub fn posted(conv: &str, id: &str, text: &str) -> InboundEvent {
    InboundEvent {
        channel: "talk:main".into(),
        conversation: conv.into(),
        kind: EventKind::Posted(InboundMessage {
            kind: MessageKind::Message,
            channel_message_id: id.into(),
            sender_id: "alice".into(),
            sender_name: Some("Alice".into()),
            sender_kind: SenderKind::User,
            role: Role::User,
            text: text.into(),
            timestamp: at(NOW),
            reply_to: None,
            source_type: SourceType::Talk,
            trigger: true,
            agent: None,
            audience: Audience::Everyone,
            meta: json!(null),
        }),
        cursor: None,
    }
}

/// The message of a `Posted` event, to change it.
pub fn message(event: &mut InboundEvent) -> &mut InboundMessage {
    match &mut event.kind {
        EventKind::Posted(m) => m,
        other => panic!("not a posted event: {other:?}"),
    }
}

/// `posted`, changed by `f`.
pub fn posted_with(
    conv: &str,
    id: &str,
    text: &str,
    f: impl FnOnce(&mut InboundMessage),
) -> InboundEvent {
    let mut event = posted(conv, id, text);
    f(message(&mut event));
    event
}

pub fn edited(conv: &str, id: &str, text: &str, when: i64) -> InboundEvent {
    InboundEvent {
        channel: "talk:main".into(),
        conversation: conv.into(),
        kind: EventKind::Edited {
            channel_message_id: id.into(),
            text: text.into(),
            at: at(when),
        },
        cursor: None,
    }
}

pub fn deleted(conv: &str, id: &str, when: i64) -> InboundEvent {
    InboundEvent {
        channel: "talk:main".into(),
        conversation: conv.into(),
        kind: EventKind::Deleted {
            channel_message_id: id.into(),
            at: at(when),
        },
        cursor: None,
    }
}

pub fn task(key: &str) -> NewTask {
    NewTask {
        dedup_key: key.into(),
        source_type: SourceType::Talk,
        agent: "default".into(),
        brain: "default".into(),
        max_attempts: 3,
    }
}

/// Stores a triggering message and its task; returns (conversation, message, task) ids.
pub async fn trigger(
    store: &Arc<dyn Store>,
    conv: &str,
    id: &str,
    text: &str,
) -> (i64, i64, TaskId) {
    let r = store
        .ingest(
            &posted(conv, id, text),
            Some(&task(&format!("{conv}/{id}"))),
            NOW,
        )
        .await
        .unwrap();
    (
        r.conversation_id,
        r.message_id.unwrap(),
        TaskId(r.task_id.unwrap()),
    )
}

/// A plain answer by `worker`, without delivery.
pub fn completion(task: TaskId, worker: &str, text: &str) -> Completion {
    Completion {
        task_id: task,
        worker: worker.into(),
        text: text.into(),
        actions: vec![],
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
        },
        triage_usage: None,
        cost: None,
        context: json!({"why": "test"}),
        delivery: None,
        session: None,
        silent: false,
    }
}

pub fn delivery(key: &str, text: &str) -> NewDelivery {
    NewDelivery {
        channel: "talk:main".into(),
        idempotency_key: key.into(),
        kind: "result".into(),
        text: text.into(),
        reply_to: Some("1".into()),
        meta: json!({"room": "r"}),
    }
}

pub fn spec(name: &str) -> ScheduleSpec {
    ScheduleSpec {
        name: name.into(),
        cron: "*/5 * * * *".into(),
        timezone: "UTC".into(),
        prompt: Some("What is new?".into()),
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
    }
}

/// The whole gateway on PostgreSQL: `store.url = postgres://…` opens, migrates and runs it.
#[tokio::test]
async fn the_gateway_answers_a_webhook_on_postgresql() {
    let db = PgDatabase::create().await;
    let url = db.url();
    let app = crate::helpers::spawn_app_with(|s| s.store.url = url.clone()).await;
    let r = app
        .post_webhook(&serde_json::json!({"conversation": "pg", "sender": "u", "text": "hello pg"}))
        .await;
    assert_eq!(r.status(), 202);
    assert!(matches!(
        app.worker("w").run_once().await.unwrap(),
        ctxgate::worker::RunOnce::Processed { .. }
    ));
    let conv = app
        .deps
        .store
        .find_conversation("webhook:default", "pg")
        .await
        .unwrap()
        .expect("stored in PostgreSQL");
    let page = app
        .admin_json(&format!("/admin/conversations/{}/messages", conv.id.0))
        .await;
    let texts: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["hello pg", "re: hello pg"]);
    app.deps.shutdown.cancel();
    drop(app);
    db.drop().await;
}
