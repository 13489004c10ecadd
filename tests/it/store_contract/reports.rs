//! What the admin API reads about tasks: filtered, paged lists, the backlog, usage totals.

use std::sync::Arc;

use ctxgate::domain::{ConversationId, TaskId, TaskStatus, Usage};
use ctxgate::store::{Page, Store, TaskFilter, UsageGroup, UsageRow};
use ctxgate_contract::SourceType;

use super::{NOW, completion, posted, posted_with, task, trigger};

const LEASE: i64 = 60_000;

async fn task_lists_filter_and_page(store: Arc<dyn Store>) {
    let (_, _, a1) = trigger(&store, "a", "1", "x").await;
    let (_, _, a2) = trigger(&store, "a", "2", "x").await;
    let mut email = posted("mail", "1", "x");
    email.channel = "email".into();
    let mut t = task("mail/1");
    t.source_type = SourceType::Email;
    let e = store.ingest(&email, Some(&t), NOW + 10).await.unwrap();
    let e1 = TaskId(e.task_id.unwrap());
    assert!(store.cancel_task(a2, NOW).await.unwrap());

    let ids = |filter: TaskFilter| {
        let store = store.clone();
        async move {
            store
                .list_tasks(&filter)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        ids(TaskFilter::default()).await,
        [e1, a2, a1],
        "newest first"
    );
    let status = TaskFilter {
        status: Some(TaskStatus::Pending),
        ..TaskFilter::default()
    };
    assert_eq!(ids(status).await, [e1, a1]);
    let source = TaskFilter {
        source_type: Some(SourceType::Email),
        ..TaskFilter::default()
    };
    assert_eq!(ids(source).await, [e1]);
    let channel = TaskFilter {
        channel: Some("talk:main".into()),
        ..TaskFilter::default()
    };
    assert_eq!(ids(channel).await, [a2, a1]);
    let conversation = TaskFilter {
        conversation: Some(ConversationId(e.conversation_id)),
        ..TaskFilter::default()
    };
    assert_eq!(ids(conversation).await, [e1]);
    let window = TaskFilter {
        created_after: Some(NOW + 1),
        created_before: Some(NOW + 11),
        ..TaskFilter::default()
    };
    assert_eq!(ids(window).await, [e1]);
    let page = TaskFilter {
        page: Page {
            before: Some(e1.0),
            limit: 1,
        },
        ..TaskFilter::default()
    };
    assert_eq!(ids(page).await, [a2]);
    assert_eq!(store.backlog().await.unwrap(), (2, 0, 0));
}

async fn usage_totals_group_tasks_by_key_within_bounds(store: Arc<dyn Store>) {
    const DAY: i64 = 86_400_000;
    let cases = [
        ("a", "1", "alice", "fast", NOW, Some(0.5)),
        ("a", "2", "bob", "fast", NOW + 1, None),
        ("b", "1", "alice", "smart", NOW + DAY, Some(1.0)),
        ("c", "1", "carol", "smart", NOW + 2 * DAY, None),
    ];
    let mut convs = Vec::new();
    for (conv, id, sender, brain, at, cost) in cases {
        let event = posted_with(conv, id, "x", |m| m.sender_id = sender.into());
        let mut t = task(&format!("{conv}/{id}"));
        t.brain = brain.into();
        let r = store.ingest(&event, Some(&t), at).await.unwrap();
        convs.push(r.conversation_id);
        let claimed = store.claim_task("w", at, LEASE).await.unwrap().unwrap();
        let mut done = completion(claimed.id, "w", "ok");
        done.cost = cost;
        if sender == "bob" {
            done.triage_usage = Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 1,
            });
        }
        assert!(store.complete_task(&done, at).await.unwrap());
    }
    let row = |key: &str, tasks: u64, tp: u64, tc: u64, cost: f64| UsageRow {
        key: key.into(),
        tasks,
        prompt_tokens: 10 * tasks,
        completion_tokens: 5 * tasks,
        triage_prompt_tokens: tp,
        triage_completion_tokens: tc,
        cost,
    };
    let by = |g: UsageGroup, since: Option<i64>, until: Option<i64>| {
        let store = store.clone();
        async move { store.usage_totals(g, since, until).await.unwrap() }
    };
    assert_eq!(
        by(UsageGroup::Brain, None, None).await,
        [row("fast", 2, 3, 1, 0.5), row("smart", 2, 0, 0, 1.0)]
    );
    assert_eq!(
        by(UsageGroup::User, None, None).await,
        [
            row("alice", 2, 0, 0, 1.5),
            row("bob", 1, 3, 1, 0.0),
            row("carol", 1, 0, 0, 0.0)
        ]
    );
    assert_eq!(
        by(UsageGroup::Day, None, None).await,
        [
            row("2026-01-01", 2, 3, 1, 0.5),
            row("2026-01-02", 1, 0, 0, 1.0),
            row("2026-01-03", 1, 0, 0, 0.0)
        ]
    );
    assert_eq!(
        by(UsageGroup::Day, Some(NOW + 1), Some(NOW + 2 * DAY)).await,
        [
            row("2026-01-01", 1, 3, 1, 0.0),
            row("2026-01-02", 1, 0, 0, 1.0)
        ],
        "since is inclusive, until exclusive"
    );
    let mut keys: Vec<String> = convs.iter().map(i64::to_string).collect();
    keys.dedup();
    keys.sort();
    let conv_keys: Vec<String> = by(UsageGroup::Conversation, None, None)
        .await
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(conv_keys, keys, "conversation ids as text, sorted as text");
    assert!(
        by(UsageGroup::Brain, Some(NOW + 3 * DAY), None)
            .await
            .is_empty()
    );
}

contract!(
    task_lists_filter_and_page,
    usage_totals_group_tasks_by_key_within_bounds,
);
