//! Intake: one transaction for message, task and cursor; dedup; replies, edits, deletions.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ctxgate::domain::{ConversationId, MessageId, TaskStatus};
use ctxgate::store::{Bound, Page, Store};
use ctxgate_contract::{
    Audience, CursorUpdate, EventKind, InboundEvent, Role, SenderKind, SourceType,
};
use serde_json::json;

use super::{NOW, deleted, edited, posted, posted_with, task};

async fn intake_commits_message_task_and_cursor_together_and_dedups(store: Arc<dyn Store>) {
    let mut event = posted_with("room", "100", "hello", |m| {
        m.audience = Audience::Addressed {
            agents: vec!["default".into()],
            users: vec![],
        };
        m.meta = json!({"thread": 7});
    });
    event.cursor = Some(CursorUpdate {
        scope: "room".into(),
        value: "100".into(),
    });
    let first = store
        .ingest(&event, Some(&task("k100")), NOW)
        .await
        .unwrap();
    assert!(!first.duplicate);
    assert_eq!(
        store.cursor("talk:main", "room").await.unwrap().as_deref(),
        Some("100")
    );
    assert_eq!(store.cursor("talk:main", "other").await.unwrap(), None);

    let m = store
        .get_message(MessageId(first.message_id.unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.conversation_id.0, first.conversation_id);
    assert_eq!(m.channel_message_id, "100");
    assert_eq!(
        (m.sender_id.as_str(), m.sender_name.as_deref()),
        ("alice", Some("Alice"))
    );
    assert_eq!((m.sender_kind, m.role), (SenderKind::User, Role::User));
    assert_eq!((m.kind.as_str(), m.text.as_str()), ("message", "hello"));
    assert_eq!(m.created_at, NOW);
    assert_eq!(m.source_type, Some(SourceType::Talk));
    assert_eq!(m.agent, None, "only answers name their agent");
    assert_eq!(
        m.audience,
        Audience::Addressed {
            agents: vec!["default".into()],
            users: vec![]
        }
    );
    assert_eq!(m.meta, json!({"thread": 7}));
    assert_eq!((m.edited_at, m.deleted_at, m.task_id), (None, None, None));

    let t = store
        .get_task(ctxgate::domain::TaskId(first.task_id.unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.status, TaskStatus::Pending);
    assert_eq!(t.message_id, Some(m.id));
    assert_eq!((t.attempts, t.max_attempts), (0, 3));
    assert_eq!(
        (t.available_at, t.created_at, t.updated_at),
        (NOW, NOW, NOW)
    );
    assert_eq!(t.dedup_key, "k100");
    assert_eq!((t.usage, t.cost, t.finished_at), (None, None, None));

    // The same sight again: nothing new, the first sight's ids.
    event.cursor.as_mut().unwrap().value = "101".into();
    let again = store
        .ingest(&event, Some(&task("k100")), NOW + 1)
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(
        (again.conversation_id, again.message_id, again.task_id),
        (first.conversation_id, first.message_id, first.task_id)
    );
    assert_eq!(
        store.cursor("talk:main", "room").await.unwrap().as_deref(),
        Some("101"),
        "the cursor moves even when the message was known"
    );
    let conv = ConversationId(first.conversation_id);
    assert_eq!(
        store
            .messages_before(conv, Bound::all(), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    let c = store.get_conversation(conv).await.unwrap().unwrap();
    assert_eq!((c.created_at, c.updated_at), (NOW, NOW + 1));
}

async fn replies_edits_and_deletions_change_the_original(store: Arc<dyn Store>) {
    let first = store
        .ingest(&posted("room", "100", "hello"), None, NOW)
        .await
        .unwrap();
    assert_eq!(first.task_id, None);
    let reply = store
        .ingest(
            &posted_with("room", "101", "re", |m| m.reply_to = Some("100".into())),
            None,
            NOW,
        )
        .await
        .unwrap();
    let orphan = store
        .ingest(
            &posted_with("room", "102", "re?", |m| m.reply_to = Some("99".into())),
            None,
            NOW,
        )
        .await
        .unwrap();
    let get = |id: Option<i64>| {
        let store = store.clone();
        async move {
            store
                .get_message(MessageId(id.unwrap()))
                .await
                .unwrap()
                .unwrap()
        }
    };
    let r = get(reply.message_id).await;
    assert_eq!(r.reply_to_message_id.map(|m| m.0), first.message_id);
    assert_eq!(r.reply_to_channel_id.as_deref(), Some("100"));
    let o = get(orphan.message_id).await;
    assert_eq!(
        o.reply_to_message_id, None,
        "a parent never seen links nothing"
    );
    assert_eq!(o.reply_to_channel_id.as_deref(), Some("99"));

    for event in [
        edited("room", "100", "hello, edited", NOW + 5),
        deleted("room", "101", NOW + 6),
        edited("room", "unknown", "nothing", NOW + 7),
        deleted("elsewhere", "100", NOW + 8),
    ] {
        let r = store.ingest(&event, None, NOW).await.unwrap();
        assert_eq!((r.message_id, r.task_id, r.duplicate), (None, None, false));
    }
    let history = store
        .messages_before(ConversationId(first.conversation_id), Bound::all(), 10)
        .await
        .unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(history[0].text, "hello, edited");
    assert_eq!(history[0].edited_at, Some(NOW + 5));
    assert_eq!(history[0].deleted_at, None);
    assert_eq!(history[1].deleted_at, Some(NOW + 6));
    assert_eq!(history[1].text, "re", "a deleted message keeps its text");

    // A cursor-only event moves the cursor and stores nothing.
    let only = InboundEvent {
        channel: "talk:main".into(),
        conversation: "room".into(),
        kind: EventKind::CursorOnly,
        cursor: Some(CursorUpdate {
            scope: "room".into(),
            value: "200".into(),
        }),
    };
    store.ingest(&only, None, NOW).await.unwrap();
    assert_eq!(
        store.cursor("talk:main", "room").await.unwrap().as_deref(),
        Some("200")
    );
    assert_eq!(
        store
            .messages_before(ConversationId(first.conversation_id), Bound::all(), 10)
            .await
            .unwrap()
            .len(),
        3
    );
}

async fn a_message_stored_as_context_gets_its_task_when_asked_again(store: Arc<dyn Store>) {
    let context_only = posted_with("room", "7", "fyi", |m| m.trigger = false);
    let first = store.ingest(&context_only, None, NOW).await.unwrap();
    assert_eq!(first.task_id, None);
    let second = store
        .ingest(&posted("room", "7", "fyi"), Some(&task("k7-reviewer")), NOW)
        .await
        .unwrap();
    assert_eq!(second.message_id, first.message_id);
    assert!(second.task_id.is_some());
    assert!(!second.duplicate, "a new task is news");
    let third = store
        .ingest(&posted("room", "7", "fyi"), Some(&task("k7-reviewer")), NOW)
        .await
        .unwrap();
    assert_eq!(third.task_id, second.task_id);
    assert!(third.duplicate);
}

async fn concurrent_sights_of_one_message_store_it_once(store: Arc<dyn Store>) {
    let mut handles = Vec::new();
    for i in 0..100 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let id = format!("{}", i % 50);
            let r = store
                .ingest(
                    &posted("room", &id, "hi"),
                    Some(&task(&format!("k{id}"))),
                    NOW,
                )
                .await
                .unwrap();
            (id, r)
        }));
    }
    let mut by_id: HashMap<String, Vec<_>> = HashMap::new();
    for h in handles {
        let (id, r) = h.await.unwrap();
        by_id.entry(id).or_default().push(r);
    }
    assert_eq!(by_id.len(), 50);
    let mut task_ids = HashSet::new();
    for receipts in by_id.values() {
        assert_eq!(
            receipts[0].task_id, receipts[1].task_id,
            "both sights name one task"
        );
        assert_eq!(receipts[0].message_id, receipts[1].message_id);
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
    assert_eq!(store.backlog().await.unwrap(), (50, 0, 0));
}

async fn a_batch_stores_its_events_in_order_without_tasks(store: Arc<dyn Store>) {
    let mut last = posted("imported", "3", "three");
    last.cursor = Some(CursorUpdate {
        scope: "imported".into(),
        value: "3".into(),
    });
    let events = vec![
        posted("imported", "1", "one"),
        posted("imported", "2", "two"),
        edited("imported", "1", "one, edited", NOW + 1),
        last,
        posted("imported", "2", "two again"),
    ];
    store.ingest_batch(&events, NOW).await.unwrap();
    let conv = store
        .find_conversation("talk:main", "imported")
        .await
        .unwrap()
        .unwrap();
    let history = store
        .messages_before(conv.id, Bound::all(), 10)
        .await
        .unwrap();
    let texts: Vec<_> = history.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["one, edited", "two", "three"]);
    assert!(history.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(store.backlog().await.unwrap(), (0, 0, 0));
    assert_eq!(
        store
            .cursor("talk:main", "imported")
            .await
            .unwrap()
            .as_deref(),
        Some("3")
    );
}

async fn conversations_are_found_listed_and_paged(store: Arc<dyn Store>) {
    let a = store
        .ingest(&posted("a", "1", "x"), None, NOW)
        .await
        .unwrap();
    let b = store
        .ingest(&posted("b", "1", "x"), None, NOW + 1)
        .await
        .unwrap();
    let mut elsewhere = posted("a", "1", "x");
    elsewhere.channel = "webhook:default".into();
    let c = store.ingest(&elsewhere, None, NOW + 2).await.unwrap();
    assert_ne!(
        a.conversation_id, c.conversation_id,
        "conversations are per channel"
    );
    assert_ne!(a.message_id, c.message_id);

    let found = store
        .find_conversation("talk:main", "a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.id.0, a.conversation_id);
    assert_eq!(
        (found.channel.as_str(), found.external_id.as_str()),
        ("talk:main", "a")
    );
    assert_eq!(
        store.find_conversation("talk:main", "zzz").await.unwrap(),
        None
    );
    assert_eq!(
        store.get_conversation(ConversationId(-1)).await.unwrap(),
        None
    );

    let all = store.list_conversations(&Page::default()).await.unwrap();
    let ids: Vec<i64> = all.iter().map(|c| c.id.0).collect();
    assert_eq!(
        ids,
        [c.conversation_id, b.conversation_id, a.conversation_id]
    );
    let page = Page {
        before: Some(c.conversation_id),
        limit: 1,
    };
    let next = store.list_conversations(&page).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].id.0, b.conversation_id);

    let m = store.find_message(found.id, "1").await.unwrap().unwrap();
    assert_eq!(Some(m.id.0), a.message_id);
    assert_eq!(store.find_message(found.id, "2").await.unwrap(), None);
    assert_eq!(store.get_message(MessageId(-1)).await.unwrap(), None);
}

async fn only_answers_keep_their_agent(store: Arc<dyn Store>) {
    let answer = posted_with("room", "a1", "done", |m| {
        m.role = Role::Assistant;
        m.sender_kind = SenderKind::SelfBot;
        m.agent = Some("reviewer".into());
        m.kind = ctxgate_contract::MessageKind::Ack;
    });
    let user = posted_with("room", "u1", "hi", |m| m.agent = Some("reviewer".into()));
    let a = store.ingest(&answer, None, NOW).await.unwrap();
    let u = store.ingest(&user, None, NOW).await.unwrap();
    let a = store
        .get_message(MessageId(a.message_id.unwrap()))
        .await
        .unwrap()
        .unwrap();
    let u = store
        .get_message(MessageId(u.message_id.unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.agent.as_deref(), Some("reviewer"));
    assert_eq!(
        (a.kind.as_str(), a.sender_kind),
        ("ack", SenderKind::SelfBot)
    );
    assert_eq!(u.agent, None);
}

async fn skipped_messages_are_listed_newest_first(store: Arc<dyn Store>) {
    let with_meta = |conv: &str, id: &str, meta: serde_json::Value| {
        posted_with(conv, id, "x", |m| {
            m.trigger = false;
            m.meta = meta;
        })
    };
    let mut ids = HashMap::new();
    let mut email = with_meta("inbox", "e1", json!({"skipped": {"reason": "auto-reply"}}));
    email.channel = "email".into();
    for (name, event) in [
        (
            "s1",
            with_meta("room", "s1", json!({"skipped": {"reason": "loop"}})),
        ),
        ("n1", posted_with("room", "n1", "x", |m| m.trigger = false)),
        (
            "z1",
            with_meta("room", "z1", json!({"skipped": null, "other": 1})),
        ),
        ("o1", with_meta("room", "o1", json!({"note": "skipped"}))),
        ("s2", with_meta("room", "s2", json!({"skipped": false}))),
        ("e1", email),
    ] {
        let r = store.ingest(&event, None, NOW).await.unwrap();
        ids.insert(name, MessageId(r.message_id.unwrap()));
    }
    let list = |channel: Option<&'static str>, before: Option<MessageId>, limit: usize| {
        let store = store.clone();
        async move {
            store
                .skipped_messages(channel, before, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|m| m.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        list(None, None, 10).await,
        [ids["e1"], ids["s2"], ids["s1"]]
    );
    assert_eq!(
        list(Some("talk:main"), None, 10).await,
        [ids["s2"], ids["s1"]]
    );
    assert_eq!(list(Some("email"), None, 10).await, [ids["e1"]]);
    assert_eq!(list(None, Some(ids["s2"]), 10).await, [ids["s1"]]);
    assert_eq!(list(None, None, 1).await, [ids["e1"]]);
    assert!(list(Some("webhook:default"), None, 10).await.is_empty());
    let first = store.skipped_messages(None, None, 1).await.unwrap();
    assert_eq!(first[0].meta["skipped"]["reason"], "auto-reply");
}

/// PostgreSQL text cannot hold NUL: it is stored as U+FFFD there, and intake never fails on it.
async fn odd_text_is_stored_and_deduplicated(store: Arc<dyn Store>) {
    let text = "nul \0 byte, emoji 🦀, quote ' and \\";
    let event = posted_with("room\0x", "id\0", text, |m| {
        m.sender_name = Some("A\0".into());
        m.meta = json!({"skipped": {"reason": "nul \0 in meta"}, "k\0": [1, "\0"]});
    });
    let first = store.ingest(&event, Some(&task("k\0")), NOW).await.unwrap();
    let again = store.ingest(&event, Some(&task("k\0")), NOW).await.unwrap();
    assert!(again.duplicate);
    assert_eq!(
        (again.message_id, again.task_id),
        (first.message_id, first.task_id)
    );
    let m = store
        .get_message(MessageId(first.message_id.unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.text.replace('\u{FFFD}', "\0"), text);
    let skipped = store.skipped_messages(None, None, 10).await.unwrap();
    assert_eq!(skipped.len(), 1, "JSON with NUL is still readable");
    let reason = skipped[0].meta["skipped"]["reason"].as_str().unwrap();
    assert_eq!(reason.replace('\u{FFFD}', "\0"), "nul \0 in meta");
}

contract!(
    intake_commits_message_task_and_cursor_together_and_dedups,
    replies_edits_and_deletions_change_the_original,
    a_message_stored_as_context_gets_its_task_when_asked_again,
    concurrent_sights_of_one_message_store_it_once,
    a_batch_stores_its_events_in_order_without_tasks,
    conversations_are_found_listed_and_paged,
    only_answers_keep_their_agent,
    skipped_messages_are_listed_newest_first,
    odd_text_is_stored_and_deduplicated,
);
