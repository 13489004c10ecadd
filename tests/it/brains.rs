//! The brain providers against faithful fakes: wiremock servers answering in the shapes of the
//! OpenAI Chat Completions API reference (`POST /v1/chat/completions` → `choices[].message.
//! content`, `usage.prompt_tokens/completion_tokens`) and the Anthropic Messages API reference
//! (`POST /v1/messages` with `x-api-key` and `anthropic-version`, → `content[]` text blocks,
//! `usage.input_tokens/output_tokens`); the CLI brain with small shell scripts.

use std::time::Duration;

use chrono::Utc;
use ctxgate::brain::{
    AnthropicBrain, Brain, BrainError, BrainRequest, CliBrain, OpenAiBrain, RESTORED_NOTICE, Turn,
};
use ctxgate::config::{BrainKind, BrainSettings, CliOutput, Secret};
use ctxgate::worker::{Outcome, RunOnce};
use ctxgate_contract::Role;
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn turn(role: Role, speaker: &str, text: &str) -> Turn {
    Turn {
        role,
        speaker: speaker.into(),
        text: text.into(),
        timestamp: Utc::now(),
    }
}

fn request() -> BrainRequest {
    BrainRequest {
        task_id: 7,
        conversation_id: 3,
        system: "Be brief.".into(),
        restored_notice: None,
        context: vec![
            turn(Role::User, "Ann", "I like tea"),
            turn(Role::Assistant, "bot", "Noted"),
        ],
        message: turn(Role::User, "Ann", "What do I like?"),
        session: None,
    }
}

fn openai(base: &str) -> BrainSettings {
    BrainSettings {
        kind: BrainKind::Openai,
        base_url: Some(format!("{base}/v1")),
        model: Some("big-model".into()),
        fast_model: Some("small-model".into()),
        api_key: Some(Secret::new("sk-test")),
        timeout: Duration::from_secs(5),
        ..BrainSettings::default()
    }
}

fn chat_answer(text: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "big-model",
           "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": text}}],
           "usage": {"prompt_tokens": 31, "completion_tokens": 4, "total_tokens": 35}})
}

#[tokio::test]
async fn openai_sends_the_documented_shape_and_reads_answer_and_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test"))
        .and(body_partial_json(json!({
            "model": "big-model",
            "max_tokens": 1024,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Ann: I like tea"},
                {"role": "assistant", "content": "Noted"},
                {"role": "user", "content": "Ann: What do I like?"},
            ],
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(chat_answer("Tea.")))
        .expect(1)
        .mount(&server)
        .await;
    let brain = OpenAiBrain::new(&openai(&server.uri())).unwrap();
    let reply = brain.complete(&request()).await.unwrap();
    assert_eq!(reply.text, "Tea.");
    assert_eq!(
        (reply.usage.prompt_tokens, reply.usage.completion_tokens),
        (31, 4)
    );
}

#[tokio::test]
async fn openai_errors_are_decisions() {
    let server = MockServer::start().await;
    let brain = OpenAiBrain::new(&openai(&server.uri())).unwrap();
    let answer = |t: ResponseTemplate| Mock::given(method("POST")).respond_with(t).up_to_n_times(1);

    answer(ResponseTemplate::new(429).insert_header("retry-after", "7"))
        .mount(&server)
        .await;
    match brain.complete(&request()).await.unwrap_err() {
        BrainError::Transient { retry_after, .. } => {
            assert_eq!(retry_after, Some(Duration::from_secs(7)))
        }
        e => panic!("{e:?}"),
    }
    answer(ResponseTemplate::new(503)).mount(&server).await;
    assert!(matches!(
        brain.complete(&request()).await.unwrap_err(),
        BrainError::Transient { .. }
    ));
    answer(ResponseTemplate::new(400).set_body_string("{\"error\": \"bad model\"}"))
        .mount(&server)
        .await;
    match brain.complete(&request()).await.unwrap_err() {
        BrainError::Permanent(m) => assert!(m.contains("400") && m.contains("bad model"), "{m}"),
        e => panic!("{e:?}"),
    }
    answer(ResponseTemplate::new(200).set_body_string("<html>proxy error</html>"))
        .mount(&server)
        .await;
    match brain.complete(&request()).await.unwrap_err() {
        BrainError::Permanent(m) => {
            assert!(m.contains("<html>proxy error</html>"), "raw body kept: {m}")
        }
        e => panic!("{e:?}"),
    }
    let slow = BrainSettings {
        timeout: Duration::from_millis(200),
        ..openai(&server.uri())
    };
    answer(
        ResponseTemplate::new(200)
            .set_body_json(chat_answer("late"))
            .set_delay(Duration::from_secs(3)),
    )
    .mount(&server)
    .await;
    let brain = OpenAiBrain::new(&slow).unwrap();
    assert!(matches!(
        brain.complete(&request()).await.unwrap_err(),
        BrainError::Timeout(_)
    ));
}

#[tokio::test]
async fn openai_fast_completer_uses_the_fast_model() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(
            json!({"model": "small-model", "temperature": 0.0}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(chat_answer("{\"relevant\": [1]}")))
        .expect(1)
        .mount(&server)
        .await;
    let brain = OpenAiBrain::new(&openai(&server.uri())).unwrap();
    let (text, usage) = brain.fast().unwrap().complete("pick").await.unwrap();
    assert_eq!(text, "{\"relevant\": [1]}");
    assert_eq!(usage.prompt_tokens, 31);
}

fn anthropic(base: &str) -> BrainSettings {
    BrainSettings {
        kind: BrainKind::Anthropic,
        base_url: Some(base.into()),
        model: Some("claude-test".into()),
        api_key: Some(Secret::new("ak-test")),
        timeout: Duration::from_secs(5),
        ..BrainSettings::default()
    }
}

#[tokio::test]
async fn anthropic_keeps_the_system_prompt_apart_and_alternates_turns() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "ak-test"))
        .and(header("anthropic-version", "2023-06-01"))
        .and(body_partial_json(json!({
            "model": "claude-test",
            "system": format!("Be brief.\n\n{RESTORED_NOTICE}"),
            "messages": [
                {"role": "user", "content": "Ann: I like tea"},
                {"role": "assistant", "content": "Noted"},
                {"role": "user", "content": "Ann: What do I like?"},
            ],
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": "You like "}, {"type": "text", "text": "tea."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 40, "output_tokens": 6},
        })))
        .expect(1)
        .mount(&server)
        .await;
    let brain = AnthropicBrain::new(&anthropic(&server.uri())).unwrap();
    let mut req = request();
    req.restored_notice = Some(RESTORED_NOTICE.into());
    let reply = brain.complete(&req).await.unwrap();
    assert_eq!(reply.text, "You like tea.");
    assert_eq!(
        (reply.usage.prompt_tokens, reply.usage.completion_tokens),
        (40, 6)
    );

    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(529)
                .set_body_string("{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}"),
        )
        .mount(&server)
        .await;
    assert!(matches!(
        brain.complete(&request()).await.unwrap_err(),
        BrainError::Transient { .. }
    ));
}

fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::process::Command::new("chmod")
        .args(["+x", p.to_str().unwrap()])
        .status()
        .unwrap();
    p.display().to_string()
}

fn cli(dir: &std::path::Path, command: Vec<String>) -> BrainSettings {
    BrainSettings {
        kind: BrainKind::Cli,
        command,
        workdir: dir.join("work"),
        timeout: Duration::from_secs(10),
        ..BrainSettings::default()
    }
}

#[tokio::test]
async fn cli_reads_stdin_answers_on_stdout_in_a_clean_environment_and_folder() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        dir.path(),
        "agent.sh",
        r#"prompt=$(cat); echo "dir=$(basename "$PWD") secret=${CTXGATE_TEST_SECRET:-none} lines=$(printf '%s\n' "$prompt" | grep -c 'Ann')""#,
    );
    // Set in this process; the agent must not inherit it.
    unsafe { std::env::set_var("CTXGATE_TEST_SECRET", "leak") };
    let brain = CliBrain::new(&cli(dir.path(), vec![s]));
    let reply = brain.complete(&request()).await.unwrap();
    assert_eq!(reply.text, "dir=conversation-3 secret=none lines=2");
    assert!(!brain.keeps_sessions());
}

#[tokio::test]
async fn cli_failures_and_hangs_are_reported_and_the_process_group_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let fail = script(dir.path(), "fail.sh", "echo 'model overloaded' >&2; exit 3");
    let brain = CliBrain::new(&cli(dir.path(), vec![fail]));
    match brain.complete(&request()).await.unwrap_err() {
        BrainError::Permanent(m) => {
            assert!(m.contains("model overloaded") && m.contains('3'), "{m}")
        }
        e => panic!("{e:?}"),
    }
    let pids = dir.path().join("pids");
    let hang = script(
        dir.path(),
        "hang.sh",
        &format!(
            "sleep 30 & echo $! > {p}; echo $$ >> {p}; wait",
            p = pids.display()
        ),
    );
    let settings = BrainSettings {
        timeout: Duration::from_millis(300),
        ..cli(dir.path(), vec![hang])
    };
    let brain = CliBrain::new(&settings);
    assert!(matches!(
        brain.complete(&request()).await.unwrap_err(),
        BrainError::Timeout(_)
    ));
    // SIGKILL is delivered asynchronously: wait (bounded) until every process of the group is
    // gone or a zombie waiting to be reaped.
    let state = |pid: &str| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next()
            .unwrap_or("X")
            .to_owned()
    };
    let pids = std::fs::read_to_string(&pids).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    for pid in pids.split_whitespace() {
        while !matches!(state(pid).as_str(), "X" | "Z") {
            assert!(
                std::time::Instant::now() < deadline,
                "process {pid} still {}",
                state(pid)
            );
            tokio::task::yield_now().await;
        }
    }
}

#[tokio::test]
async fn cli_sessions_round_trip_through_json_output() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(
        dir.path(),
        "agent.sh",
        r#"cat >/dev/null; if [ "$1" = "--resume" ]; then [ "$2" = "gone" ] && exit 1; echo "{\"result\": \"resumed $2\", \"session_id\": \"$2\"}"; else echo 'log line'; echo '{"result": "fresh", "session_id": "abc", "usage": {"input_tokens": 9, "output_tokens": 2}}'; fi"#,
    );
    let settings = BrainSettings {
        resume_args: vec!["--resume".into(), "{session}".into()],
        output: CliOutput::Json,
        session_field: Some("session_id".into()),
        ..cli(dir.path(), vec![s])
    };
    let brain = CliBrain::new(&settings);
    assert!(brain.keeps_sessions());
    let first = brain.complete(&request()).await.unwrap();
    assert_eq!(
        (first.text.as_str(), first.session.as_deref()),
        ("fresh", Some("abc"))
    );
    assert_eq!(first.usage.prompt_tokens, 9);
    let mut again = request();
    again.session = first.session.clone();
    let second = brain.complete(&again).await.unwrap();
    assert_eq!(second.text, "resumed abc");
    again.session = Some("gone".into());
    assert!(matches!(
        brain.complete(&again).await.unwrap_err(),
        BrainError::SessionLost(_)
    ));
}

#[tokio::test]
async fn a_task_is_answered_by_each_brain_kind_through_the_worker() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(chat_answer("from openai")))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "content": [{"type": "text", "text": "from anthropic"}],
            "usage": {"input_tokens": 1, "output_tokens": 1}})))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let agent = script(dir.path(), "agent.sh", "cat >/dev/null; echo from cli");
    for (settings, expected) in [
        (openai(&server.uri()), "from openai"),
        (anthropic(&server.uri()), "from anthropic"),
        (cli(dir.path(), vec![agent.clone()]), "from cli"),
    ] {
        let app = crate::helpers::spawn_app_configured(|s| {
            s.brains.insert("default".into(), settings);
        })
        .await;
        let r = app
            .post_webhook(&json!({"conversation": "c", "sender": "u", "text": "hi"}))
            .await;
        assert_eq!(r.status(), 202);
        let task = r.json::<Value>().await.unwrap()["task_id"]
            .as_i64()
            .unwrap();
        assert_eq!(
            app.worker("w").run_once().await.unwrap(),
            RunOnce::Processed {
                task: ctxgate::domain::TaskId(task),
                outcome: Outcome::Completed
            }
        );
        let t = app.admin_json(&format!("/admin/tasks/{task}")).await;
        assert_eq!(t["task"]["result_text"], expected);
    }
}

#[tokio::test]
async fn a_failing_brain_hands_over_to_its_fallback() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(503))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "content": [{"type": "text", "text": "backup answer"}],
            "usage": {"input_tokens": 1, "output_tokens": 1}})))
        .expect(1)
        .mount(&server)
        .await;
    let app = crate::helpers::spawn_app_configured(|s| {
        s.brains.insert(
            "default".into(),
            BrainSettings {
                fallback: Some("backup".into()),
                ..openai(&server.uri())
            },
        );
        s.brains.insert("backup".into(), anthropic(&server.uri()));
    })
    .await;
    let r = app
        .post_webhook(&json!({"conversation": "c", "sender": "u", "text": "hi"}))
        .await;
    let task = r.json::<Value>().await.unwrap()["task_id"]
        .as_i64()
        .unwrap();
    app.worker("w").run_once().await.unwrap();
    let t = app.admin_json(&format!("/admin/tasks/{task}")).await;
    assert_eq!(t["task"]["status"], "completed");
    assert_eq!(t["task"]["result_text"], "backup answer");
    assert_eq!(t["task"]["context"]["brain"], "backup");
}

#[tokio::test]
async fn a_channel_prompt_replaces_the_brains_and_usage_is_totalled() {
    let app = crate::helpers::spawn_app_with(|s| {
        s.webhooks.get_mut("default").unwrap().system_prompt =
            Some("Answer as the help desk.".into());
    })
    .await;
    app.brain.then_reply("one").then_reply("two");
    for (sender, conv) in [("ann", "a"), ("ann", "b"), ("bob", "a")] {
        app.post_webhook(&json!({"conversation": conv, "sender": sender, "text": "hi"}))
            .await;
        app.worker("w").run_once().await.unwrap();
    }
    assert!(
        app.brain
            .requests()
            .iter()
            .all(|r| r.system == "Answer as the help desk.")
    );
    // Scripted usage: 10+5 for each scripted reply, 1+1 for the default one.
    let by_user = app.admin_json("/admin/usage?by=user").await;
    assert_eq!(
        by_user["items"],
        json!([
            {"key": "ann", "tasks": 2, "prompt_tokens": 20, "completion_tokens": 10,
             "triage_prompt_tokens": 0, "triage_completion_tokens": 0, "cost": 0.0},
            {"key": "bob", "tasks": 1, "prompt_tokens": 1, "completion_tokens": 1,
             "triage_prompt_tokens": 0, "triage_completion_tokens": 0, "cost": 0.0},
        ])
    );
    let by_day = app.admin_json("/admin/usage?by=day").await;
    assert_eq!(by_day["items"][0]["key"], "2026-01-01");
    assert_eq!(by_day["items"][0]["tasks"], 3);
    assert_eq!(app.admin_get("/admin/usage?by=planet").await.status(), 400);
}

#[tokio::test]
async fn a_500_then_success_is_one_attempt_and_prices_make_a_cost() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(chat_answer("after a hiccup")))
        .expect(1)
        .mount(&server)
        .await;
    let app = crate::helpers::spawn_app_configured(|s| {
        s.worker.fast_retries = 1;
        s.worker.fast_retry_backoff = Duration::from_millis(10);
        s.brains.insert(
            "default".into(),
            BrainSettings {
                prompt_price_per_million: Some(2.0),
                completion_price_per_million: Some(8.0),
                ..openai(&server.uri())
            },
        );
    })
    .await;
    let r = app
        .post_webhook(&json!({"conversation": "c", "sender": "u", "text": "hi"}))
        .await;
    let task = r.json::<Value>().await.unwrap()["task_id"]
        .as_i64()
        .unwrap();
    app.worker("w").run_once().await.unwrap();
    let t = app.admin_json(&format!("/admin/tasks/{task}")).await;
    assert_eq!(t["task"]["result_text"], "after a hiccup");
    assert_eq!(t["task"]["attempts"], 1);
    // 31 prompt tokens at 2 per million, 4 completion tokens at 8 per million.
    let cost = t["task"]["cost"].as_f64().unwrap();
    assert!((cost - 94e-6).abs() < 1e-12, "{cost}");
    let usage = app.admin_json("/admin/usage?by=brain").await;
    assert!((usage["items"][0]["cost"].as_f64().unwrap() - 94e-6).abs() < 1e-12);
}

#[tokio::test]
async fn anthropic_errors_are_decisions_too() {
    let server = MockServer::start().await;
    let brain = AnthropicBrain::new(&anthropic(&server.uri())).unwrap();
    let answer = |t: ResponseTemplate| Mock::given(method("POST")).respond_with(t).up_to_n_times(1);
    answer(ResponseTemplate::new(429).insert_header("retry-after", "12"))
        .mount(&server)
        .await;
    match brain.complete(&request()).await.unwrap_err() {
        BrainError::Transient { retry_after, .. } => {
            assert_eq!(retry_after, Some(Duration::from_secs(12)))
        }
        e => panic!("{e:?}"),
    }
    answer(ResponseTemplate::new(200).set_body_string("{\"content\": 5}"))
        .mount(&server)
        .await;
    match brain.complete(&request()).await.unwrap_err() {
        BrainError::Permanent(m) => assert!(m.contains("{\"content\": 5}"), "raw body kept: {m}"),
        e => panic!("{e:?}"),
    }
    answer(ResponseTemplate::new(401).set_body_string("invalid x-api-key"))
        .mount(&server)
        .await;
    assert!(matches!(
        brain.complete(&request()).await.unwrap_err(),
        BrainError::Permanent(_)
    ));
    let slow = BrainSettings {
        timeout: Duration::from_millis(200),
        ..anthropic(&server.uri())
    };
    answer(ResponseTemplate::new(200).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    let brain = AnthropicBrain::new(&slow).unwrap();
    assert!(matches!(
        brain.complete(&request()).await.unwrap_err(),
        BrainError::Timeout(_)
    ));
}
