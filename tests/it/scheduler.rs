//! The scheduler with a manual clock: fires once per fire time (also across a restart), catches
//! up within the staleness limit without bursts, auto-disables, stays silent when there is
//! nothing to report, delivers briefings and keeps them out of interactive context.

use std::time::Duration;

use ctxgate::brain::{BrainError, Step};
use ctxgate::config::{ScheduleSpec, Target};
use ctxgate::outbox::DeliverOnce;
use ctxgate::scheduler::Scheduler;
use ctxgate::store::Page;
use ctxgate::{App, Overrides};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{TestApp, spawn_app_with, test_settings};

fn spec(name: &str, cron: &str, callback: Option<String>) -> ScheduleSpec {
    ScheduleSpec {
        name: name.into(),
        cron: cron.into(),
        timezone: "UTC".into(),
        prompt: Some("What is new today?".into()),
        prompt_file: None,
        target: Target::Webhook {
            webhook: "default".into(),
            conversation: "me".into(),
            callback_url: callback,
        },
        brain: "default".into(),
        enabled: true,
        one_shot: false,
        silent_unless_news: false,
    }
}

fn scheduler(app: &TestApp) -> Scheduler {
    Scheduler::new(app.deps.clone())
}

async fn runs(app: &TestApp, name: &str) -> Vec<String> {
    let s = app.deps.store.list_schedules().await.unwrap();
    let id = s.iter().find(|s| s.name == name).unwrap().id;
    let mut r: Vec<String> = app
        .deps
        .store
        .schedule_runs(id, &Page::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.outcome)
        .collect();
    r.reverse();
    r
}

async fn briefing_tasks(app: &TestApp) -> usize {
    app.admin_json("/admin/tasks?source_type=briefing").await["items"]
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_schedule_fires_once_per_fire_time_even_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings(dir.path());
    settings.schedules.push(spec("every5", "*/5 * * * *", None));
    let app = crate::helpers::spawn_app_with(|s| *s = settings.clone()).await;
    let sched = scheduler(&app);
    assert_eq!(sched.tick().await.unwrap(), 0, "not due at 00:00");
    app.advance(Duration::from_secs(300));
    assert_eq!(sched.tick().await.unwrap(), 1);
    assert_eq!(
        sched.tick().await.unwrap(),
        0,
        "the same fire time never twice"
    );
    assert_eq!(briefing_tasks(&app).await, 1);

    // A restart: a second gateway on the same database, same clock.
    let again = App::build_with(
        settings.clone(),
        Overrides {
            clock: Some(app.clock.clone()),
            brains: Default::default(),
        },
    )
    .await
    .unwrap();
    let restarted = Scheduler::new(again.deps().clone());
    assert_eq!(restarted.tick().await.unwrap(), 0);
    app.advance(Duration::from_secs(300));
    // Two loops racing for the same fire: exactly one wins.
    let (a, b) = tokio::join!(sched.tick(), restarted.tick());
    assert_eq!(a.unwrap() + b.unwrap(), 1);
    assert_eq!(briefing_tasks(&app).await, 2);
}

#[tokio::test]
async fn missed_fires_catch_up_once_within_the_staleness_limit_and_are_skipped_beyond() {
    let app = spawn_app_with(|s| s.schedules.push(spec("hourly", "0 * * * *", None))).await;
    let sched = scheduler(&app);
    // Down from 00:00 to 01:30: the 01:00 fire is 30 min late (< 1 h): it runs, once.
    app.advance(Duration::from_secs(90 * 60));
    assert_eq!(sched.tick().await.unwrap(), 1);
    assert_eq!(sched.tick().await.unwrap(), 0, "no burst");
    // Down again until 05:00: the 02:00 fire is 3 h late: skipped and recorded; next is 06:00.
    app.advance(Duration::from_secs(210 * 60));
    assert_eq!(sched.tick().await.unwrap(), 1);
    assert_eq!(sched.tick().await.unwrap(), 0);
    assert_eq!(runs(&app, "hourly").await, vec!["pending", "skipped_stale"]);
    assert_eq!(briefing_tasks(&app).await, 1);
    let s = &app.deps.store.list_schedules().await.unwrap()[0];
    assert_eq!(
        s.next_fire_at,
        Some(crate::helpers::START_MS + 6 * 3_600_000)
    );
}

#[tokio::test]
async fn repeated_failures_disable_a_schedule_with_the_reason() {
    let app = spawn_app_with(|s| {
        s.scheduler.max_failures = 2;
        s.schedules.push(spec("flaky", "*/10 * * * *", None));
    })
    .await;
    let sched = scheduler(&app);
    for _ in 0..2 {
        app.brain
            .then(Step::Fail(BrainError::Permanent("model gone".into())));
        app.advance(Duration::from_secs(600));
        assert_eq!(sched.tick().await.unwrap(), 1);
        app.worker("w").run_once().await.unwrap();
    }
    let s = &app.deps.store.list_schedules().await.unwrap()[0];
    assert!(!s.enabled);
    assert_eq!(s.consecutive_failures, 2);
    let reason = s.disabled_reason.clone().unwrap();
    assert!(
        reason.contains("2 consecutive failures") && reason.contains("model gone"),
        "{reason}"
    );
    assert_eq!(runs(&app, "flaky").await, vec!["failed", "failed"]);
    app.advance(Duration::from_secs(600));
    assert_eq!(
        sched.tick().await.unwrap(),
        0,
        "disabled schedules do not fire"
    );
}

#[tokio::test]
async fn nothing_to_report_delivers_nothing() {
    let callback = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .expect(0)
        .mount(&callback)
        .await;
    let app = spawn_app_with(|s| {
        let mut quiet = spec(
            "quiet",
            "*/10 * * * *",
            Some(format!("{}/cb", callback.uri())),
        );
        quiet.silent_unless_news = true;
        s.schedules.push(quiet);
    })
    .await;
    app.brain.then_reply("  NOTHING_TO_REPORT \n");
    app.advance(Duration::from_secs(600));
    scheduler(&app).tick().await.unwrap();
    app.worker("w").run_once().await.unwrap();
    assert_eq!(app.outbox().run_once().await.unwrap(), DeliverOnce::Empty);
    assert_eq!(runs(&app, "quiet").await, vec!["silent"]);
    let conv = app.admin_json("/admin/conversations").await["items"][0]["id"]
        .as_i64()
        .unwrap();
    let history = app
        .admin_json(&format!("/admin/conversations/{conv}/messages"))
        .await;
    assert!(
        history["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["role"] != "assistant")
    );
}

#[tokio::test]
async fn a_briefing_is_delivered_and_only_a_reply_to_it_sees_it() {
    let callback = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&callback)
        .await;
    let app = spawn_app_with(|s| {
        s.conversation.previous_tasks_count = 0;
        s.schedules.push(spec(
            "morning",
            "0 7 * * *",
            Some(format!("{}/cb", callback.uri())),
        ));
    })
    .await;
    app.brain.then_reply("1. dentist at 9\n2. invoice due");
    app.advance(Duration::from_secs(7 * 3600));
    scheduler(&app).tick().await.unwrap();
    app.worker("w").run_once().await.unwrap();
    assert!(matches!(
        app.outbox().run_once().await.unwrap(),
        DeliverOnce::Delivered(_)
    ));
    let delivered: Value =
        serde_json::from_slice(&callback.received_requests().await.unwrap()[0].body).unwrap();
    assert_eq!(delivered["text"], "1. dentist at 9\n2. invoice due");
    let briefing_id = delivered["idempotency_key"].as_str().unwrap().to_owned();

    // An unrelated message in the same conversation: the briefing stays out.
    app.post_webhook(&json!({"conversation": "me", "sender": "u", "text": "hello"}))
        .await;
    app.worker("w").run_once().await.unwrap();
    let unrelated = app.brain.requests().pop().unwrap();
    assert!(
        unrelated
            .context
            .iter()
            .all(|t| !t.text.contains("dentist")),
        "{:?}",
        unrelated.context
    );
    assert!(
        unrelated
            .context
            .iter()
            .all(|t| t.text != "What is new today?")
    );
    // A reply to it: the briefing is in the context as the reply parent.
    app.post_webhook(&json!({"conversation": "me", "sender": "u",
                             "text": "tell me more about the second item", "reply_to": briefing_id}))
        .await;
    app.worker("w").run_once().await.unwrap();
    let reply = app.brain.requests().pop().unwrap();
    assert!(
        reply
            .context
            .iter()
            .any(|t| t.text.contains("2. invoice due")),
        "{:?}",
        reply.context
    );
}

#[tokio::test]
async fn schedules_through_the_admin_api() {
    let app = spawn_app_with(|_| {}).await;
    let post = |body: Value| {
        app.http
            .post(format!("{}/admin/schedules", app.base))
            .bearer_auth(crate::helpers::ADMIN_TOKEN)
            .json(&body)
            .send()
    };
    let body = json!({"name": "api", "cron": "30 8 * * *", "timezone": "Europe/Berlin",
                      "prompt": "plan my day",
                      "target": {"kind": "webhook", "webhook": "default", "conversation": "me"}});
    let r = post(body.clone()).await.unwrap();
    assert_eq!(r.status(), 201);
    let created: Value = r.json().await.unwrap();
    let id = created["id"].as_i64().unwrap();
    // 08:30 Berlin on 2026-01-01 = 07:30 UTC.
    assert_eq!(
        created["next_fire_at"],
        crate::helpers::START_MS + 7 * 3_600_000 + 1_800_000
    );
    assert_eq!(post(body).await.unwrap().status(), 409);
    for (bad, code) in [
        (
            json!({"name": "x", "cron": "every day", "prompt": "p",
                "target": {"kind": "webhook", "webhook": "default", "conversation": "me"}}),
            422,
        ),
        (
            json!({"name": "y", "cron": "0 7 * * *", "prompt": "p",
                "target": {"kind": "talk", "room": "abc"}}),
            422,
        ),
        (json!({"name": "z", "cron": "0 7 * * *"}), 400),
    ] {
        assert_eq!(post(bad).await.unwrap().status(), code);
    }
    let act = |path: String| {
        app.http
            .post(format!("{}/admin/schedules/{id}/{path}", app.base))
            .bearer_auth(crate::helpers::ADMIN_TOKEN)
            .send()
    };
    let r = act("run".into()).await.unwrap();
    assert_eq!(r.status(), 202);
    assert!(r.json::<Value>().await.unwrap()["task_id"].is_i64());
    let disabled: Value = act("disable".into()).await.unwrap().json().await.unwrap();
    assert_eq!(disabled["enabled"], false);
    assert_eq!(disabled["disabled_reason"], "disabled by an operator");
    let enabled: Value = act("enable".into()).await.unwrap().json().await.unwrap();
    assert_eq!(enabled["enabled"], true);
    let runs = app.admin_json(&format!("/admin/schedules/{id}/runs")).await;
    assert_eq!(runs["items"][0]["manual"], true);
    assert_eq!(
        app.admin_json("/admin/schedules").await["items"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let r = app
        .http
        .delete(format!("{}/admin/schedules/{id}", app.base))
        .bearer_auth(crate::helpers::ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        app.admin_get(&format!("/admin/schedules/{id}"))
            .await
            .status(),
        404
    );
}

#[tokio::test]
async fn a_restart_keeps_finished_one_shots_and_disabled_schedules() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings(dir.path());
    let mut once = spec("once", "*/5 * * * *", None);
    once.one_shot = true;
    settings.schedules.push(once);
    settings.schedules.push(spec("paused", "*/5 * * * *", None));
    let app = crate::helpers::spawn_app_with(|s| *s = settings.clone()).await;
    let paused = app
        .deps
        .store
        .list_schedules()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.name == "paused")
        .unwrap();
    app.deps
        .store
        .set_schedule_enabled(paused.id, false, None, Some("disabled by an operator"), 0)
        .await
        .unwrap();
    app.advance(Duration::from_secs(300));
    assert_eq!(
        scheduler(&app).tick().await.unwrap(),
        1,
        "only the one-shot fires"
    );

    let again = App::build_with(
        settings.clone(),
        Overrides {
            clock: Some(app.clock.clone()),
            brains: Default::default(),
        },
    )
    .await
    .unwrap();
    let after = again.deps().store.list_schedules().await.unwrap();
    let once = after.iter().find(|s| s.name == "once").unwrap();
    assert!(!once.enabled && once.next_fire_at.is_none(), "{once:?}");
    let paused = after.iter().find(|s| s.name == "paused").unwrap();
    assert!(!paused.enabled);
    assert_eq!(
        paused.disabled_reason.as_deref(),
        Some("disabled by an operator")
    );
    app.advance(Duration::from_secs(3600));
    assert_eq!(
        Scheduler::new(again.deps().clone()).tick().await.unwrap(),
        0
    );
}
