//! The SQLite store on a real database file: intake atomicity and dedup, cursors, edits and
//! deletions, per-conversation task ordering.

use chrono::{TimeZone, Utc};
use ctxgate::config::StoreSettings;
use ctxgate::domain::{ConversationId, Usage};
use ctxgate::store::sqlite::SqliteStore;
use ctxgate::store::{Bound, Completion, NewTask, Store};
use ctxgate_contract::{
    Audience, CursorUpdate, EventKind, InboundEvent, InboundMessage, MessageKind, Role, SenderKind,
    SourceType,
};
use serde_json::json;

const NOW: i64 = 1_767_225_600_000;

async fn store() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let settings = StoreSettings {
        url: format!("sqlite://{}", dir.path().join("nested/db.sqlite").display()),
        ..StoreSettings::default()
    };
    let store = SqliteStore::connect(&settings).await.unwrap();
    assert!(store.migrate().await.unwrap() >= 1);
    assert_eq!(store.migrate().await.unwrap(), 0, "migrations run once");
    (store, dir)
}

fn posted(
    conv: &str,
    id: &str,
    text: &str,
    reply_to: Option<&str>,
    cursor: Option<&str>,
) -> InboundEvent {
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
            timestamp: Utc.timestamp_millis_opt(NOW).unwrap(),
            reply_to: reply_to.map(Into::into),
            source_type: SourceType::Talk,
            trigger: true,
            agent: None,
            audience: Audience::Everyone,
            meta: json!(null),
        }),
        cursor: cursor.map(|v| CursorUpdate {
            scope: conv.into(),
            value: v.into(),
        }),
    }
}

fn task(key: &str) -> NewTask {
    NewTask {
        dedup_key: key.into(),
        source_type: SourceType::Talk,
        agent: "default".into(),
        brain: "default".into(),
        max_attempts: 3,
    }
}

#[tokio::test]
async fn intake_commits_message_task_and_cursor_together_and_dedups() {
    let (store, _dir) = store().await;
    let first = store
        .ingest(
            &posted("room", "100", "hello", None, Some("100")),
            Some(&task("k100")),
            NOW,
        )
        .await
        .unwrap();
    assert!(!first.duplicate);
    assert!(first.task_id.is_some());
    assert_eq!(
        store.cursor("talk:main", "room").await.unwrap().as_deref(),
        Some("100")
    );

    let again = store
        .ingest(
            &posted("room", "100", "hello", None, Some("100")),
            Some(&task("k100")),
            NOW,
        )
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.task_id, first.task_id);
    assert_eq!(again.message_id, first.message_id);
    let conv = ConversationId(first.conversation_id);
    assert_eq!(
        store
            .messages_before(conv, Bound::all(), 10)
            .await
            .unwrap()
            .len(),
        1
    );

    // A reply is linked to its parent; edits and deletions change the original.
    let reply = store
        .ingest(
            &posted("room", "101", "re", Some("100"), Some("101")),
            None,
            NOW,
        )
        .await
        .unwrap();
    assert_eq!(reply.task_id, None);
    let stored = store
        .get_message(ctxgate::domain::MessageId(reply.message_id.unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.reply_to_message_id.map(|m| m.0), first.message_id);
    let at = Utc.timestamp_millis_opt(NOW + 5).unwrap();
    for kind in [
        EventKind::Edited {
            channel_message_id: "100".into(),
            text: "hello, edited".into(),
            at,
        },
        EventKind::Deleted {
            channel_message_id: "101".into(),
            at,
        },
    ] {
        let event = InboundEvent {
            channel: "talk:main".into(),
            conversation: "room".into(),
            kind,
            cursor: None,
        };
        store.ingest(&event, None, NOW).await.unwrap();
    }
    let history = store.messages_before(conv, Bound::all(), 10).await.unwrap();
    assert_eq!(history[0].text, "hello, edited");
    assert_eq!(history[0].edited_at, Some(NOW + 5));
    assert_eq!(history[1].deleted_at, Some(NOW + 5));
}

#[tokio::test]
async fn tasks_of_one_conversation_run_one_at_a_time_in_order() {
    let (store, _dir) = store().await;
    let a1 = store
        .ingest(&posted("a", "1", "a1", None, None), Some(&task("a1")), NOW)
        .await
        .unwrap();
    let a2 = store
        .ingest(&posted("a", "2", "a2", None, None), Some(&task("a2")), NOW)
        .await
        .unwrap();
    let b1 = store
        .ingest(&posted("b", "1", "b1", None, None), Some(&task("b1")), NOW)
        .await
        .unwrap();

    let lease = 60_000;
    let first = store.claim_task("w1", NOW, lease).await.unwrap().unwrap();
    assert_eq!(Some(first.id.0), a1.task_id);
    let second = store.claim_task("w2", NOW, lease).await.unwrap().unwrap();
    assert_eq!(
        Some(second.id.0),
        b1.task_id,
        "a2 waits behind the running a1"
    );
    assert!(store.claim_task("w3", NOW, lease).await.unwrap().is_none());

    // A heartbeat keeps a1's lease past its original expiry; b1's worker did not renew, so b1
    // goes to the next worker, and a2 still waits behind a1.
    assert!(
        store
            .heartbeat_task(first.id, "w1", NOW + 50_000, lease)
            .await
            .unwrap()
    );
    let retaken = store
        .claim_task("w3", NOW + 70_000, lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(retaken.id, second.id);
    assert_eq!(retaken.attempts, 2);
    assert!(
        store
            .claim_task("w4", NOW + 70_000, lease)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !store
            .heartbeat_task(first.id, "w3", NOW, lease)
            .await
            .unwrap()
    );

    let done = Completion {
        task_id: first.id,
        worker: "w1".into(),
        text: "ok".into(),
        actions: vec![],
        usage: Usage {
            prompt_tokens: 3,
            completion_tokens: 2,
        },
        triage_usage: None,
        cost: None,
        context: json!({}),
        delivery: None,
        session: None,
        silent: false,
    };
    assert!(store.complete_task(&done, NOW + 1).await.unwrap());
    let third = store
        .claim_task("w4", NOW + 70_001, lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Some(third.id.0), a2.task_id);
    let t = store.get_task(first.id).await.unwrap().unwrap();
    assert_eq!(
        t.usage,
        Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 2
        })
    );
}

#[tokio::test]
async fn a_task_whose_lease_expires_on_its_last_attempt_fails() {
    let (store, _dir) = store().await;
    let mut t = task("k");
    t.max_attempts = 1;
    let r = store
        .ingest(&posted("a", "1", "a1", None, None), Some(&t), NOW)
        .await
        .unwrap();
    store.claim_task("w1", NOW, 1000).await.unwrap().unwrap();
    assert!(
        store
            .claim_task("w2", NOW + 2000, 1000)
            .await
            .unwrap()
            .is_none()
    );
    let t = store
        .get_task(ctxgate::domain::TaskId(r.task_id.unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.status, ctxgate::domain::TaskStatus::Failed);
    assert!(t.last_error.unwrap().contains("lease"));
}

#[tokio::test]
async fn concurrent_intakes_commit_together_and_still_dedup() {
    let (store, _dir) = store().await;
    let store = std::sync::Arc::new(store);
    let mut handles = Vec::new();
    for i in 0..100 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let id = format!("{}", i % 50);
            let r = store
                .ingest(
                    &posted("room", &id, "hi", None, None),
                    Some(&task(&format!("k{id}"))),
                    NOW,
                )
                .await
                .unwrap();
            (id, r)
        }));
    }
    let mut by_id: std::collections::HashMap<String, Vec<_>> = Default::default();
    for h in handles {
        let (id, r) = h.await.unwrap();
        by_id.entry(id).or_default().push(r);
    }
    assert_eq!(by_id.len(), 50);
    let mut task_ids = std::collections::HashSet::new();
    for receipts in by_id.values() {
        assert_eq!(receipts.len(), 2);
        assert_eq!(
            receipts[0].task_id, receipts[1].task_id,
            "both sights name one task"
        );
        assert_eq!(receipts.iter().filter(|r| r.duplicate).count(), 1);
        task_ids.insert(receipts[0].task_id.unwrap());
    }
    assert_eq!(task_ids.len(), 50);
    let conv = ConversationId(by_id["0"][0].conversation_id);
    assert_eq!(
        store
            .messages_before(conv, Bound::all(), 500)
            .await
            .unwrap()
            .len(),
        50
    );
}

#[tokio::test]
async fn a_message_stored_as_context_gets_its_task_when_asked_again() {
    let (store, _dir) = store().await;
    let mut context_only = posted("room", "7", "fyi", None, None);
    if let EventKind::Posted(m) = &mut context_only.kind {
        m.trigger = false;
    }
    let first = store.ingest(&context_only, None, NOW).await.unwrap();
    assert_eq!(first.task_id, None);
    // The same message, now addressed to an agent: one new task, the same message.
    let second = store
        .ingest(
            &posted("room", "7", "fyi", None, None),
            Some(&task("k7-reviewer")),
            NOW,
        )
        .await
        .unwrap();
    assert_eq!(second.message_id, first.message_id);
    assert!(second.task_id.is_some());
    assert!(!second.duplicate);
    let third = store
        .ingest(
            &posted("room", "7", "fyi", None, None),
            Some(&task("k7-reviewer")),
            NOW,
        )
        .await
        .unwrap();
    assert_eq!(third.task_id, second.task_id);
    assert!(third.duplicate);
}
