//! Reading a conversation's history: pages within bounds, background results, neighbours, and
//! the full-text archive search.

use std::sync::Arc;

use ctxgate::domain::{ConversationId, MessageId, TaskId};
use ctxgate::store::{Bound, MessageRecord, Store};
use ctxgate_contract::{MessageKind, SourceType};

use super::{NOW, completion, deleted, delivery, edited, posted_with, task};

/// Stores `texts` in conversation `conv`, one second apart; returns their ids.
async fn say(
    store: &Arc<dyn Store>,
    conv: &str,
    texts: &[&str],
) -> (ConversationId, Vec<MessageId>) {
    say_from(store, conv, 0, texts).await
}

/// `say`, numbering the messages (channel ids and seconds) from `first`.
async fn say_from(
    store: &Arc<dyn Store>,
    conv: &str,
    first: usize,
    texts: &[&str],
) -> (ConversationId, Vec<MessageId>) {
    let mut ids = Vec::new();
    let mut conversation = ConversationId(0);
    for (i, text) in texts.iter().enumerate().map(|(i, t)| (i + first, t)) {
        let at = NOW + 1000 * i as i64;
        let event = posted_with(conv, &format!("{conv}-{i}"), text, |m| {
            m.timestamp = super::at(at);
            m.trigger = false;
        });
        let r = store.ingest(&event, None, at).await.unwrap();
        conversation = ConversationId(r.conversation_id);
        ids.push(MessageId(r.message_id.unwrap()));
    }
    (conversation, ids)
}

fn texts(messages: &[MessageRecord]) -> Vec<&str> {
    messages.iter().map(|m| m.text.as_str()).collect()
}

async fn pages_of_history_honour_their_bounds(store: Arc<dyn Store>) {
    let (conv, ids) = say(&store, "a", &["m0", "m1", "m2", "m3", "m4"]).await;
    say(&store, "other", &["x0", "x1"]).await;
    let page = |bound: Bound, limit: usize| {
        let store = store.clone();
        async move { store.messages_before(conv, bound, limit).await.unwrap() }
    };
    assert_eq!(
        texts(&page(Bound::all(), 3).await),
        ["m2", "m3", "m4"],
        "newest, oldest first"
    );
    assert_eq!(texts(&page(Bound::all(), 10).await).len(), 5);
    assert_eq!(texts(&page(Bound::before(ids[3]), 2).await), ["m1", "m2"]);
    let until = Bound {
        until_ms: Some(NOW + 1000),
        ..Bound::all()
    };
    assert_eq!(
        texts(&page(until, 10).await),
        ["m0", "m1"],
        "until is inclusive"
    );
    assert!(page(Bound::before(ids[0]), 10).await.is_empty());
    assert!(page(Bound::all(), 0).await.is_empty());
}

async fn later_answers_to_earlier_messages_can_join_a_page(store: Arc<dyn Store>) {
    // q1 is being answered while q2 arrives; the answer is stored after q2.
    let q1 = store
        .ingest(
            &posted_with("a", "q1", "first question", |_| {}),
            Some(&task("q1")),
            NOW,
        )
        .await
        .unwrap();
    let q2 = store
        .ingest(
            &posted_with("a", "q2", "second question", |_| {}),
            Some(&task("q2")),
            NOW,
        )
        .await
        .unwrap();
    let claimed = store.claim_task("w", NOW, 60_000).await.unwrap().unwrap();
    assert_eq!(Some(claimed.id.0), q1.task_id);
    assert!(
        store
            .complete_task(&completion(claimed.id, "w", "first answer"), NOW + 1)
            .await
            .unwrap()
    );
    let conv = ConversationId(q1.conversation_id);
    let q2_id = MessageId(q2.message_id.unwrap());
    let plain = store
        .messages_before(conv, Bound::before(q2_id), 10)
        .await
        .unwrap();
    assert_eq!(texts(&plain), ["first question"]);
    let with = Bound {
        with_later_answers: true,
        ..Bound::before(q2_id)
    };
    let page = store.messages_before(conv, with, 10).await.unwrap();
    assert_eq!(texts(&page), ["first question", "first answer"]);
    let too_early = Bound {
        until_ms: Some(NOW),
        ..with
    };
    assert_eq!(
        texts(&store.messages_before(conv, too_early, 10).await.unwrap()),
        ["first question"]
    );
    assert_eq!(
        texts(&store.messages_before(conv, with, 1).await.unwrap()),
        ["first answer"]
    );
}

/// A briefing run `run` answered with a delivery of `kind`; returns its conversation.
async fn brief(store: &Arc<dyn Store>, run: i64, kind: &str) -> ConversationId {
    let event = posted_with("a", &format!("b{run}"), "brief me", |m| {
        m.source_type = SourceType::Briefing;
    });
    let mut t = task(&format!("brief{run}"));
    t.source_type = SourceType::Briefing;
    let r = store.ingest(&event, Some(&t), NOW).await.unwrap();
    let id = TaskId(r.task_id.unwrap());
    store.claim_task("w", NOW, 60_000).await.unwrap().unwrap();
    let mut done = completion(id, "w", &format!("briefing {run} ({kind})"));
    let mut d = delivery(&format!("brief{run}:{kind}"), "x");
    d.kind = kind.into();
    done.delivery = Some(d);
    assert!(store.complete_task(&done, NOW + run).await.unwrap());
    ConversationId(r.conversation_id)
}

async fn background_results_are_delivered_briefing_answers_only(store: Arc<dyn Store>) {
    let conv = brief(&store, 1, "result").await;
    brief(&store, 2, "ack").await;
    brief(&store, 3, "result").await;
    store
        .ingest(
            &posted_with("a", "u", "hello", |m| m.trigger = false),
            None,
            NOW,
        )
        .await
        .unwrap();
    let results = store
        .background_results(conv, Bound::all(), 10)
        .await
        .unwrap();
    assert_eq!(
        texts(&results),
        ["briefing 1 (result)", "briefing 3 (result)"]
    );
    assert!(
        results
            .iter()
            .all(|m| m.source_type == Some(SourceType::Briefing))
    );
    let newest = store
        .background_results(conv, Bound::all(), 1)
        .await
        .unwrap();
    assert_eq!(texts(&newest), ["briefing 3 (result)"]);
    let history = store.messages_before(conv, Bound::all(), 20).await.unwrap();
    assert_eq!(history.len(), 7, "everything stays in the history");
    let ack = history
        .iter()
        .find(|m| m.text == "briefing 2 (ack)")
        .unwrap();
    assert_eq!(ack.kind, MessageKind::Ack.as_str());
}

async fn neighbours_surround_a_message(store: Arc<dyn Store>) {
    let (conv, ids) = say(&store, "a", &["m0", "m1", "m2", "m3", "m4", "m5"]).await;
    say(&store, "b", &["x"]).await;
    let near = store.neighbours(conv, ids[2], 2).await.unwrap();
    assert_eq!(texts(&near), ["m0", "m1", "m3", "m4"]);
    assert_eq!(
        texts(&store.neighbours(conv, ids[0], 1).await.unwrap()),
        ["m1"]
    );
    assert_eq!(
        texts(&store.neighbours(conv, ids[5], 3).await.unwrap()),
        ["m2", "m3", "m4"]
    );
    assert!(store.neighbours(conv, ids[2], 0).await.unwrap().is_empty());
}

async fn archive_search_ranks_matches_within_bounds(store: Arc<dyn Store>) {
    let (conv, ids) = say(
        &store,
        "a",
        &[
            "We planned the Berlin trip for May", // 0: both terms
            "Berlin is lovely in spring",         // 1: one term
            "The trips to Rome were long",        // 2: stemmed term
            "Nothing to see here",                // 3
            "Secret password is swordfish",       // 4: deleted below
            "Old words, edited below",            // 5
            "And another Berlin trip, later on",  // 6
        ],
    )
    .await;
    say(&store, "b", &["Berlin trip in conversation b"]).await;
    store
        .ingest(&deleted("a", "a-4", NOW), None, NOW)
        .await
        .unwrap();
    store
        .ingest(&edited("a", "a-5", "Now about Munich", NOW), None, NOW)
        .await
        .unwrap();
    let search = |q: &'static str, bound: Bound, limit: usize| {
        let store = store.clone();
        async move { store.archive_search(conv, q, bound, limit).await.unwrap() }
    };
    let q = "\"berlin\" OR \"trip\"";
    let hits = search(q, Bound::all(), 10).await;
    let found: Vec<MessageId> = hits.iter().map(|h| h.message.id).collect();
    let mut sorted = found.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [ids[0], ids[1], ids[2], ids[6]],
        "this conversation's matches only"
    );
    assert!(
        [ids[0], ids[6]].contains(&found[0]),
        "a message with both terms ranks first: {found:?}"
    );
    assert!(hits.iter().all(|h| h.score > 0.0));
    assert!(
        hits.windows(2).all(|w| w[0].score >= w[1].score),
        "best first"
    );
    assert_eq!(search(q, Bound::all(), 2).await.len(), 2);

    // Bounds: ids below `before`, written at or before `until_ms`.
    let before: Vec<_> = search(q, Bound::before(ids[6]), 10)
        .await
        .iter()
        .map(|h| h.message.id)
        .collect();
    assert_eq!(before.len(), 3);
    assert!(!before.contains(&ids[6]));
    let until = Bound {
        until_ms: Some(NOW + 1000),
        ..Bound::all()
    };
    let early: Vec<_> = search(q, until, 10)
        .await
        .iter()
        .map(|h| h.message.id)
        .collect();
    assert_eq!(early.len(), 2);
    assert!(early.contains(&ids[0]) && early.contains(&ids[1]));

    // Deleted messages are never found; edits are searched by their new text.
    assert!(search("\"swordfish\"", Bound::all(), 10).await.is_empty());
    assert_eq!(search("\"munich\"", Bound::all(), 10).await.len(), 1);
    assert!(search("\"words\"", Bound::all(), 10).await.is_empty());
    // Plain words, phrases and operators of the FTS5 syntax.
    assert_eq!(search("rome", Bound::all(), 10).await.len(), 1);
    assert_eq!(search("\"berlin trip\"", Bound::all(), 10).await.len(), 2);
    assert_eq!(search("berlin NOT may", Bound::all(), 10).await.len(), 2);
    assert_eq!(
        search("berlin AND spring", Bound::all(), 10).await[0]
            .message
            .id,
        ids[1]
    );
    assert!(search("\"zebra\"", Bound::all(), 10).await.is_empty());
}

async fn archive_search_keeps_up_with_new_edited_and_deleted_messages(store: Arc<dyn Store>) {
    let (conv, ids) = say(&store, "a", &["alpha one", "beta one"]).await;
    let count = |q: &'static str| {
        let store = store.clone();
        async move {
            store
                .archive_search(conv, q, Bound::all(), 10)
                .await
                .unwrap()
                .len()
        }
    };
    assert_eq!(count("alpha").await, 1);
    // After a search has indexed them: new messages, an edit and a deletion.
    say_from(&store, "a", 2, &["unrelated", "alpha two", "gamma three"]).await;
    store
        .ingest(&edited("a", "a-0", "delta one", NOW), None, NOW)
        .await
        .unwrap();
    store
        .ingest(&deleted("a", "a-4", NOW), None, NOW)
        .await
        .unwrap();
    assert_eq!(
        count("alpha").await,
        1,
        "the edit moved a-0 away from alpha"
    );
    assert_eq!(count("delta").await, 1);
    assert_eq!(count("gamma").await, 0, "deleted");
    assert_eq!(count("beta").await, 1);
    let hit = store
        .archive_search(conv, "alpha", Bound::all(), 10)
        .await
        .unwrap();
    assert_eq!(hit[0].message.text, "alpha two");
    assert_ne!(hit[0].message.id, ids[0]);
}

contract!(
    pages_of_history_honour_their_bounds,
    later_answers_to_earlier_messages_can_join_a_page,
    background_results_are_delivered_briefing_answers_only,
    neighbours_surround_a_message,
    archive_search_ranks_matches_within_bounds,
    archive_search_keeps_up_with_new_edited_and_deleted_messages,
);
