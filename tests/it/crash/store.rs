//! What the gateway stored, read from its SQLite file by the test (read-only, also while the
//! process runs: WAL lets a reader in beside it), and the admin API's view of the Talk poller.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, SqliteConnection};

/// Everything the test sent, to be found again.
#[derive(Debug, Default)]
pub struct Expected {
    /// `(room, Talk message id, tag)`
    pub talk_triggers: Vec<(String, i64, String)>,
    /// `(room, Talk message id)`: group messages that ask nothing.
    pub talk_chatter: Vec<(String, i64)>,
    /// `(conversation, message_id, tag)`
    pub webhook_triggers: Vec<(String, String, String)>,
}

async fn open(db: &Path) -> SqliteConnection {
    let options = SqliteConnectOptions::new()
        .filename(db)
        .read_only(true)
        .busy_timeout(Duration::from_secs(5));
    SqliteConnection::connect_with(&options).await.unwrap()
}

async fn scalar(conn: &mut SqliteConnection, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(conn).await.unwrap()
}

async fn by_status(conn: &mut SqliteConnection, table: &str) -> BTreeMap<String, i64> {
    sqlx::query_as::<_, (String, i64)>(&format!(
        "SELECT status, COUNT(*) FROM {table} GROUP BY status"
    ))
    .fetch_all(conn)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

/// The work queues.
#[derive(Debug)]
pub struct Queues {
    pub tasks: i64,
    pub open_tasks: i64,
    pub open_deliveries: i64,
}

impl Queues {
    /// At least one task per trigger, none pending or running, nothing left to deliver.
    pub fn idle(&self, triggers: usize) -> bool {
        self.tasks >= triggers as i64 && self.open_tasks == 0 && self.open_deliveries == 0
    }
}

pub async fn queues(db: &Path) -> Queues {
    let mut conn = open(db).await;
    let q = Queues {
        tasks: scalar(&mut conn, "SELECT COUNT(*) FROM tasks").await,
        open_tasks: scalar(
            &mut conn,
            "SELECT COUNT(*) FROM tasks WHERE status IN ('pending', 'running')",
        )
        .await,
        open_deliveries: scalar(
            &mut conn,
            "SELECT COUNT(*) FROM outbox WHERE status IN ('pending', 'delivering')",
        )
        .await,
    };
    conn.close().await.unwrap();
    q
}

/// What the history and queues hold after the last stop.
#[derive(Debug, Default)]
pub struct History {
    pub tasks_by_status: BTreeMap<String, i64>,
    pub outbox_by_status: BTreeMap<String, i64>,
    /// Trigger messages with more than one task.
    pub doubled_tasks: i64,
    /// Tasks with more than one delivery.
    pub doubled_deliveries: i64,
    /// Sent messages not in the history (`what id`).
    pub missing: Vec<String>,
    /// Triggers stored without a task, chatter stored with one.
    pub wrong_trigger: Vec<String>,
    /// Answers in the history, and the distinct tasks they answer.
    pub answers: (i64, i64),
    /// Talk answers whose history entry never got the id Talk gave the post.
    pub talk_answers_without_post_id: i64,
}

/// 1 when the message is stored (and 2 when it also has a task), 0 when it is missing.
async fn stored(conn: &mut SqliteConnection, channel: &str, conversation: &str, id: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT COALESCE(MAX(1 + EXISTS (SELECT 1 FROM tasks t WHERE t.message_id = m.id)), 0)
         FROM messages m JOIN conversations c ON c.id = m.conversation_id
         WHERE c.channel = ?1 AND c.external_id = ?2 AND m.channel_message_id = ?3",
    )
    .bind(channel)
    .bind(conversation)
    .bind(id)
    .fetch_one(conn)
    .await
    .unwrap()
}

pub async fn check(db: &Path, expected: &Expected) -> History {
    let mut conn = open(db).await;
    let mut h = History {
        tasks_by_status: by_status(&mut conn, "tasks").await,
        outbox_by_status: by_status(&mut conn, "outbox").await,
        doubled_tasks: scalar(
            &mut conn,
            "SELECT COUNT(*) FROM (SELECT message_id FROM tasks GROUP BY message_id
                                   HAVING COUNT(*) > 1)",
        )
        .await,
        doubled_deliveries: scalar(
            &mut conn,
            "SELECT COUNT(*) FROM (SELECT task_id FROM outbox GROUP BY task_id
                                   HAVING COUNT(*) > 1)",
        )
        .await,
        answers: sqlx::query_as(
            "SELECT COUNT(*), COUNT(DISTINCT task_id) FROM messages WHERE role = 'assistant'",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap(),
        talk_answers_without_post_id: scalar(
            &mut conn,
            "SELECT COUNT(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id
             WHERE c.channel = 'talk:main' AND m.role = 'assistant'
               AND m.channel_message_id LIKE 'ctxgate:%'",
        )
        .await,
        ..History::default()
    };
    let talk = expected
        .talk_triggers
        .iter()
        .map(|(room, id, _)| ("talk:main", room.clone(), id.to_string(), 2))
        .chain(
            expected
                .talk_chatter
                .iter()
                .map(|(room, id)| ("talk:main", room.clone(), id.to_string(), 1)),
        );
    let hooks = expected
        .webhook_triggers
        .iter()
        .map(|(conv, id, _)| ("webhook:default", conv.clone(), id.clone(), 2));
    for (channel, conversation, id, want) in talk.chain(hooks) {
        match stored(&mut conn, channel, &conversation, &id).await {
            0 => h.missing.push(format!("{channel} {conversation} {id}")),
            n if n != want => h
                .wrong_trigger
                .push(format!("{channel} {conversation} {id}")),
            _ => {}
        }
    }
    conn.close().await.unwrap();
    h
}

impl History {
    pub fn assert_complete(&self, triggers: usize) {
        let n = triggers as i64;
        assert!(
            self.missing.is_empty(),
            "not in the history: {:?}",
            self.missing
        );
        assert!(
            self.wrong_trigger.is_empty(),
            "stored with the wrong trigger decision: {:?}",
            self.wrong_trigger
        );
        assert_eq!(
            self.tasks_by_status,
            BTreeMap::from([("completed".to_owned(), n)]),
            "one completed task per trigger, nothing stuck or failed"
        );
        assert_eq!(
            self.outbox_by_status,
            BTreeMap::from([("delivered".to_owned(), n)]),
            "one delivered answer per trigger"
        );
        assert_eq!(self.doubled_tasks, 0, "a trigger got two tasks");
        assert_eq!(self.doubled_deliveries, 0, "a task got two deliveries");
        assert_eq!(self.answers, (n, n), "each answer once in the history");
        assert_eq!(
            self.talk_answers_without_post_id, 0,
            "every Talk answer is recorded under its post's id"
        );
    }
}

/// Waits until the Talk poller of the gateway at `base` watches `rooms` rooms (each has a
/// committed cursor), as the admin API reports.
pub async fn wait_watching(base: &str, admin_token: &str, rooms: usize) {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let watched = match http
            .get(format!("{base}/admin/channels"))
            .bearer_auth(admin_token)
            .send()
            .await
        {
            Ok(r) => r.json::<Value>().await.ok().map_or(0, |body| {
                body["channels"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["poller"]["rooms"].as_array())
                    .flatten()
                    .filter(|r| r["cursor"].is_i64())
                    .count()
            }),
            Err(_) => 0,
        };
        if watched >= rooms {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the poller watches {watched} of {rooms} rooms after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the store knows of one channel message, for failure messages: whether it is stored
/// (with its task, if any) and where the conversation's cursor stands.
pub async fn describe(db: &Path, channel: &str, conversation: &str, id: &str) -> String {
    let mut conn = open(db).await;
    let message: Option<(i64, String, Option<i64>)> = sqlx::query_as(
        "SELECT m.id, m.text, (SELECT t.id FROM tasks t WHERE t.message_id = m.id)
         FROM messages m JOIN conversations c ON c.id = m.conversation_id
         WHERE c.channel = ?1 AND c.external_id = ?2 AND m.channel_message_id = ?3",
    )
    .bind(channel)
    .bind(conversation)
    .bind(id)
    .fetch_optional(&mut conn)
    .await
    .unwrap();
    let cursor: Option<String> =
        sqlx::query_scalar("SELECT value FROM cursors WHERE channel = ?1 AND scope = ?2")
            .bind(channel)
            .bind(conversation)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
    conn.close().await.unwrap();
    format!("{channel} {conversation} {id}: stored {message:?}, cursor {cursor:?}")
}

/// The Talk poller's status of `room` (`cursor`, `polling`, …) as the admin API reports it.
pub async fn room_status(base: &str, admin_token: &str, room: &str) -> Option<Value> {
    let body: Value = reqwest::Client::new()
        .get(format!("{base}/admin/channels"))
        .bearer_auth(admin_token)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    body["channels"]
        .as_array()?
        .iter()
        .filter_map(|c| c["poller"]["rooms"].as_array())
        .flatten()
        .find(|r| r["token"] == room)
        .cloned()
}
