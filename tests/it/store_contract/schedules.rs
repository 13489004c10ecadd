//! Schedules: definitions, due lists, fires that happen exactly once, run outcomes and the
//! failure count that disables a schedule.

use std::sync::Arc;

use ctxgate::domain::TaskId;
use ctxgate::store::{Fire, Page, ScheduleRecord, Store};
use ctxgate_contract::{InboundEvent, SourceType};

use super::{NOW, completion, posted_with, spec, task};

const FIVE_MIN: i64 = 300_000;

async fn put(
    store: &Arc<dyn Store>,
    name: &str,
    next: Option<i64>,
    max_failures: u32,
) -> ScheduleRecord {
    store
        .put_schedule(&spec(name), "config", next, max_failures, NOW)
        .await
        .unwrap()
}

fn briefing(schedule: i64, fire_at: i64) -> (InboundEvent, ctxgate::store::NewTask) {
    let mut event = posted_with(
        "me",
        &format!("sched:{schedule}:{fire_at}"),
        "What is new?",
        |m| {
            m.source_type = SourceType::Briefing;
        },
    );
    event.channel = "webhook:default".into();
    let mut t = task(&format!("sched:{schedule}:{fire_at}"));
    t.source_type = SourceType::Briefing;
    (event, t)
}

/// A scheduled fire at `fire_at` with a briefing, moving on five minutes.
fn fire(schedule: i64, fire_at: i64) -> Fire {
    Fire {
        schedule_id: schedule,
        fire_at,
        manual: false,
        next_fire_at: Some(fire_at + FIVE_MIN),
        briefing: Some(briefing(schedule, fire_at)),
        outcome: "pending",
        detail: None,
    }
}

async fn schedules_are_created_updated_listed_and_deleted(store: Arc<dyn Store>) {
    let daily = put(&store, "b-daily", Some(NOW + FIVE_MIN), 5).await;
    assert_eq!(daily.name, "b-daily");
    assert_eq!((daily.source.as_str(), daily.enabled), ("config", true));
    assert_eq!(
        (
            daily.next_fire_at,
            daily.consecutive_failures,
            daily.max_failures
        ),
        (Some(NOW + FIVE_MIN), 0, 5)
    );
    assert_eq!(
        (
            daily.created_at,
            daily.updated_at,
            daily.disabled_reason.as_deref()
        ),
        (NOW, NOW, None)
    );
    assert_eq!(daily.spec, spec("b-daily"));
    let weekly = store
        .put_schedule(&spec("B-weekly"), "api", None, 3, NOW)
        .await
        .unwrap();
    assert_eq!((weekly.source.as_str(), weekly.next_fire_at), ("api", None));

    // A new definition keeps the schedule (and its next fire unless one is given).
    let mut changed = spec("b-daily");
    changed.cron = "0 8 * * *".into();
    changed.prompt = Some("Morning!".into());
    let updated = store
        .put_schedule(&changed, "config", None, 4, NOW + 1)
        .await
        .unwrap();
    assert_eq!(
        (updated.id, updated.next_fire_at),
        (daily.id, Some(NOW + FIVE_MIN))
    );
    assert_eq!(
        (updated.spec.clone(), updated.max_failures),
        (changed.clone(), 4)
    );
    assert_eq!((updated.created_at, updated.updated_at), (NOW, NOW + 1));
    let moved = store
        .put_schedule(&changed, "config", Some(NOW + 7), 4, NOW + 2)
        .await
        .unwrap();
    assert_eq!(moved.next_fire_at, Some(NOW + 7));

    assert!(
        store
            .set_schedule_enabled(daily.id, false, None, Some("paused"), NOW + 3)
            .await
            .unwrap()
    );
    let paused = store.get_schedule(daily.id).await.unwrap().unwrap();
    assert_eq!(
        (paused.enabled, paused.disabled_reason.as_deref()),
        (false, Some("paused"))
    );
    assert_eq!(paused.next_fire_at, Some(NOW + 7));
    let mut off = changed.clone();
    off.enabled = false;
    let still = store
        .put_schedule(&off, "config", None, 4, NOW + 4)
        .await
        .unwrap();
    assert_eq!(
        still.disabled_reason.as_deref(),
        Some("paused"),
        "disabled keeps its reason"
    );
    let on = store
        .put_schedule(&changed, "config", None, 4, NOW + 5)
        .await
        .unwrap();
    assert_eq!((on.enabled, on.disabled_reason), (true, None));
    assert!(
        !store
            .set_schedule_enabled(-1, true, None, None, NOW)
            .await
            .unwrap()
    );

    let names: Vec<String> = store
        .list_schedules()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["B-weekly", "b-daily"], "by name, bytewise");
    assert_eq!(store.get_schedule(-1).await.unwrap(), None);

    assert_eq!(
        store
            .fire_schedule(&fire(weekly.id, NOW), NOW)
            .await
            .unwrap(),
        None,
        "not due"
    );
    let manual = Fire {
        manual: true,
        ..fire(weekly.id, NOW)
    };
    assert!(store.fire_schedule(&manual, NOW).await.unwrap().is_some());
    assert!(store.delete_schedule(weekly.id).await.unwrap());
    assert!(!store.delete_schedule(weekly.id).await.unwrap());
    assert_eq!(store.get_schedule(weekly.id).await.unwrap(), None);
    assert!(
        store
            .schedule_runs(weekly.id, &Page::default())
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_due_schedule_fires_exactly_once(store: Arc<dyn Store>) {
    let s = put(&store, "every5", Some(NOW), 5).await;
    let later = put(&store, "later", Some(NOW + 1), 5).await;
    assert!(store.due_schedules(NOW - 1, 10).await.unwrap().is_empty());
    let due: Vec<i64> = store
        .due_schedules(NOW + 1, 10)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(due, [s.id, later.id], "oldest fire first");
    assert_eq!(store.due_schedules(NOW + 1, 1).await.unwrap().len(), 1);

    let task = store.fire_schedule(&fire(s.id, NOW), NOW).await.unwrap();
    let task = task.expect("fired").expect("with a task");
    assert_eq!(
        store.fire_schedule(&fire(s.id, NOW), NOW).await.unwrap(),
        None,
        "never twice"
    );
    let after = store.get_schedule(s.id).await.unwrap().unwrap();
    assert_eq!(after.next_fire_at, Some(NOW + FIVE_MIN));
    assert_eq!(store.due_schedules(NOW, 10).await.unwrap().len(), 0);
    let t = store.get_task(task).await.unwrap().unwrap();
    assert_eq!(t.source_type, SourceType::Briefing);

    // Four loops fire the next fire time at once: one wins.
    let next = NOW + FIVE_MIN;
    let mut racers = Vec::new();
    for _ in 0..4 {
        let store = store.clone();
        let id = s.id;
        racers.push(tokio::spawn(async move {
            store.fire_schedule(&fire(id, next), next).await.unwrap()
        }));
    }
    let mut fired = 0;
    for r in racers {
        fired += usize::from(r.await.unwrap().is_some());
    }
    assert_eq!(fired, 1);

    // A stale fire time is recorded without a briefing; the last fire disables the schedule.
    let stale = Fire {
        briefing: None,
        outcome: "skipped_stale",
        detail: Some("missed by 2h".into()),
        next_fire_at: None,
        ..fire(s.id, next + FIVE_MIN)
    };
    assert_eq!(
        store.fire_schedule(&stale, next + FIVE_MIN).await.unwrap(),
        Some(None)
    );
    let ended = store.get_schedule(s.id).await.unwrap().unwrap();
    assert_eq!((ended.enabled, ended.next_fire_at), (false, None));
    assert_eq!(
        ended.disabled_reason.as_deref(),
        Some("no further fire time")
    );
    let manual = Fire {
        manual: true,
        ..fire(s.id, next + 2 * FIVE_MIN)
    };
    assert!(
        store
            .fire_schedule(&manual, NOW)
            .await
            .unwrap()
            .unwrap()
            .is_some(),
        "runs when asked"
    );

    let runs = store.schedule_runs(s.id, &Page::default()).await.unwrap();
    let summary: Vec<_> = runs
        .iter()
        .map(|r| (r.fire_at, r.manual, r.outcome.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            (next + 2 * FIVE_MIN, true, "pending"),
            (next + FIVE_MIN, false, "skipped_stale"),
            (next, false, "pending"),
            (NOW, false, "pending"),
        ],
        "newest first"
    );
    assert_eq!(runs[1].detail.as_deref(), Some("missed by 2h"));
    assert_eq!((runs[1].task_id, runs[3].task_id), (None, Some(task)));
    let page = Page {
        before: Some(runs[1].id),
        limit: 1,
    };
    let older = store.schedule_runs(s.id, &page).await.unwrap();
    assert_eq!(older.len(), 1);
    assert_eq!(older[0].id, runs[2].id);
}

/// Fires the schedule at its next fire time; returns the briefing task, claimed by "w".
async fn fire_and_claim(store: &Arc<dyn Store>, id: i64) -> TaskId {
    let s = store.get_schedule(id).await.unwrap().unwrap();
    let at = s.next_fire_at.unwrap();
    let task = store
        .fire_schedule(&fire(id, at), at)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let claimed = store.claim_task("w", at, 60_000).await.unwrap().unwrap();
    assert_eq!(claimed.id, task);
    task
}

async fn run_outcomes_count_failures_and_disable_the_schedule(store: Arc<dyn Store>) {
    let s = put(&store, "flaky", Some(NOW), 2).await;
    let sid = s.id;
    let outcome = |store: Arc<dyn Store>| async move {
        let runs = store.schedule_runs(sid, &Page::default()).await.unwrap();
        let sched = store.get_schedule(sid).await.unwrap().unwrap();
        (
            runs[0].outcome.clone(),
            sched.consecutive_failures,
            sched.enabled,
        )
    };
    let t = fire_and_claim(&store, s.id).await;
    assert!(store.fail_attempt(t, "w", "boom", None, NOW).await.unwrap());
    assert_eq!(outcome(store.clone()).await, ("failed".into(), 1, true));
    let runs = store.schedule_runs(s.id, &Page::default()).await.unwrap();
    assert_eq!(runs[0].detail.as_deref(), Some("boom"));

    let t = fire_and_claim(&store, s.id).await;
    assert!(
        store
            .complete_task(&completion(t, "w", "news"), NOW)
            .await
            .unwrap()
    );
    assert_eq!(
        outcome(store.clone()).await,
        ("completed".into(), 0, true),
        "a success resets"
    );

    let t = fire_and_claim(&store, s.id).await;
    let mut silent = completion(t, "w", "NOTHING_TO_REPORT");
    silent.silent = true;
    assert!(store.complete_task(&silent, NOW).await.unwrap());
    assert_eq!(outcome(store.clone()).await, ("silent".into(), 0, true));

    for _ in 0..2 {
        let t = fire_and_claim(&store, s.id).await;
        assert!(store.fail_attempt(t, "w", "boom", None, NOW).await.unwrap());
    }
    assert_eq!(outcome(store.clone()).await, ("failed".into(), 2, false));
    let off = store.get_schedule(s.id).await.unwrap().unwrap();
    assert_eq!(
        off.disabled_reason.as_deref(),
        Some("disabled after 2 consecutive failures; last: boom")
    );
    assert!(
        store
            .set_schedule_enabled(s.id, true, Some(NOW + 1), None, NOW)
            .await
            .unwrap()
    );
    let on = store.get_schedule(s.id).await.unwrap().unwrap();
    assert_eq!(
        (on.enabled, on.consecutive_failures, on.disabled_reason),
        (true, 0, None)
    );
    assert_eq!(on.next_fire_at, Some(NOW + 1));

    // A cancelled briefing, and one whose last attempt's lease ran out.
    let at = NOW + 1;
    let t = store
        .fire_schedule(&fire(s.id, at), at)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(store.cancel_task(t, at).await.unwrap());
    assert_eq!(outcome(store.clone()).await.0, "cancelled");
    let at = at + FIVE_MIN;
    let mut last_try = fire(s.id, at);
    if let Some((_, task)) = &mut last_try.briefing {
        task.max_attempts = 1;
    }
    store
        .fire_schedule(&last_try, at)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    store.claim_task("w", at, 1000).await.unwrap().unwrap();
    assert!(
        store
            .claim_task("w", at + 2000, 1000)
            .await
            .unwrap()
            .is_none()
    );
    let runs = store.schedule_runs(s.id, &Page::default()).await.unwrap();
    assert_eq!(runs[0].outcome, "failed");
    assert!(runs[0].detail.as_deref().unwrap().contains("lease"));
}

contract!(
    schedules_are_created_updated_listed_and_deleted,
    a_due_schedule_fires_exactly_once,
    run_outcomes_count_failures_and_disable_the_schedule,
);
