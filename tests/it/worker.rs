//! Durable tasks through the real worker: lease expiry after a worker dies, retries with
//! backoff, permanent failures, graceful hand-back on shutdown.

use std::time::Duration;

use ctxgate::brain::{BrainError, Step};
use ctxgate::domain::{TaskId, TaskStatus, Usage};
use ctxgate::outbox::DeliverOnce;
use ctxgate::store::Completion;
use ctxgate::worker::{Outcome, RunOnce};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{spawn_app, spawn_app_with};

async fn submit(app: &crate::helpers::TestApp, body: Value) -> TaskId {
    let r = app.post_webhook(&body).await;
    assert_eq!(r.status(), 202);
    TaskId(
        r.json::<Value>().await.unwrap()["task_id"]
            .as_i64()
            .unwrap(),
    )
}

#[tokio::test]
async fn a_worker_killed_mid_task_leads_to_one_answer_not_two() {
    let app = spawn_app().await;
    let callback = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .expect(1)
        .mount(&callback)
        .await;
    app.brain.then(Step::Hang).then_reply("the one answer");
    let task = submit(
        &app,
        json!({"conversation": "c", "sender": "u", "text": "hi",
               "callback_url": format!("{}/cb", callback.uri())}),
    )
    .await;

    // Worker A claims the task and dies while the brain is thinking.
    let doomed = app.worker("worker-a");
    let running = tokio::spawn(async move { doomed.run_once().await });
    app.brain.wait_for_calls(1).await;
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    let t = app.deps.store.get_task(task).await.unwrap().unwrap();
    assert_eq!(t.status, TaskStatus::Running);
    assert_eq!(t.lease_owner.as_deref(), Some("worker-a"));

    // While the lease holds, nobody else may take it.
    let b = app.worker("worker-b");
    assert_eq!(b.run_once().await.unwrap(), RunOnce::Empty);
    // Once it expires, worker B takes over and answers.
    app.advance(Duration::from_secs(61));
    assert_eq!(
        b.run_once().await.unwrap(),
        RunOnce::Processed {
            task,
            outcome: Outcome::Completed
        }
    );

    // A late completion from the dead worker is refused: no second answer.
    let late = Completion {
        task_id: task,
        worker: "worker-a".into(),
        text: "a second answer".into(),
        actions: vec![],
        usage: Usage::default(),
        triage_usage: None,
        cost: None,
        context: json!({}),
        delivery: None,
        session: None,
        silent: false,
    };
    assert!(
        !app.deps
            .store
            .complete_task(&late, app.clock.now_ms())
            .await
            .unwrap()
    );

    let outbox = app.outbox();
    assert!(matches!(
        outbox.run_once().await.unwrap(),
        DeliverOnce::Delivered(_)
    ));
    assert_eq!(outbox.run_once().await.unwrap(), DeliverOnce::Empty);
    let t = app.deps.store.get_task(task).await.unwrap().unwrap();
    assert_eq!(t.result_text.as_deref(), Some("the one answer"));
    assert_eq!(t.attempts, 2);
    let attempts = app.deps.store.task_attempts(task).await.unwrap();
    let outcomes: Vec<_> = attempts.iter().map(|a| a.outcome.as_deref()).collect();
    assert_eq!(outcomes, vec![Some("lease_expired"), Some("completed")]);
}

#[tokio::test]
async fn transient_errors_retry_on_the_backoff_schedule_then_fail() {
    let app = spawn_app().await;
    for _ in 0..3 {
        app.brain.then(Step::Fail(BrainError::Transient {
            message: "503 from provider".into(),
            retry_after: None,
        }));
    }
    let task = submit(
        &app,
        json!({"conversation": "c", "sender": "u", "text": "hi"}),
    )
    .await;
    let w = app.worker("w");
    let retrying = RunOnce::Processed {
        task,
        outcome: Outcome::Retrying,
    };
    assert_eq!(w.run_once().await.unwrap(), retrying);
    // Default backoff: 1 minute before attempt 2, 4 minutes before attempt 3.
    app.advance(Duration::from_secs(59));
    assert_eq!(w.run_once().await.unwrap(), RunOnce::Empty);
    app.advance(Duration::from_secs(1));
    assert_eq!(w.run_once().await.unwrap(), retrying);
    app.advance(Duration::from_secs(239));
    assert_eq!(w.run_once().await.unwrap(), RunOnce::Empty);
    app.advance(Duration::from_secs(1));
    assert_eq!(
        w.run_once().await.unwrap(),
        RunOnce::Processed {
            task,
            outcome: Outcome::Failed
        }
    );
    let t = app.deps.store.get_task(task).await.unwrap().unwrap();
    assert_eq!(t.status, TaskStatus::Failed);
    assert_eq!(t.attempts, 3);
    assert!(t.last_error.unwrap().contains("503 from provider"));
    assert!(
        app.deps
            .store
            .deliveries_for_task(task)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn retry_after_longer_than_the_backoff_wins() {
    let app = spawn_app().await;
    app.brain.then(Step::Fail(BrainError::Transient {
        message: "429".into(),
        retry_after: Some(Duration::from_secs(600)),
    }));
    let task = submit(
        &app,
        json!({"conversation": "c", "sender": "u", "text": "hi"}),
    )
    .await;
    let w = app.worker("w");
    w.run_once().await.unwrap();
    let t = app.deps.store.get_task(task).await.unwrap().unwrap();
    assert_eq!(t.available_at, app.clock.now_ms() + 600_000);
}

#[tokio::test]
async fn permanent_errors_fail_at_once() {
    let app = spawn_app().await;
    app.brain
        .then(Step::Fail(BrainError::Permanent("400 bad request".into())));
    let task = submit(
        &app,
        json!({"conversation": "c", "sender": "u", "text": "hi"}),
    )
    .await;
    assert_eq!(
        app.worker("w").run_once().await.unwrap(),
        RunOnce::Processed {
            task,
            outcome: Outcome::Failed
        }
    );
    let t = app.deps.store.get_task(task).await.unwrap().unwrap();
    assert_eq!((t.status, t.attempts), (TaskStatus::Failed, 1));
}

#[tokio::test]
async fn a_task_for_an_unknown_brain_fails_with_a_clear_error() {
    let app = spawn_app_with(|s| {
        s.brains.insert("other".into(), Default::default());
        s.webhooks.get_mut("default").unwrap().brain = "other".into();
    })
    .await;
    // "other" is configured (echo) but the test replaced only "default": it still answers.
    let task = submit(
        &app,
        json!({"conversation": "c", "sender": "u", "text": "hi"}),
    )
    .await;
    assert_eq!(
        app.worker("w").run_once().await.unwrap(),
        RunOnce::Processed {
            task,
            outcome: Outcome::Completed
        }
    );
    let t = app.deps.store.get_task(task).await.unwrap().unwrap();
    assert_eq!(t.brain, "other");
    assert!(t.result_text.unwrap().starts_with("echo: hi"));
    assert!(
        app.brain.requests().is_empty(),
        "the default brain was not asked"
    );
}

#[tokio::test]
async fn shutdown_hands_a_running_task_back_after_the_grace_period() {
    let app = spawn_app_with(|s| s.worker.shutdown_grace = Duration::from_millis(50)).await;
    app.brain.then(Step::Hang);
    let task = submit(
        &app,
        json!({"conversation": "c", "sender": "u", "text": "hi"}),
    )
    .await;
    let running = tokio::spawn(app.worker("w").run());
    app.brain.wait_for_calls(1).await;
    app.deps.shutdown.cancel();
    running.await.unwrap();
    let t = app.deps.store.get_task(task).await.unwrap().unwrap();
    assert_eq!(t.status, TaskStatus::Pending);
    assert_eq!(t.attempts, 0, "an interrupted attempt does not count");
    assert_eq!(t.lease_owner, None);
}

#[tokio::test]
async fn a_session_keeping_brain_is_resumed_with_only_what_is_new_or_restored_with_a_notice() {
    use ctxgate::brain::{BrainReply, RESTORED_NOTICE, ScriptedBrain};

    let reply = |text: &str, session: &str| {
        Step::Reply(BrainReply {
            text: text.into(),
            usage: Usage::default(),
            actions: vec![],
            session: Some(session.into()),
        })
    };
    let brain = ScriptedBrain::with_sessions();
    brain
        .then(reply("hello Ann", "s-1"))
        .then(reply("sure", "s-1"))
        .then(Step::Fail(BrainError::SessionLost("expired".into())))
        .then(reply("welcome back", "s-2"));
    let app = crate::helpers::spawn_app_with_brain(brain.clone(), |_| {}).await;
    let w = app.worker("w");
    let outbox = app.outbox();
    let say = |text: &str, trigger: bool| json!({"conversation": "s", "sender": "ann", "text": text, "trigger": trigger});

    // 1. No session yet: a new one with the (empty) context.
    let t1 = submit(&app, say("I am Ann", true)).await;
    w.run_once().await.unwrap();
    outbox.run_once().await.unwrap();
    let first = &brain.requests()[0];
    assert_eq!(first.session, None);
    assert_eq!(first.restored_notice, None);
    let task = app.deps.store.get_task(t1).await.unwrap().unwrap();
    assert_eq!(task.context.unwrap()["session"], "new");

    // A message that asks nothing, then a question: the resumed session gets only the former.
    let r = app
        .post_webhook(&say("by the way, I moved to Lyon", false))
        .await;
    assert_eq!(r.status(), 202);
    let t2 = submit(&app, say("can you remember that?", true)).await;
    w.run_once().await.unwrap();
    outbox.run_once().await.unwrap();
    let second = &brain.requests()[1];
    assert_eq!(second.session.as_deref(), Some("s-1"));
    let texts: Vec<&str> = second.context.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(texts, vec!["by the way, I moved to Lyon"]);
    let task = app.deps.store.get_task(t2).await.unwrap().unwrap();
    assert_eq!(task.context.unwrap()["session"], "resumed");

    // 3. The session is gone: a new one gets the whole history and the notice.
    let t3 = submit(&app, say("where do I live?", true)).await;
    assert_eq!(
        w.run_once().await.unwrap(),
        RunOnce::Processed {
            task: t3,
            outcome: Outcome::Completed
        }
    );
    let requests = brain.requests();
    assert_eq!(requests[2].session.as_deref(), Some("s-1"));
    let restored = &requests[3];
    assert_eq!(restored.session, None);
    assert_eq!(restored.restored_notice.as_deref(), Some(RESTORED_NOTICE));
    let texts: Vec<&str> = restored.context.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "I am Ann",
            "hello Ann",
            "by the way, I moved to Lyon",
            "can you remember that?",
            "sure"
        ]
    );
    let task = app.deps.store.get_task(t3).await.unwrap().unwrap();
    assert_eq!(task.context.unwrap()["session"], "restored");
    let conv = task.conversation_id;
    let saved = app
        .deps
        .store
        .get_session(conv, "default")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(saved.session_id, "s-2");
    assert_eq!(Some(saved.last_injected), task.message_id);
}
