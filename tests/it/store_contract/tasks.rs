//! The task queue: claim order per conversation, leases and heartbeats, completion with its
//! delivery, session and history entry, failures and retries, cancel, release.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use ctxgate::domain::{Action, ConversationId, MessageId, TaskId, TaskStatus, Usage};
use ctxgate::store::{Bound, NewTask, SessionRecord, Store};
use ctxgate_contract::{Audience, Role, SenderKind, SourceType};
use serde_json::json;

use super::{NOW, completion, delivery, posted, posted_with, task, trigger};

const LEASE: i64 = 60_000;

async fn tasks_of_one_conversation_run_one_at_a_time_in_order(store: Arc<dyn Store>) {
    let (_, _, a1) = trigger(&store, "a", "1", "a1").await;
    let (_, _, a2) = trigger(&store, "a", "2", "a2").await;
    let (_, _, b1) = trigger(&store, "b", "1", "b1").await;

    let first = store.claim_task("w1", NOW, LEASE).await.unwrap().unwrap();
    assert_eq!(first.id, a1);
    assert_eq!(first.status, TaskStatus::Running);
    assert_eq!(first.attempts, 1);
    assert_eq!(first.lease_owner.as_deref(), Some("w1"));
    assert_eq!(first.lease_expires_at, Some(NOW + LEASE));
    let second = store.claim_task("w2", NOW, LEASE).await.unwrap().unwrap();
    assert_eq!(second.id, b1, "a2 waits behind the running a1");
    assert!(store.claim_task("w3", NOW, LEASE).await.unwrap().is_none());
    assert_eq!(store.backlog().await.unwrap(), (1, 2, 0));

    // A heartbeat keeps a1's lease past its original expiry; b1's worker did not renew, so b1
    // goes to the next worker, and a2 still waits behind a1.
    assert!(
        store
            .heartbeat_task(first.id, "w1", NOW + 50_000, LEASE)
            .await
            .unwrap()
    );
    assert!(
        !store
            .heartbeat_task(first.id, "w3", NOW, LEASE)
            .await
            .unwrap(),
        "not w3's"
    );
    let retaken = store
        .claim_task("w3", NOW + 70_000, LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(retaken.id, b1);
    assert_eq!(retaken.attempts, 2);
    assert!(
        store
            .claim_task("w4", NOW + 70_000, LEASE)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !store
            .heartbeat_task(b1, "w2", NOW + 70_000, LEASE)
            .await
            .unwrap(),
        "w2 lost b1"
    );
    let attempts = store.task_attempts(b1).await.unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        (attempts[0].worker.as_str(), attempts[0].outcome.as_deref()),
        ("w2", Some("lease_expired"))
    );
    assert_eq!(attempts[0].finished_at, Some(NOW + 70_000));
    assert_eq!(
        (attempts[1].attempt, attempts[1].outcome.as_deref()),
        (2, None)
    );

    assert!(
        store
            .complete_task(&completion(a1, "w1", "ok"), NOW + 1)
            .await
            .unwrap()
    );
    let third = store
        .claim_task("w4", NOW + 70_001, LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(third.id, a2);
}

async fn a_task_not_yet_due_holds_back_its_conversation(store: Arc<dyn Store>) {
    let (_, _, a1) = trigger(&store, "a", "1", "a1").await;
    let (_, _, a2) = trigger(&store, "a", "2", "a2").await;
    let t = store.claim_task("w", NOW, LEASE).await.unwrap().unwrap();
    assert_eq!(t.id, a1);
    assert!(
        store
            .fail_attempt(a1, "w", "busy", Some(NOW + 10_000), NOW)
            .await
            .unwrap()
    );
    assert!(
        store
            .claim_task("w", NOW + 1, LEASE)
            .await
            .unwrap()
            .is_none(),
        "a2 waits for the older a1 to run again"
    );
    assert_eq!(
        store
            .claim_task("w", NOW + 10_000, LEASE)
            .await
            .unwrap()
            .unwrap()
            .id,
        a1
    );
    assert!(
        store
            .complete_task(&completion(a1, "w", "ok"), NOW + 10_001)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .claim_task("w", NOW + 10_002, LEASE)
            .await
            .unwrap()
            .unwrap()
            .id,
        a2
    );
}

async fn a_task_whose_lease_expires_on_its_last_attempt_fails(store: Arc<dyn Store>) {
    let mut t = task("k");
    t.max_attempts = 1;
    let r = store
        .ingest(&posted("a", "1", "a1"), Some(&t), NOW)
        .await
        .unwrap();
    let id = TaskId(r.task_id.unwrap());
    store.claim_task("w1", NOW, 1000).await.unwrap().unwrap();
    assert!(
        store
            .claim_task("w2", NOW + 2000, 1000)
            .await
            .unwrap()
            .is_none()
    );
    let t = store.get_task(id).await.unwrap().unwrap();
    assert_eq!(t.status, TaskStatus::Failed);
    assert_eq!(t.finished_at, Some(NOW + 2000));
    assert!(t.last_error.unwrap().contains("lease"));
    assert_eq!((t.lease_owner, t.lease_expires_at), (None, None));
    assert!(
        !store
            .complete_task(&completion(id, "w1", "late"), NOW + 3000)
            .await
            .unwrap()
    );
}

async fn completing_records_usage_delivery_session_and_history(store: Arc<dyn Store>) {
    let trigger_msg = posted_with("room", "1", "what now?", |m| m.sender_id = "bob".into());
    let r = store
        .ingest(&trigger_msg, Some(&task("k1")), NOW)
        .await
        .unwrap();
    let (conv, id) = (
        ConversationId(r.conversation_id),
        TaskId(r.task_id.unwrap()),
    );
    store.claim_task("w", NOW, LEASE).await.unwrap().unwrap();
    let mut done = completion(id, "w", "the answer");
    done.actions = vec![Action {
        name: "search".into(),
        detail: Some("docs".into()),
    }];
    done.triage_usage = Some(Usage {
        prompt_tokens: 2,
        completion_tokens: 1,
    });
    done.cost = Some(0.25);
    done.delivery = Some(delivery("ctxgate:1:result", "the answer"));
    done.session = Some(SessionRecord {
        conversation_id: conv,
        agent: "default".into(),
        brain: "cli".into(),
        session_id: "s-1".into(),
        last_injected: MessageId(r.message_id.unwrap()),
        prompt_hash: "p1".into(),
        input_tokens: 2,
        started_at: 0,
        updated_at: 0,
        renew_reason: None,
    });
    assert!(
        !store
            .complete_task(&completion(id, "other", "x"), NOW)
            .await
            .unwrap()
    );
    assert!(store.complete_task(&done, NOW + 5).await.unwrap());
    assert!(
        !store.complete_task(&done, NOW + 6).await.unwrap(),
        "only once"
    );

    let t = store.get_task(id).await.unwrap().unwrap();
    assert_eq!(t.status, TaskStatus::Completed);
    assert_eq!(t.result_text.as_deref(), Some("the answer"));
    assert_eq!(t.actions, done.actions);
    assert_eq!(t.context, Some(json!({"why": "test"})));
    assert_eq!(t.usage, Some(done.usage));
    assert_eq!(t.triage_usage, done.triage_usage);
    assert_eq!(t.cost, Some(0.25));
    assert_eq!((t.finished_at, t.updated_at), (Some(NOW + 5), NOW + 5));
    assert_eq!((t.lease_owner, t.last_error), (None, None));
    let attempts = store.task_attempts(id).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome.as_deref(), Some("completed"));

    let deliveries = store.deliveries_for_task(id).await.unwrap();
    assert_eq!(deliveries.len(), 1);
    let d = &deliveries[0];
    assert_eq!((d.task_id, d.conversation_id), (Some(id), conv));
    assert_eq!(
        (d.conversation.as_str(), d.channel.as_str()),
        ("room", "talk:main")
    );
    assert_eq!(
        (d.idempotency_key.as_str(), d.kind.as_str()),
        ("ctxgate:1:result", "result")
    );
    assert_eq!(
        (d.text.as_str(), d.reply_to.as_deref()),
        ("the answer", Some("1"))
    );
    assert_eq!(d.meta, json!({"room": "r"}));
    assert_eq!((d.status.as_str(), d.attempts), ("pending", 0));
    assert_eq!(
        (d.available_at, d.created_at, d.delivered_at),
        (NOW + 5, NOW + 5, None)
    );

    // The answer is history at once, addressed to the asker and the agent.
    let history = store.messages_before(conv, Bound::all(), 10).await.unwrap();
    assert_eq!(history.len(), 2);
    let answer = &history[1];
    assert_eq!(answer.channel_message_id, "ctxgate:1:result");
    assert_eq!(
        (answer.role, answer.sender_kind),
        (Role::Assistant, SenderKind::SelfBot)
    );
    assert_eq!(
        (answer.sender_id.as_str(), answer.agent.as_deref()),
        ("default", Some("default"))
    );
    assert_eq!(
        (answer.kind.as_str(), answer.text.as_str()),
        ("message", "the answer")
    );
    assert_eq!(answer.reply_to_message_id, Some(history[0].id));
    assert_eq!(answer.reply_to_channel_id.as_deref(), Some("1"));
    assert_eq!(
        (answer.task_id, answer.source_type),
        (Some(id), Some(SourceType::Talk))
    );
    assert_eq!(answer.actions, done.actions);
    assert_eq!(answer.created_at, NOW + 5);
    assert_eq!(
        answer.audience,
        Audience::Addressed {
            agents: vec!["default".into()],
            users: vec!["bob".into()]
        }
    );

    assert_eq!(
        store.get_session(conv, "default").await.unwrap(),
        done.session.clone().map(|s| SessionRecord {
            started_at: NOW + 5,
            updated_at: NOW + 5,
            ..s
        })
    );
    assert_eq!(store.get_session(conv, "other").await.unwrap(), None);
    // A later session replaces the remembered one.
    let (_, m2, t2) = trigger(&store, "room", "2", "more").await;
    store
        .claim_task("w", NOW + 10, LEASE)
        .await
        .unwrap()
        .unwrap();
    let mut next = completion(t2, "w", "more answer");
    let session = SessionRecord {
        conversation_id: conv,
        agent: "default".into(),
        brain: "cli".into(),
        session_id: "s-2".into(),
        last_injected: MessageId(m2),
        prompt_hash: "p2".into(),
        input_tokens: 30,
        started_at: 0,
        updated_at: 0,
        renew_reason: None,
    };
    next.session = Some(session.clone());
    assert!(store.complete_task(&next, NOW + 11).await.unwrap());
    // A new session starts now (started_at 0 = "now"); the store stamps its last use.
    let stored = SessionRecord {
        started_at: NOW + 11,
        updated_at: NOW + 11,
        ..session
    };
    assert_eq!(
        store.get_session(conv, "default").await.unwrap(),
        Some(stored.clone())
    );
    // An admin reset marks it; nothing else changes until the agent's next task.
    assert_eq!(
        store
            .reset_sessions("default", Some(conv), "admin_reset")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .reset_sessions("nobody", None, "admin_reset")
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .get_session(conv, "default")
            .await
            .unwrap()
            .unwrap()
            .renew_reason
            .as_deref(),
        Some("admin_reset")
    );
    let activity = store.agent_activity().await.unwrap();
    let default = activity.iter().find(|a| a.agent == "default").unwrap();
    assert_eq!(
        (
            default.sessions,
            default.max_session_input_tokens,
            default.running
        ),
        (1, 30, 0)
    );
    assert_eq!(default.last_outcome.as_deref(), Some("completed"));
    assert_eq!(default.newest_session_started_at, Some(NOW + 11));
    let keyed = store
        .find_message(conv, &format!("ctxgate:task:{t2}:result"))
        .await
        .unwrap();
    assert_eq!(
        keyed.unwrap().text,
        "more answer",
        "no delivery: the task's own key"
    );
}

async fn a_silent_completion_adds_nothing_to_history(store: Arc<dyn Store>) {
    let (conv, _, id) = trigger(&store, "room", "1", "anything new?").await;
    store.claim_task("w", NOW, LEASE).await.unwrap().unwrap();
    let mut done = completion(id, "w", "NOTHING_TO_REPORT");
    done.silent = true;
    assert!(store.complete_task(&done, NOW + 1).await.unwrap());
    assert_eq!(
        store
            .messages_before(ConversationId(conv), Bound::all(), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(store.deliveries_for_task(id).await.unwrap().is_empty());
}

async fn failed_attempts_retry_then_fail_for_good(store: Arc<dyn Store>) {
    let (_, _, id) = trigger(&store, "a", "1", "x").await;
    store.claim_task("w1", NOW, LEASE).await.unwrap().unwrap();
    assert!(
        !store.fail_attempt(id, "w2", "no", None, NOW).await.unwrap(),
        "not w2's"
    );
    assert!(
        store
            .fail_attempt(id, "w1", "timeout", Some(NOW + 1000), NOW + 1)
            .await
            .unwrap()
    );
    let t = store.get_task(id).await.unwrap().unwrap();
    assert_eq!(
        (t.status, t.available_at, t.finished_at),
        (TaskStatus::Pending, NOW + 1000, None)
    );
    assert_eq!(
        (t.last_error.as_deref(), t.lease_owner),
        (Some("timeout"), None)
    );
    assert!(
        store
            .claim_task("w1", NOW + 999, LEASE)
            .await
            .unwrap()
            .is_none()
    );
    let again = store
        .claim_task("w2", NOW + 1000, LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.attempts, 2);
    assert!(
        store
            .fail_attempt(id, "w2", "broken", None, NOW + 1001)
            .await
            .unwrap()
    );
    let t = store.get_task(id).await.unwrap().unwrap();
    assert_eq!(
        (t.status, t.finished_at),
        (TaskStatus::Failed, Some(NOW + 1001))
    );
    assert!(
        !store
            .fail_attempt(id, "w2", "again", None, NOW + 1002)
            .await
            .unwrap()
    );
    let attempts = store.task_attempts(id).await.unwrap();
    let summary: Vec<_> = attempts
        .iter()
        .map(|a| {
            (
                a.attempt,
                a.worker.as_str(),
                a.outcome.as_deref(),
                a.error.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (1, "w1", Some("retry"), Some("timeout")),
            (2, "w2", Some("failed"), Some("broken"))
        ]
    );
    assert!(
        store
            .claim_task("w", NOW + 5000, LEASE)
            .await
            .unwrap()
            .is_none()
    );
}

async fn cancel_retry_and_release(store: Arc<dyn Store>) {
    let (_, _, a) = trigger(&store, "a", "1", "x").await;
    let (_, _, b) = trigger(&store, "b", "1", "y").await;
    assert!(store.cancel_task(a, NOW + 1).await.unwrap());
    assert!(
        !store.cancel_task(a, NOW + 2).await.unwrap(),
        "no longer pending"
    );
    let t = store.get_task(a).await.unwrap().unwrap();
    assert_eq!(
        (t.status, t.finished_at),
        (TaskStatus::Cancelled, Some(NOW + 1))
    );
    assert!(
        !store.retry_task(b, 1, NOW).await.unwrap(),
        "pending: nothing to retry"
    );
    assert!(store.retry_task(a, 2, NOW + 3).await.unwrap());
    let t = store.get_task(a).await.unwrap().unwrap();
    assert_eq!(
        (t.status, t.max_attempts, t.finished_at),
        (TaskStatus::Pending, 2, None)
    );
    assert_eq!(t.available_at, NOW + 3);

    let running = store
        .claim_task("w", NOW + 3, LEASE)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !store.cancel_task(running.id, NOW + 4).await.unwrap(),
        "running tasks stay"
    );
    assert!(
        !store
            .release_task(running.id, "other", NOW + 4)
            .await
            .unwrap()
    );
    assert!(store.release_task(running.id, "w", NOW + 4).await.unwrap());
    let t = store.get_task(running.id).await.unwrap().unwrap();
    assert_eq!(
        (t.status, t.attempts, t.lease_owner),
        (TaskStatus::Pending, 0, None)
    );
    assert!(
        store.task_attempts(running.id).await.unwrap().is_empty(),
        "not counted"
    );
    let again = store
        .claim_task("w", NOW + 5, LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.id, again.attempts), (running.id, 1));
    assert_eq!(store.task_attempts(running.id).await.unwrap()[0].attempt, 1);
}

async fn concurrent_claimers_keep_each_conversation_in_order(store: Arc<dyn Store>) {
    let mut expected: HashMap<i64, Vec<TaskId>> = HashMap::new();
    for round in 0..6 {
        for conv in ["a", "b", "c", "d"] {
            let (c, _, t) = trigger(&store, conv, &round.to_string(), "x").await;
            expected.entry(c).or_default().push(t);
        }
    }
    let running: Arc<Mutex<HashSet<i64>>> = Arc::default();
    let order: Arc<Mutex<HashMap<i64, Vec<TaskId>>>> = Arc::default();
    let mut claimers = Vec::new();
    for w in 0..6 {
        let (store, running, order) = (store.clone(), running.clone(), order.clone());
        claimers.push(tokio::spawn(async move {
            let worker = format!("w{w}");
            let mut idle = 0;
            while idle < 20 {
                let Some(t) = store.claim_task(&worker, NOW, LEASE).await.unwrap() else {
                    idle += 1;
                    tokio::task::yield_now().await;
                    continue;
                };
                idle = 0;
                let conv = t.conversation_id.0;
                assert!(
                    running.lock().unwrap().insert(conv),
                    "two tasks of conversation {conv} ran at once"
                );
                order.lock().unwrap().entry(conv).or_default().push(t.id);
                tokio::task::yield_now().await;
                running.lock().unwrap().remove(&conv);
                assert!(
                    store
                        .complete_task(&completion(t.id, &worker, "ok"), NOW)
                        .await
                        .unwrap()
                );
            }
        }));
    }
    for c in claimers {
        c.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), expected, "each task once, in order");
    assert_eq!(store.backlog().await.unwrap(), (0, 0, 0));
}

/// One message asking two agents: one task each in one transaction; the agents answer in
/// parallel, while each agent's own tasks in the conversation stay one at a time in order.
async fn agents_of_one_conversation_answer_in_parallel(store: Arc<dyn Store>) {
    let for_agent = |key: &str, agent: &str| NewTask {
        agent: agent.into(),
        ..task(key)
    };
    let first = store
        .ingest_tasks(
            &posted("room", "1", "@a and @b?"),
            &[for_agent("1/a", "a"), for_agent("1/b", "b")],
            NOW,
        )
        .await
        .unwrap();
    assert!(!first.duplicate);
    let again = store
        .ingest_tasks(
            &posted("room", "1", "@a and @b?"),
            &[for_agent("1/a", "a"), for_agent("1/b", "b")],
            NOW,
        )
        .await
        .unwrap();
    assert!(again.duplicate, "both tasks existed");
    assert_eq!(again.task_id, first.task_id);
    store
        .ingest(
            &posted("room", "2", "@a again"),
            Some(&for_agent("2/a", "a")),
            NOW,
        )
        .await
        .unwrap();
    let x = store.claim_task("w1", NOW, LEASE).await.unwrap().unwrap();
    let y = store.claim_task("w2", NOW, LEASE).await.unwrap().unwrap();
    let mut agents = [x.agent.clone(), y.agent.clone()];
    agents.sort();
    assert_eq!(agents, ["a", "b"], "both agents at once");
    assert!(
        store.claim_task("w3", NOW, LEASE).await.unwrap().is_none(),
        "a's second task waits for its first"
    );
    let a_first = if x.agent == "a" { &x } else { &y };
    let worker = if x.agent == "a" { "w1" } else { "w2" };
    assert!(
        store
            .complete_task(&completion(a_first.id, worker, "done"), NOW + 1)
            .await
            .unwrap()
    );
    let next = store
        .claim_task("w3", NOW + 1, LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.agent, "a");
    assert!(next.id.0 > a_first.id.0);
}

contract!(
    agents_of_one_conversation_answer_in_parallel,
    tasks_of_one_conversation_run_one_at_a_time_in_order,
    a_task_not_yet_due_holds_back_its_conversation,
    a_task_whose_lease_expires_on_its_last_attempt_fails,
    completing_records_usage_delivery_session_and_history,
    a_silent_completion_adds_nothing_to_history,
    failed_attempts_retry_then_fail_for_good,
    cancel_retry_and_release,
    concurrent_claimers_keep_each_conversation_in_order,
);
