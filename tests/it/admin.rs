//! The admin API: bearer auth on every route, filters, paging and stable error codes.

use serde_json::{Value, json};

use crate::helpers::{spawn_app, spawn_app_with};

#[tokio::test]
async fn admin_routes_require_the_token() {
    let app = spawn_app().await;
    for path in [
        "/admin/tasks",
        "/admin/tasks/1",
        "/admin/conversations",
        "/admin/conversations/1",
        "/admin/conversations/1/messages",
        "/admin/anything",
    ] {
        let r = app
            .http
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path} without a token");
        let r = app
            .http
            .get(format!("{}{path}", app.base))
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path} with a wrong token");
        assert_eq!(
            r.json::<Value>().await.unwrap()["error"]["code"],
            "unauthorized"
        );
    }
    // Health needs no token.
    assert_eq!(
        app.http
            .get(format!("{}/healthz", app.base))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        app.http
            .get(format!("{}/readyz", app.base))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn without_a_token_the_admin_api_is_off() {
    let app = spawn_app_with(|s| s.admin.token = None).await;
    let r = app.admin_get("/admin/tasks").await;
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn task_list_filters_pages_and_reports_bad_parameters() {
    let app = spawn_app().await;
    for i in 0..3 {
        let r = app
            .post_webhook(&json!({"conversation": format!("c{i}"), "sender": "u", "text": "hi"}))
            .await;
        assert_eq!(r.status(), 202);
    }
    app.worker("w").run_once().await.unwrap();

    let done = app.admin_json("/admin/tasks?status=completed").await;
    assert_eq!(done["items"].as_array().unwrap().len(), 1);
    let pending = app
        .admin_json("/admin/tasks?status=pending&source_type=webhook")
        .await;
    assert_eq!(pending["items"].as_array().unwrap().len(), 2);
    let by_channel = app.admin_json("/admin/tasks?channel=webhook:default").await;
    assert_eq!(by_channel["items"].as_array().unwrap().len(), 3);
    assert_eq!(
        app.admin_json("/admin/tasks?channel=talk:x").await["items"]
            .as_array()
            .unwrap()
            .len(),
        0
    );

    // Paging: two pages of 2 and 1, newest first, no overlap.
    let p1 = app.admin_json("/admin/tasks?limit=2").await;
    let ids1: Vec<i64> = p1["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids1.len(), 2);
    assert!(ids1[0] > ids1[1]);
    let cursor = p1["next_cursor"].as_i64().unwrap();
    let p2 = app
        .admin_json(&format!("/admin/tasks?limit=2&cursor={cursor}"))
        .await;
    let ids2: Vec<i64> = p2["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids2.len(), 1);
    assert!(ids2[0] < ids1[1]);
    assert_eq!(p2["next_cursor"], Value::Null);

    for bad in [
        "/admin/tasks?status=done",
        "/admin/tasks?limit=0",
        "/admin/tasks?limit=many",
        "/admin/tasks?created_after=yesterday",
        "/admin/tasks?colour=red",
    ] {
        let r = app.admin_get(bad).await;
        assert_eq!(r.status(), 400, "{bad}");
        assert_eq!(
            r.json::<Value>().await.unwrap()["error"]["code"],
            "invalid_parameter",
            "{bad}"
        );
    }
    let r = app.admin_get("/admin/tasks/999").await;
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "not_found"
    );
    let r = app.admin_get("/admin/conversations/999/messages").await;
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn context_preview_explains_what_a_new_message_would_get() {
    let app = spawn_app().await;
    for text in ["the boat is called Nautilus", "nice weather", "lunch?"] {
        app.post_webhook(&json!({"conversation": "p", "sender": "u", "text": text}))
            .await;
        app.worker("w").run_once().await.unwrap();
        app.outbox().run_once().await.unwrap();
    }
    let conv = app.admin_json("/admin/conversations").await["items"][0]["id"]
        .as_i64()
        .unwrap();
    let p = app
        .admin_json(&format!(
            "/admin/conversations/{conv}/context?text=what%20is%20the%20boat%20called&budget=1000"
        ))
        .await;
    let selected = p["selected"].as_array().unwrap();
    assert_eq!(selected.len(), 6);
    assert_eq!(selected[0]["text"], "the boat is called Nautilus");
    // Six candidates, five guaranteed recent; the oldest is kept because the test brain has no
    // fast completer for triage (fail open).
    let reasons: Vec<&str> = selected
        .iter()
        .map(|s| s["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        vec![
            "fail_open",
            "recent",
            "recent",
            "recent",
            "recent",
            "recent"
        ]
    );
    assert!(selected.iter().all(|s| s["tokens"].as_u64().unwrap() > 0));
    assert_eq!(p["budget"], 1000);
    assert_eq!(
        p["tokens"].as_u64().unwrap(),
        selected
            .iter()
            .map(|s| s["tokens"].as_u64().unwrap())
            .sum::<u64>()
    );
    let r = app
        .admin_get(&format!("/admin/conversations/{conv}/context"))
        .await;
    assert_eq!(r.status(), 400, "text is required");
    let r = app
        .admin_get("/admin/conversations/999/context?text=x")
        .await;
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn metrics_count_tasks_deliveries_tokens_and_backlog() {
    let app = spawn_app().await;
    app.brain.then_reply("ok");
    for conv in ["m1", "m2"] {
        app.post_webhook(&json!({"conversation": conv, "sender": "u", "text": "hi"}))
            .await;
    }
    app.worker("w").run_once().await.unwrap();
    app.outbox().run_once().await.unwrap();
    let text = app
        .http
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "ctxgate_tasks_finished_total{status=\"completed\",source=\"webhook\"} 1",
        "ctxgate_deliveries_total{channel=\"webhook:default\",outcome=\"delivered\"} 1",
        "ctxgate_brain_tokens_total{brain=\"default\",kind=\"prompt\"} 10",
        "ctxgate_tasks_pending 1",
        "ctxgate_outbox_backlog 0",
        "ctxgate_triage_fail_open_total 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert!(text.contains("ctxgate_task_latency_seconds_count{source=\"webhook\"} 1"));
}

#[tokio::test]
async fn the_read_only_token_reads_but_cannot_change_anything() {
    let app = spawn_app_with(|s| {
        s.admin.read_only_token = Some(ctxgate::config::Secret::new("read-only-token-for-tests"));
    })
    .await;
    let r = app
        .http
        .get(format!("{}/admin/tasks", app.base))
        .bearer_auth("read-only-token-for-tests")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = app
        .http
        .post(format!("{}/admin/schedules", app.base))
        .bearer_auth("read-only-token-for-tests")
        .json(&json!({"name": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "read_only_token"
    );
}

#[tokio::test]
async fn tasks_can_be_cancelled_and_retried_and_the_config_is_shown_redacted() {
    use ctxgate::brain::{BrainError, Step};

    let app = spawn_app().await;
    let post = |path: String| {
        app.http
            .post(format!("{}{path}", app.base))
            .bearer_auth(crate::helpers::ADMIN_TOKEN)
            .send()
    };
    let id = |r: Value| r["task_id"].as_i64().unwrap();
    let a = id(app
        .post_webhook(&json!({"conversation": "x", "sender": "u", "text": "a"}))
        .await
        .json()
        .await
        .unwrap());
    let r = post(format!("/admin/tasks/{a}/cancel")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.json::<Value>().await.unwrap()["task"]["status"],
        "cancelled"
    );
    assert_eq!(
        app.worker("w").run_once().await.unwrap(),
        ctxgate::worker::RunOnce::Empty
    );
    assert_eq!(
        post(format!("/admin/tasks/{a}/cancel"))
            .await
            .unwrap()
            .status(),
        409
    );

    // A failed task comes back with fresh attempts and is answered.
    app.brain
        .then(Step::Fail(BrainError::Permanent("bad".into())));
    let b = id(app
        .post_webhook(&json!({"conversation": "y", "sender": "u", "text": "b"}))
        .await
        .json()
        .await
        .unwrap());
    app.worker("w").run_once().await.unwrap();
    let r = post(format!("/admin/tasks/{b}/retry")).await.unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap()["task"]["status"],
        "pending"
    );
    app.worker("w").run_once().await.unwrap();
    assert_eq!(
        app.admin_json(&format!("/admin/tasks/{b}")).await["task"]["status"],
        "completed"
    );
    assert_eq!(
        post("/admin/tasks/999/retry".into())
            .await
            .unwrap()
            .status(),
        404
    );

    let config = app.admin_json("/admin/config").await;
    assert_eq!(config["admin"]["token"], "[redacted]");
    assert_eq!(config["webhooks"]["default"]["secret"], "[redacted]");
    assert_eq!(config["worker"]["max_attempts"], 3);
}
