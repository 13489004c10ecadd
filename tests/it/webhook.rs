//! The webhook channel end to end through the real `App`: signed request in, one answer out at
//! the callback, history kept, bad or replayed requests refused.

use std::time::Duration;

use ctxgate::config::AgentSettings;
use ctxgate::outbox::DeliverOnce;
use ctxgate::worker::{Outcome, RunOnce};
use ctxgate_contract::Role;
use ctxgate_webhook::signature;
use serde_json::{Value, json};
use wiremock::matchers::{header_exists, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{SECRET, spawn_app, spawn_app_with};

async fn task_count(app: &crate::helpers::TestApp) -> usize {
    app.admin_json("/admin/tasks").await["items"]
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test]
async fn signed_webhook_gets_exactly_one_answer_at_the_callback() {
    let app = spawn_app().await;
    let callback = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/cb"))
        .and(header_exists("x-ctxgate-signature"))
        .and(header_exists("idempotency-key"))
        .respond_with(ResponseTemplate::new(200))
        .expect(1)
        .mount(&callback)
        .await;
    app.brain.then_reply("Hi Alice, noted.");

    let r = app
        .post_webhook(&json!({
            "conversation": "support-7", "sender": "alice", "sender_name": "Alice",
            "text": "Please remember my order 42", "message_id": "m1",
            "callback_url": format!("{}/cb", callback.uri()),
        }))
        .await;
    assert_eq!(r.status(), 202);
    let receipt: Value = r.json().await.unwrap();
    let task_id = receipt["task_id"].as_i64().expect("task id in the 202");
    assert_eq!(receipt["duplicate"], false);

    let worker = app.worker("w1");
    assert!(matches!(
        worker.run_once().await.unwrap(),
        RunOnce::Processed {
            outcome: Outcome::Completed,
            ..
        }
    ));
    assert_eq!(worker.run_once().await.unwrap(), RunOnce::Empty);
    let outbox = app.outbox();
    assert!(matches!(
        outbox.run_once().await.unwrap(),
        DeliverOnce::Delivered(_)
    ));
    assert_eq!(outbox.run_once().await.unwrap(), DeliverOnce::Empty);

    // The callback got the answer, signed with the webhook secret over timestamp + body.
    let received = callback.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    let req = &received[0];
    let body: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(body["text"], "Hi Alice, noted.");
    assert_eq!(body["task_id"], task_id);
    assert_eq!(body["reply_to"], "m1");
    assert_eq!(body["conversation"], "support-7");
    let header = |n: &str| req.headers.get(n).unwrap().to_str().unwrap().to_owned();
    assert_eq!(
        header("idempotency-key"),
        format!("ctxgate:task:{task_id}:result")
    );
    signature::verify(
        SECRET.as_bytes(),
        Some(&header("x-ctxgate-signature")),
        Some(&header("x-ctxgate-timestamp")),
        &req.body,
        chrono::Utc::now().timestamp(),
        300,
    )
    .expect("callback is signed");

    // The brain saw the message (and no history: it is the first one).
    let requests = app.brain.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].message.text, "Please remember my order 42");
    assert_eq!(requests[0].message.speaker, "Alice");
    assert!(requests[0].context.is_empty());

    // History holds both messages, the answer replying to the question.
    let task = app.admin_json(&format!("/admin/tasks/{task_id}")).await;
    assert_eq!(task["task"]["status"], "completed");
    assert_eq!(task["task"]["result_text"], "Hi Alice, noted.");
    assert_eq!(task["deliveries"][0]["status"], "delivered");
    let conv = task["task"]["conversation_id"].as_i64().unwrap();
    let history = app
        .admin_json(&format!("/admin/conversations/{conv}/messages"))
        .await;
    let items = history["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["role"], "user");
    assert_eq!(items[0]["text"], "Please remember my order 42");
    assert_eq!(items[1]["role"], "assistant");
    assert_eq!(items[1]["text"], "Hi Alice, noted.");
    assert_eq!(items[1]["reply_to_message_id"], items[0]["id"]);
}

#[tokio::test]
async fn the_next_turn_sees_the_history_of_its_own_conversation_only() {
    let app = spawn_app().await;
    let worker = app.worker("w1");
    let outbox = app.outbox();
    for (conv, text) in [("a", "my name is Ann"), ("b", "secret of b")] {
        let r = app
            .post_webhook(&json!({"conversation": conv, "sender": "u", "text": text}))
            .await;
        assert_eq!(r.status(), 202);
        worker.run_once().await.unwrap();
        outbox.run_once().await.unwrap();
    }
    let r = app
        .post_webhook(&json!({"conversation": "a", "sender": "u", "text": "what is my name?"}))
        .await;
    assert_eq!(r.status(), 202);
    worker.run_once().await.unwrap();

    let last = app.brain.requests().pop().unwrap();
    assert_eq!(last.message.text, "what is my name?");
    let context: Vec<(Role, &str)> = last
        .context
        .iter()
        .map(|t| (t.role, t.text.as_str()))
        .collect();
    assert_eq!(
        context,
        vec![
            (Role::User, "my name is Ann"),
            (Role::Assistant, "re: my name is Ann"),
        ]
    );
}

#[tokio::test]
async fn bad_stale_missing_or_replayed_signatures_are_refused_and_create_nothing() {
    let app = spawn_app().await;
    let raw = br#"{"conversation":"c","sender":"u","text":"hi"}"#;
    let now = chrono::Utc::now().timestamp();
    let good = signature::sign(SECRET.as_bytes(), now, raw);

    let wrong_key = signature::sign(b"another-secret-entirely", now, raw);
    let r = app.post_signed(raw, now, &wrong_key).await;
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "bad_signature"
    );

    let stale = now - 301;
    let r = app
        .post_signed(raw, stale, &signature::sign(SECRET.as_bytes(), stale, raw))
        .await;
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "stale_timestamp"
    );

    let r = app
        .http
        .post(format!("{}/webhooks/default", app.base))
        .body(raw.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "missing_signature"
    );
    assert_eq!(task_count(&app).await, 0);

    // The genuine request once, then its replay.
    assert_eq!(app.post_signed(raw, now, &good).await.status(), 202);
    let r = app.post_signed(raw, now, &good).await;
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "replayed"
    );
    assert_eq!(task_count(&app).await, 1);
}

#[tokio::test]
async fn the_same_message_id_twice_yields_one_task() {
    let app = spawn_app().await;
    let body = json!({"conversation": "c", "sender": "u", "text": "hi", "message_id": "x-1"});
    let raw = serde_json::to_vec(&body).unwrap();
    let now = chrono::Utc::now().timestamp();
    let first: Value = app
        .post_signed(&raw, now, &signature::sign(SECRET.as_bytes(), now, &raw))
        .await
        .json()
        .await
        .unwrap();
    // A second, separately signed delivery of the same message (a retrying sender): another
    // timestamp, so another signature.
    let ts = now - 1;
    let r = app
        .post_signed(&raw, ts, &signature::sign(SECRET.as_bytes(), ts, &raw))
        .await;
    assert_eq!(r.status(), 202);
    let second: Value = r.json().await.unwrap();
    assert_eq!(second["duplicate"], true);
    assert_eq!(second["task_id"], first["task_id"]);
    assert_eq!(task_count(&app).await, 1);
}

#[tokio::test]
async fn invalid_bodies_get_clear_errors() {
    let app = spawn_app().await;
    let r = app
        .post_webhook(&json!({"conversation": "c", "sender": "u", "txt": "typo"}))
        .await;
    assert_eq!(r.status(), 422);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "invalid_json");
    assert!(e["error"]["message"].as_str().unwrap().contains("txt"));

    let r = app
        .post_webhook(&json!({"conversation": "c", "sender": "u", "text": "  "}))
        .await;
    assert_eq!(r.status(), 422);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "invalid_payload"
    );

    let huge = "x".repeat(2 * 1024 * 1024);
    let r = app
        .post_webhook(&json!({"conversation": "c", "sender": "u", "text": huge}))
        .await;
    assert_eq!(r.status(), 413);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "body_too_large"
    );

    let r = app
        .http
        .post(format!("{}/webhooks/nope", app.base))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "unknown_webhook"
    );
    assert_eq!(task_count(&app).await, 0);
}

#[tokio::test]
async fn a_failing_callback_is_retried_with_backoff_and_delivered_once() {
    let app = spawn_app().await;
    let callback = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).insert_header("retry-after", "30"))
        .up_to_n_times(1)
        .expect(1)
        .mount(&callback)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&callback)
        .await;
    let body = json!({"conversation": "c", "sender": "u", "text": "hi",
                      "callback_url": format!("{}/hook", callback.uri())});
    assert_eq!(app.post_webhook(&body).await.status(), 202);
    app.worker("w").run_once().await.unwrap();
    let outbox = app.outbox();
    assert!(matches!(
        outbox.run_once().await.unwrap(),
        DeliverOnce::Retrying(_)
    ));
    // Not due before the peer's Retry-After (30 s beats the 5 s initial backoff).
    app.advance(Duration::from_secs(29));
    assert_eq!(outbox.run_once().await.unwrap(), DeliverOnce::Empty);
    app.advance(Duration::from_secs(1));
    assert!(matches!(
        outbox.run_once().await.unwrap(),
        DeliverOnce::Delivered(_)
    ));
    assert_eq!(outbox.run_once().await.unwrap(), DeliverOnce::Empty);
}

#[tokio::test]
async fn triage_actions_and_the_explanation_reach_the_task() {
    use std::sync::Arc;

    use ctxgate::brain::{BrainReply, ScriptedBrain, ScriptedCompleter, Step};
    use ctxgate::domain::{Action, Usage};

    let fast = Arc::new(ScriptedCompleter::default());
    let app = crate::helpers::spawn_app_with_brain(ScriptedBrain::with_fast(fast.clone()), |s| {
        s.conversation.always_include_recent = 2;
    })
    .await;
    let worker = app.worker("w");
    let outbox = app.outbox();
    // One answer that used 17 tools, then plain answers.
    let actions = (0..17)
        .map(|i| Action {
            name: format!("tool{i}"),
            detail: None,
        })
        .collect();
    app.brain.then(Step::Reply(BrainReply {
        text: "I looked it up.".into(),
        usage: Usage {
            prompt_tokens: 50,
            completion_tokens: 5,
        },
        actions,
        session: None,
    }));
    for text in ["first question", "second", "third"] {
        app.post_webhook(&json!({"conversation": "t", "sender": "u", "text": text}))
            .await;
        worker.run_once().await.unwrap();
        outbox.run_once().await.unwrap();
    }
    // Six messages now; the next task has 6 candidates, 2 recent, 4 older for triage.
    fast.answer(Ok(r#"{"relevant": [2]}"#));
    let r = app
        .post_webhook(&json!({"conversation": "t", "sender": "u", "text": "and now?"}))
        .await;
    let task_id = r.json::<Value>().await.unwrap()["task_id"]
        .as_i64()
        .unwrap();
    worker.run_once().await.unwrap();

    let seen = app.brain.requests().pop().unwrap();
    let context: Vec<&str> = seen.context.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(
        context,
        vec![
            "I looked it up.\n[Actions: tool0, tool1, tool2, tool3, tool4, tool5, tool6, tool7, \
             tool8, tool9, tool10, tool11, tool12, tool13, tool14, +2 more]",
            "third",
            "re: third",
        ]
    );
    let task = app.admin_json(&format!("/admin/tasks/{task_id}")).await["task"].clone();
    assert_eq!(
        task["triage_usage"],
        json!({"prompt_tokens": 100, "completion_tokens": 7})
    );
    let selected = task["context"]["selected"].as_array().unwrap();
    let reasons: Vec<&str> = selected
        .iter()
        .map(|s| s["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, vec!["relevant", "recent", "recent"]);
    assert_eq!(
        task["context"]["left_out"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["reason"] == "dropped_by_triage")
            .count(),
        3
    );
}

#[tokio::test]
async fn an_answer_counts_as_earlier_context_even_when_stored_after_the_next_question() {
    let app = spawn_app().await;
    let callback = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400))
        .mount(&callback)
        .await;
    let w = app.worker("w");
    // Two quick messages: the second arrives before the first is answered.
    for text in ["first", "second"] {
        let r = app
            .post_webhook(&json!({"conversation": "q", "sender": "u", "text": text}))
            .await;
        assert_eq!(r.status(), 202);
    }
    w.run_once().await.unwrap();
    w.run_once().await.unwrap();
    let second = app.brain.requests().pop().unwrap();
    let seen: Vec<&str> = second.context.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(seen, vec!["first", "re: first"]);

    // An answer that could never be delivered stays in history but leaves every context.
    let r = app
        .post_webhook(&json!({"conversation": "q", "sender": "u", "text": "third",
                              "callback_url": format!("{}/cb", callback.uri())}))
        .await;
    assert_eq!(r.status(), 202);
    w.run_once().await.unwrap();
    let outbox = app.outbox();
    for _ in 0..3 {
        outbox.run_once().await.unwrap();
    }
    app.post_webhook(&json!({"conversation": "q", "sender": "u", "text": "fourth"}))
        .await;
    w.run_once().await.unwrap();
    let fourth = app.brain.requests().pop().unwrap();
    let seen: Vec<&str> = fourth.context.iter().map(|t| t.text.as_str()).collect();
    assert!(
        seen.contains(&"third") && !seen.contains(&"re: third"),
        "{seen:?}"
    );
    let conv = app.admin_json("/admin/conversations").await["items"][0]["id"]
        .as_i64()
        .unwrap();
    let history = app
        .admin_json(&format!("/admin/conversations/{conv}/messages"))
        .await;
    let kinds: Vec<&str> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["text"] == "re: third")
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["undelivered"]);
}

#[tokio::test]
async fn an_agent_sees_only_what_is_addressed_to_it_or_everyone() {
    let app = spawn_app_with(|s| {
        s.agents = vec![
            AgentSettings {
                id: "default".into(),
                ..AgentSettings::implicit()
            },
            AgentSettings {
                id: "reviewer".into(),
                default: false,
                ..AgentSettings::implicit()
            },
        ];
    })
    .await;
    let w = app.worker("w");
    let outbox = app.outbox();
    for (text, agent) in [
        ("for everyone", None),
        ("only for the reviewer", Some("reviewer")),
    ] {
        let mut body = json!({"conversation": "team", "sender": "ann", "text": text});
        if let Some(a) = agent {
            body["agent"] = json!(a);
        }
        assert_eq!(app.post_webhook(&body).await.status(), 202);
        w.run_once().await.unwrap();
        outbox.run_once().await.unwrap();
    }
    app.post_webhook(&json!({"conversation": "team", "sender": "ann", "text": "and you?"}))
        .await;
    w.run_once().await.unwrap();
    let seen = app.brain.requests().pop().unwrap();
    let texts: Vec<&str> = seen.context.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(texts, vec!["for everyone", "re: for everyone"]);
    // The reviewer's own view has its message and its answer.
    app.post_webhook(
        &json!({"conversation": "team", "sender": "ann", "text": "more?", "agent": "reviewer"}),
    )
    .await;
    w.run_once().await.unwrap();
    let seen = app.brain.requests().pop().unwrap();
    let texts: Vec<&str> = seen.context.iter().map(|t| t.text.as_str()).collect();
    assert!(
        texts.contains(&"only for the reviewer") && texts.contains(&"re: only for the reviewer"),
        "{texts:?}"
    );
    assert!(
        !texts.contains(&"re: and you?"),
        "the default agent's answer went to ann and default only"
    );
}

/// `per_sender_per_hour`: past it a sender's messages are taken (202) and stored, marked
/// `skipped: rate_limited_sender`, without a task; other senders are not held.
#[tokio::test]
async fn a_sender_past_the_hourly_limit_is_stored_without_an_answer() {
    let app = spawn_app_with(|s| {
        s.webhooks.get_mut("default").unwrap().per_sender_per_hour = 2;
    })
    .await;
    let mut task_ids = Vec::new();
    for (sender, n) in [("u1", 1), ("u1", 2), ("u1", 3), ("u2", 4), ("u1", 5)] {
        let r = app
            .post_webhook(
                &json!({"conversation": format!("c-{sender}"), "sender": sender,
                                  "text": format!("message {n}"), "message_id": format!("m{n}")}),
            )
            .await;
        assert_eq!(r.status(), 202);
        let body: Value = r.json().await.unwrap();
        task_ids.push((sender, body["task_id"].as_i64()));
    }
    let answered: Vec<bool> = task_ids.iter().map(|(_, t)| t.is_some()).collect();
    assert_eq!(answered, [true, true, false, true, false], "{task_ids:?}");
    assert_eq!(task_count(&app).await, 3);
    let skipped = app
        .admin_json("/admin/skipped?channel=webhook:default")
        .await;
    let items = skipped["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{skipped}");
    assert!(items.iter().all(|i| i["reason"] == "rate_limited_sender"));
}
