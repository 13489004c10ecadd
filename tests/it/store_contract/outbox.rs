//! The outbox: claims in order, delivery once, retries, dead claimants, extra deliveries.

use std::sync::Arc;

use ctxgate::domain::{ConversationId, TaskId};
use ctxgate::store::{Bound, Store};

use super::{NOW, completion, delivery, posted, posted_with, trigger};

const LEASE: i64 = 30_000;

/// A completed task with a delivery keyed `key`; returns (conversation, task).
async fn answered(store: &Arc<dyn Store>, conv: &str, id: &str, key: &str) -> (i64, TaskId) {
    let (c, _, t) = trigger(store, conv, id, "question").await;
    let claimed = store.claim_task("w", NOW, 60_000).await.unwrap().unwrap();
    assert_eq!(claimed.id, t);
    let mut done = completion(t, "w", &format!("answer {key}"));
    done.delivery = Some(delivery(key, &format!("answer {key}")));
    assert!(store.complete_task(&done, NOW).await.unwrap());
    (c, t)
}

async fn deliveries_are_claimed_in_order_and_delivered_once(store: Arc<dyn Store>) {
    let (conv, t1) = answered(&store, "a", "1", "k1").await;
    let (_, t2) = answered(&store, "b", "1", "k2").await;
    assert_eq!(store.backlog().await.unwrap(), (0, 0, 2));

    let first = store
        .claim_delivery("o1", NOW, LEASE, 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (first.task_id, first.idempotency_key.as_str()),
        (Some(t1), "k1")
    );
    assert_eq!((first.status.as_str(), first.attempts), ("delivering", 1));
    assert_eq!(first.conversation, "a");
    let second = store
        .claim_delivery("o2", NOW, LEASE, 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.task_id, Some(t2));
    assert!(
        store
            .claim_delivery("o3", NOW, LEASE, 3)
            .await
            .unwrap()
            .is_none()
    );

    assert!(
        !store
            .delivery_succeeded(first.id, "o2", Some("m-1"), NOW + 1)
            .await
            .unwrap()
    );
    assert!(
        store
            .delivery_succeeded(first.id, "o1", Some("m-1"), NOW + 1)
            .await
            .unwrap()
    );
    assert!(
        !store
            .delivery_succeeded(first.id, "o1", Some("m-1"), NOW + 2)
            .await
            .unwrap()
    );
    let d = &store.deliveries_for_task(t1).await.unwrap()[0];
    assert_eq!(
        (d.status.as_str(), d.delivered_at),
        ("delivered", Some(NOW + 1))
    );
    assert_eq!(d.channel_message_id.as_deref(), Some("m-1"));
    // The answer in the history now carries the channel's id.
    let conv = ConversationId(conv);
    assert!(store.find_message(conv, "k1").await.unwrap().is_none());
    let answer = store.find_message(conv, "m-1").await.unwrap().unwrap();
    assert_eq!(answer.text, "answer k1");
    assert_eq!(
        store
            .conversation_of_message("talk:main", "m-1")
            .await
            .unwrap()
            .as_deref(),
        Some("a")
    );
    assert_eq!(
        store
            .conversation_of_message("talk:main", "1")
            .await
            .unwrap()
            .as_deref(),
        Some("a"),
        "received messages too"
    );
    assert_eq!(
        store.conversation_of_message("email", "m-1").await.unwrap(),
        None
    );

    // Delivered without an id on the channel: the history keeps the delivery key.
    assert!(
        store
            .delivery_succeeded(second.id, "o2", None, NOW + 3)
            .await
            .unwrap()
    );
    let b = store
        .find_conversation("talk:main", "b")
        .await
        .unwrap()
        .unwrap();
    assert!(store.find_message(b.id, "k2").await.unwrap().is_some());
    assert_eq!(store.backlog().await.unwrap(), (0, 0, 0));
}

async fn a_delivery_seen_by_the_poller_first_keeps_both_messages(store: Arc<dyn Store>) {
    let (conv, _) = answered(&store, "a", "1", "k1").await;
    // The poller saw the posted answer (id m-9) before the delivery was marked.
    let seen = posted_with("a", "m-9", "answer k1", |m| {
        m.sender_kind = ctxgate_contract::SenderKind::SelfBot;
        m.trigger = false;
    });
    store.ingest(&seen, None, NOW).await.unwrap();
    let d = store
        .claim_delivery("o", NOW, LEASE, 3)
        .await
        .unwrap()
        .unwrap();
    assert!(
        store
            .delivery_succeeded(d.id, "o", Some("m-9"), NOW + 1)
            .await
            .unwrap()
    );
    let conv = ConversationId(conv);
    assert!(
        store.find_message(conv, "k1").await.unwrap().is_some(),
        "left as it was"
    );
    assert!(store.find_message(conv, "m-9").await.unwrap().is_some());
    let d = &store.deliveries_for_task(d.task_id.unwrap()).await.unwrap()[0];
    assert_eq!(d.status, "delivered");
}

async fn failed_deliveries_retry_or_end_undelivered(store: Arc<dyn Store>) {
    let (conv, t) = answered(&store, "a", "1", "k1").await;
    let d = store
        .claim_delivery("o", NOW, LEASE, 3)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !store
            .delivery_failed(d.id, "x", "no", None, NOW)
            .await
            .unwrap()
    );
    assert!(
        store
            .delivery_failed(d.id, "o", "503", Some(NOW + 500), NOW)
            .await
            .unwrap()
    );
    let r = &store.deliveries_for_task(t).await.unwrap()[0];
    assert_eq!((r.status.as_str(), r.available_at), ("pending", NOW + 500));
    assert_eq!(r.last_error.as_deref(), Some("503"));
    assert!(
        store
            .claim_delivery("o", NOW + 499, LEASE, 3)
            .await
            .unwrap()
            .is_none()
    );
    let again = store
        .claim_delivery("o", NOW + 500, LEASE, 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.attempts, 2);
    assert!(
        store
            .delivery_failed(again.id, "o", "gone", None, NOW + 501)
            .await
            .unwrap()
    );
    let r = &store.deliveries_for_task(t).await.unwrap()[0];
    assert_eq!(
        (r.status.as_str(), r.last_error.as_deref()),
        ("failed", Some("gone"))
    );
    // Never delivered: still history, but out of every context.
    let m = store
        .find_message(ConversationId(conv), "k1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.kind, "undelivered");
    assert!(
        store
            .claim_delivery("o", NOW + 10_000, LEASE, 3)
            .await
            .unwrap()
            .is_none()
    );
}

async fn a_dead_claimants_delivery_returns_until_its_attempts_are_used(store: Arc<dyn Store>) {
    let (_, t) = answered(&store, "a", "1", "k1").await;
    let first = store
        .claim_delivery("dead", NOW, 1000, 2)
        .await
        .unwrap()
        .unwrap();
    assert!(
        store
            .claim_delivery("o", NOW + 1000, 1000, 2)
            .await
            .unwrap()
            .is_none()
    );
    let second = store
        .claim_delivery("o", NOW + 1001, 1000, 2)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((second.id, second.attempts), (first.id, 2));
    assert!(
        !store
            .delivery_succeeded(first.id, "dead", None, NOW + 1002)
            .await
            .unwrap()
    );
    // The second claimant dies too: its attempts are used up.
    assert!(
        store
            .claim_delivery("o", NOW + 3000, 1000, 2)
            .await
            .unwrap()
            .is_none()
    );
    let r = &store.deliveries_for_task(t).await.unwrap()[0];
    assert_eq!(r.status, "failed");
    assert!(
        r.last_error
            .as_deref()
            .unwrap()
            .contains("attempts used up")
    );
}

async fn extra_deliveries_are_queued_once_per_key(store: Arc<dyn Store>) {
    let (_, _, t) = trigger(&store, "a", "1", "slow question").await;
    store.claim_task("w", NOW, 60_000).await.unwrap().unwrap();
    let mut ack = delivery("k1:ack", "working on it");
    ack.kind = "ack".into();
    ack.meta = serde_json::Value::Null;
    assert!(store.enqueue_delivery(t, &ack, NOW).await.unwrap());
    assert!(
        !store.enqueue_delivery(t, &ack, NOW + 1).await.unwrap(),
        "once per key"
    );
    assert!(
        !store
            .enqueue_delivery(TaskId(-1), &delivery("k9", "x"), NOW)
            .await
            .unwrap()
    );
    let mut done = completion(t, "w", "the answer");
    done.delivery = Some(delivery("k1", "the answer"));
    assert!(store.complete_task(&done, NOW + 2).await.unwrap());
    let all = store.deliveries_for_task(t).await.unwrap();
    let keys: Vec<_> = all
        .iter()
        .map(|d| (d.idempotency_key.as_str(), d.kind.as_str()))
        .collect();
    assert_eq!(keys, [("k1:ack", "ack"), ("k1", "result")]);
    assert_eq!(all[0].meta, serde_json::Value::Null);
    let first = store
        .claim_delivery("o", NOW + 2, LEASE, 3)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.kind, "ack", "the acknowledgement goes out first");
    assert!(
        store
            .deliveries_for_task(TaskId(-1))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn answers_join_history_in_task_order(store: Arc<dyn Store>) {
    let (conv, _) = answered(&store, "a", "1", "k1").await;
    store
        .ingest(&posted("a", "2", "next"), None, NOW)
        .await
        .unwrap();
    let history = store
        .messages_before(ConversationId(conv), Bound::all(), 10)
        .await
        .unwrap();
    let texts: Vec<_> = history.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["question", "answer k1", "next"]);
}

/// Whichever instance claims, a conversation's answers go out one at a time and in order: a
/// later answer waits while an earlier one is being delivered or waits for its retry.
async fn a_conversations_deliveries_go_out_one_at_a_time_in_order(store: Arc<dyn Store>) {
    answered(&store, "a", "1", "a1").await;
    answered(&store, "a", "2", "a2").await;
    answered(&store, "b", "1", "b1").await;
    let claim = |owner: &'static str, at: i64| {
        let store = store.clone();
        async move {
            store
                .claim_delivery(owner, at, LEASE, 3)
                .await
                .unwrap()
                .map(|d| (d.id, d.idempotency_key))
        }
    };
    let (a1, key) = claim("i1", NOW).await.unwrap();
    assert_eq!(key, "a1");
    let (b1, key) = claim("i2", NOW).await.unwrap();
    assert_eq!(key, "b1", "a2 waits while a1 is being delivered");
    assert!(claim("i3", NOW).await.is_none());
    assert!(store.delivery_succeeded(b1, "i2", None, NOW).await.unwrap());
    // a1 fails and waits for its retry: a2 still waits behind it.
    assert!(
        store
            .delivery_failed(a1, "i1", "503", Some(NOW + 1_000), NOW)
            .await
            .unwrap()
    );
    assert!(claim("i2", NOW + 1).await.is_none());
    let (again, key) = claim("i2", NOW + 1_000).await.unwrap();
    assert_eq!((again, key.as_str()), (a1, "a1"));
    assert!(claim("i3", NOW + 1_000).await.is_none());
    assert!(
        store
            .delivery_succeeded(a1, "i2", None, NOW + 1_001)
            .await
            .unwrap()
    );
    let (_, key) = claim("i3", NOW + 1_002).await.unwrap();
    assert_eq!(key, "a2");
}

contract!(
    deliveries_are_claimed_in_order_and_delivered_once,
    a_conversations_deliveries_go_out_one_at_a_time_in_order,
    a_delivery_seen_by_the_poller_first_keeps_both_messages,
    failed_deliveries_retry_or_end_undelivered,
    a_dead_claimants_delivery_returns_until_its_attempts_are_used,
    extra_deliveries_are_queued_once_per_key,
    answers_join_history_in_task_order,
);
