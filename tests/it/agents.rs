//! Several agents behind one gateway: addressing in a Talk room (the fake Talk server of
//! `ctxgate-talk`, built from nextcloud/spreed `docs/chat.md` and `docs/conversation.md`), each
//! agent's own brain and audience, failures kept to one agent, sessions renewed per agent, and
//! the agents admin API.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ctxgate::app::{App, Overrides};
use ctxgate::brain::{Brain, BrainError, ScriptedBrain, Step};
use ctxgate::clock::Clock;
use ctxgate::config::{AgentSettings, BrainSettings, Secret, Settings, TalkSettings};
use ctxgate::deps::Deps;
use ctxgate::domain::Usage;
use ctxgate::outbox::Outbox;
use ctxgate::worker::Worker;
use ctxgate_talk::fake::FakeTalk;
use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, START_MS, test_settings};

const PASSWORD: &str = "app-password-of-the-assistant";
const WAIT: Duration = Duration::from_secs(20);

fn agent(id: &str, name: &str, brain: &str) -> AgentSettings {
    AgentSettings {
        id: id.into(),
        name: Some(name.into()),
        brain: Some(brain.into()),
        default: false,
        ..AgentSettings::implicit()
    }
}

struct Gateway {
    deps: Deps,
    base: String,
    clock: Clock,
    _dir: tempfile::TempDir,
}

/// The real `App` with the given agents and scripted brains (by brain name).
async fn gateway(
    brains: &[(&str, &ScriptedBrain)],
    tweak: impl FnOnce(&mut Settings, &std::path::Path),
) -> Gateway {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings(dir.path());
    for (name, _) in brains {
        settings
            .brains
            .insert((*name).to_owned(), BrainSettings::default());
    }
    tweak(&mut settings, dir.path());
    let clock = Clock::manual(START_MS);
    let overrides = Overrides {
        clock: Some(clock.clone()),
        brains: brains
            .iter()
            .map(|(n, b)| ((*n).to_owned(), Arc::new((*b).clone()) as Arc<dyn Brain>))
            .collect::<HashMap<_, _>>(),
    };
    let app = App::build_with(settings, overrides).await.unwrap();
    let (address, deps) = app.spawn_http_only();
    Gateway {
        deps,
        base: format!("http://{address}"),
        clock,
        _dir: dir,
    }
}

impl Gateway {
    async fn admin(&self, method: reqwest::Method, path: &str) -> (u16, Value) {
        let r = reqwest::Client::new()
            .request(method, format!("{}/admin{path}", self.base))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn webhook(&self, body: Value) -> (u16, Value) {
        let raw = serde_json::to_vec(&body).unwrap();
        let ts = chrono::Utc::now().timestamp();
        let r = reqwest::Client::new()
            .post(format!("{}/webhooks/default", self.base))
            .header("content-type", "application/json")
            .header(ctxgate_webhook::signature::TIMESTAMP_HEADER, ts.to_string())
            .header(
                ctxgate_webhook::signature::SIGNATURE_HEADER,
                ctxgate_webhook::signature::sign(crate::helpers::SECRET.as_bytes(), ts, &raw),
            )
            .body(raw)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Runs one worker pass over every due task.
    async fn work(&self) {
        let worker = Worker::new(self.deps.clone(), "agents-worker");
        while !matches!(
            worker.run_once().await.unwrap(),
            ctxgate::worker::RunOnce::Empty
        ) {}
    }
}

fn texts(brain: &ScriptedBrain, n: usize) -> Vec<String> {
    brain.requests()[n]
        .context
        .iter()
        .map(|t| t.text.clone())
        .collect()
}

/// Two agents in a group room: a message mentioning both gets two answers, each from its own
/// brain, each context holding only what its audience allows; one agent's brain failing still
/// lets the other answer, and the failure is reported in the failing agent's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_in_a_talk_room_each_see_their_audience_and_fail_alone() {
    let fake = FakeTalk::start().await;
    fake.add_user("assistant", "Assistant", Some(PASSWORD));
    fake.add_user("alice", "Alice", Some("alice-pw"));
    fake.create_room("team1234", 2, "Team", &["alice", "assistant"]);
    fake.set_long_poll_cap(Duration::from_millis(300));
    let reviewer = ScriptedBrain::new();
    let planner = ScriptedBrain::new();
    let gw = gateway(&[("rb", &reviewer), ("pb", &planner)], |s, _| {
        s.talk.insert(
            "main".into(),
            TalkSettings {
                base_url: fake.base_url(),
                user: "assistant".into(),
                password: Some(Secret::new(PASSWORD)),
                room_list_interval: Duration::from_millis(50),
                long_poll_timeout: Duration::from_secs(1),
                request_timeout: Duration::from_secs(5),
                max_backoff: Duration::from_millis(200),
                ..TalkSettings::default()
            },
        );
        s.agents = vec![
            AgentSettings {
                default: true,
                ..agent("reviewer", "Reviewer", "rb")
            },
            AgentSettings {
                serves: vec!["talk:main".into()],
                ..agent("planner", "Planner", "pb")
            },
        ];
    })
    .await;
    let now = chrono::Utc::now().timestamp_millis();
    gw.clock
        .advance(Duration::from_millis((now - START_MS).max(0) as u64));
    let poller = gw.deps.talk_pollers.get().unwrap()["main"].current();
    tokio::spawn(poller.clone().run());
    tokio::spawn(Outbox::new(gw.deps.clone(), "agents-outbox").run());
    let deadline = tokio::time::Instant::now() + WAIT;
    while !poller
        .status()
        .rooms
        .iter()
        .any(|r| r.token == "team1234" && r.cursor.is_some())
    {
        assert!(tokio::time::Instant::now() < deadline, "never watched");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    fake.advance_time(Duration::from_secs(2));

    // Chatter for everyone; a note only for the reviewer; then a question to both.
    fake.post(
        "team1234",
        "alice",
        "lunch at noon, everyone",
        json!([]),
        None,
    );
    fake.post(
        "team1234",
        "alice",
        "@reviewer only you: the secret-review-note",
        json!([]),
        None,
    );
    let answer = |prefix: &'static str, skip: usize| {
        let fake = &fake;
        async move {
            let deadline = tokio::time::Instant::now() + WAIT;
            loop {
                let found: Vec<Value> = fake
                    .messages("team1234")
                    .into_iter()
                    .filter(|m| {
                        m["actorId"] == "assistant"
                            && m["message"].as_str().is_some_and(|t| t.starts_with(prefix))
                    })
                    .collect();
                if found.len() > skip {
                    return found[skip].clone();
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no answer starting {prefix:?}: {:#?}",
                    fake.messages("team1234")
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    // The poller stores the messages; the worker answers what is due.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        gw.work().await;
        if reviewer.requests().len() == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "reviewer never asked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = answer("Reviewer: re: @reviewer only you", 0).await;
    assert!(
        first["parent"]["message"]
            .as_str()
            .unwrap()
            .contains("secret-review-note")
    );
    assert!(planner.requests().is_empty(), "the planner was not asked");

    fake.post(
        "team1234",
        "alice",
        "@Reviewer and @planner: what next?",
        json!([]),
        None,
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        gw.work().await;
        if reviewer.requests().len() == 2 && planner.requests().len() == 1 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "both agents asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    answer("Reviewer: re: @Reviewer and @planner", 0).await;
    answer("Planner: re: @Reviewer and @planner", 0).await;
    // The planner sees what was said to everyone, never the reviewer's note or its answers.
    let planner_saw = texts(&planner, 0);
    assert!(
        planner_saw.iter().any(|t| t.contains("lunch at noon")),
        "{planner_saw:?}"
    );
    assert!(
        !planner_saw
            .iter()
            .any(|t| t.contains("secret-review-note") || t.starts_with("re: ")),
        "{planner_saw:?}"
    );
    // The reviewer sees its note and its own earlier answer.
    let reviewer_saw = texts(&reviewer, 1);
    assert!(
        reviewer_saw
            .iter()
            .any(|t| t.contains("secret-review-note"))
    );
    assert!(
        reviewer_saw
            .iter()
            .any(|t| t.starts_with("re: @reviewer only you"))
    );
    assert_eq!(
        planner.requests()[0].message.text,
        "@Reviewer and @planner: what next?"
    );

    // The planner's brain fails for good; the reviewer still answers.
    planner.then(Step::Fail(BrainError::Permanent("model gone".into())));
    fake.post(
        "team1234",
        "alice",
        "@planner @reviewer once more",
        json!([]),
        None,
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        gw.work().await;
        if reviewer.requests().len() == 3 && planner.requests().len() == 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "both agents asked again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gw.work().await;
    answer("Reviewer: re: @planner @reviewer once more", 0).await;
    let notice = answer("Planner could not answer", 0).await;
    assert!(
        notice["parent"]["message"]
            .as_str()
            .unwrap()
            .contains("once more")
    );
    let (status, agents) = gw.admin(reqwest::Method::GET, "/agents").await;
    assert_eq!(status, 200);
    let by_id = |id: &str| {
        agents["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_id("planner")["status"], "error");
    assert!(
        by_id("planner")["last_error"]
            .as_str()
            .unwrap()
            .contains("model gone")
    );
    assert_eq!(by_id("reviewer")["status"], "idle");
    assert_eq!(by_id("reviewer")["default"], true);
}

/// A brain that keeps sessions, per agent: resumed with only what is new; a new session,
/// restored from the store with the notice, when the prompt file changes, after an admin
/// reset, after the idle timeout and past the token ceiling. Webhooks name the agent.
#[tokio::test]
async fn agent_sessions_are_renewed_on_prompt_change_reset_idle_and_token_ceiling() {
    let keeper = ScriptedBrain::with_sessions();
    let other = ScriptedBrain::new();
    let prompt_dir = tempfile::tempdir().unwrap();
    let prompt = prompt_dir.path().join("keeper.md");
    std::fs::write(&prompt, "You are the keeper, version 1.").unwrap();
    let prompt_file = prompt.clone();
    let gw = gateway(&[("kb", &keeper), ("ob", &other)], move |s, _| {
        s.agents = vec![
            AgentSettings {
                system_prompt_file: Some(prompt_file),
                session_max_input_tokens: 1_000,
                ..agent("keeper", "Keeper", "kb")
            },
            AgentSettings {
                default: true,
                ..agent("other", "Other", "ob")
            },
        ];
        s.worker.retry_backoff = vec![Duration::from_millis(1)];
    })
    .await;
    let reply = |session: &str, prompt_tokens: u64| {
        Step::Reply(ctxgate::brain::BrainReply {
            text: format!("kept in {session}"),
            usage: Usage {
                prompt_tokens,
                completion_tokens: 1,
            },
            actions: Vec::new(),
            session: Some(session.into()),
        })
    };
    let ask = |text: &'static str| {
        let gw = &gw;
        async move {
            let (status, body) = gw
                .webhook(json!({
                    "conversation": "c1", "sender": "alice", "text": text,
                    "agent": "keeper",
                }))
                .await;
            assert_eq!(status, 202, "{body}");
            gw.work().await;
        }
    };
    keeper.then(reply("s1", 100));
    ask("first").await;
    let (status, _) = gw
        .webhook(json!({
            "conversation": "c1", "sender": "bob", "text": "a note in between",
            "trigger": false,
        }))
        .await;
    assert_eq!(status, 202);
    keeper.then(reply("s1", 100));
    ask("second").await;
    let r = keeper.requests();
    assert_eq!(
        (r[1].session.as_deref(), r[1].restored_notice.as_deref()),
        (Some("s1"), None),
        "resumed"
    );
    assert_eq!(
        r[1].context
            .iter()
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>(),
        ["a note in between"],
        "only what is new to the session (it wrote its own answer)"
    );
    assert_eq!(r[1].system, "You are the keeper, version 1.");

    // The prompt file changes: a new session, restored from the store.
    std::fs::write(&prompt, "You are the keeper, version 2.").unwrap();
    keeper.then(reply("s2", 100));
    ask("third").await;
    let r = &keeper.requests()[2];
    assert_eq!(r.session, None);
    assert!(r.restored_notice.is_some());
    assert_eq!(r.system, "You are the keeper, version 2.");
    let history: Vec<&str> = r.context.iter().map(|t| t.text.as_str()).collect();
    assert!(
        history.contains(&"first") && history.contains(&"second"),
        "{history:?}"
    );

    // An admin reset.
    let (status, body) = gw
        .admin(reqwest::Method::POST, "/agents/keeper/reset")
        .await;
    assert_eq!((status, &body), (200, &json!({ "sessions_reset": 1 })));
    assert_eq!(
        gw.admin(reqwest::Method::POST, "/agents/nobody/reset")
            .await
            .0,
        404
    );
    keeper.then(reply("s3", 100));
    ask("fourth").await;
    let r = &keeper.requests()[3];
    assert!(r.session.is_none() && r.restored_notice.is_some());

    // Idle past the timeout (30 minutes by default).
    gw.clock.advance(Duration::from_secs(31 * 60));
    keeper.then(reply("s4", 900));
    ask("fifth").await;
    let r = &keeper.requests()[4];
    assert!(r.session.is_none() && r.restored_notice.is_some());
    // s4 took in 900 tokens; one more resumed call passes the 1,000 ceiling.
    keeper.then(reply("s4", 200));
    ask("sixth").await;
    assert_eq!(keeper.requests()[5].session.as_deref(), Some("s4"));
    keeper.then(reply("s5", 10));
    ask("seventh").await;
    let r = &keeper.requests()[6];
    assert!(r.session.is_none() && r.restored_notice.is_some());

    // Each renewal is explained on the task.
    let (_, tasks) = gw.admin(reqwest::Method::GET, "/tasks?limit=50").await;
    let mut reasons: Vec<String> = Vec::new();
    for t in tasks["items"].as_array().unwrap().iter().rev() {
        let (_, detail) = gw
            .admin(reqwest::Method::GET, &format!("/tasks/{}", t["id"]))
            .await;
        let context = if detail["context"].is_null() {
            &detail["task"]["context"]
        } else {
            &detail["context"]
        };
        if let Some(r) = context["session_renewed"].as_str() {
            reasons.push(r.to_owned());
        }
    }
    assert_eq!(
        reasons,
        ["prompt_changed", "admin_reset", "idle", "token_ceiling"]
    );
    assert!(
        other.requests().is_empty(),
        "the other agent was never asked"
    );

    // The agents API shows the keeper's session.
    let (_, agents) = gw.admin(reqwest::Method::GET, "/agents").await;
    let keeper_status = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "keeper")
        .unwrap()
        .clone();
    assert_eq!(keeper_status["sessions"], 1);
    assert_eq!(keeper_status["max_session_input_tokens"], 10);
    assert_eq!(keeper_status["status"], "idle");

    // Unknown agents are refused at intake, naming the agent.
    let (status, body) = gw
        .webhook(json!({
            "conversation": "c1", "sender": "alice", "text": "hi", "agent": "ghost",
        }))
        .await;
    assert!((400..500).contains(&status), "{status} {body}");
    assert!(body.to_string().contains("ghost"), "{body}");
}

/// Talk's bot mode (nextcloud/spreed `docs/bots.md`: signed webhook events in, bot messages
/// out) routes agents like the poller: `@name` addresses each agent named, each answers from
/// its own brain, and an agent's context leaves out what was addressed only to another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_addressed_in_talk_bot_mode_too() {
    const BOT_SECRET: &str = "a-bot-secret-of-at-least-forty-characters-0123";
    let fake = FakeTalk::start().await;
    fake.add_user("alice", "Alice", Some("alice-pw"));
    fake.create_room("botroom1", 2, "Team", &["alice"]);
    let reviewer = ScriptedBrain::new();
    let planner = ScriptedBrain::new();
    let gw = gateway(&[("rb", &reviewer), ("pb", &planner)], |s, _| {
        s.talk.insert(
            "bots".into(),
            TalkSettings {
                base_url: fake.base_url(),
                mode: ctxgate::config::TalkMode::Bot,
                secret: Some(Secret::new(BOT_SECRET)),
                bot_name: "assistant".into(),
                ..TalkSettings::default()
            },
        );
        s.agents = vec![
            AgentSettings {
                default: true,
                ..agent("reviewer", "Reviewer", "rb")
            },
            AgentSettings {
                serves: vec!["talk:bots".into()],
                ..agent("planner", "Planner", "pb")
            },
        ];
    })
    .await;
    tokio::spawn(Worker::new(gw.deps.clone(), "bot-agents-worker").run());
    tokio::spawn(Outbox::new(gw.deps.clone(), "bot-agents-outbox").run());
    fake.install_bot(
        "assistant",
        BOT_SECRET,
        &format!("{}/talk/bots/bot", gw.base),
        &["botroom1"],
    );
    let bot_answers = |n: usize| {
        let fake = &fake;
        async move {
            let deadline = tokio::time::Instant::now() + WAIT;
            loop {
                let found: Vec<String> = fake
                    .messages("botroom1")
                    .into_iter()
                    .filter(|m| m["actorType"] == "bots")
                    .map(|m| m["message"].as_str().unwrap_or_default().to_owned())
                    .collect();
                if found.len() >= n {
                    return found;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "expected {n} bot answers: {:#?}",
                    fake.messages("botroom1")
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };

    fake.post("botroom1", "alice", "lunch at noon", json!([]), None);
    fake.post(
        "botroom1",
        "alice",
        "@reviewer only you: the secret-review-note",
        json!([]),
        None,
    );
    let first = bot_answers(1).await;
    assert!(
        first[0].starts_with("Reviewer: re: @reviewer only you"),
        "{first:?}"
    );
    assert!(planner.requests().is_empty(), "the planner was not asked");

    fake.post(
        "botroom1",
        "alice",
        "@Planner and @reviewer: what next?",
        json!([]),
        None,
    );
    let all = bot_answers(3).await;
    assert!(
        all.iter()
            .any(|a| a.starts_with("Planner: re: @Planner and @reviewer"))
    );
    assert_eq!(
        all.iter()
            .filter(|a| a.starts_with("Reviewer: re: @Planner and @reviewer"))
            .count(),
        1,
        "{all:?}"
    );
    assert_eq!(reviewer.requests().len(), 2);
    assert_eq!(planner.requests().len(), 1);
    let planner_saw = texts(&planner, 0);
    assert!(
        planner_saw.iter().any(|t| t == "lunch at noon"),
        "{planner_saw:?}"
    );
    assert!(
        !planner_saw.iter().any(|t| t.contains("secret-review-note")),
        "the note addressed to the reviewer only: {planner_saw:?}"
    );
    let reviewer_saw = texts(&reviewer, 1);
    assert!(
        reviewer_saw
            .iter()
            .any(|t| t.contains("secret-review-note"))
    );
    gw.deps.shutdown.cancel();
}

/// A briefing is written by the default agent of the channel it goes to: that agent's brain is
/// asked with that agent's prompt, and the task records the agent.
#[tokio::test]
async fn briefings_are_written_by_the_target_channels_default_agent() {
    let first = ScriptedBrain::new();
    let chief = ScriptedBrain::new();
    let gw = gateway(&[("fb", &first), ("cb", &chief)], |s, _| {
        s.agents = vec![
            agent("first", "First", "fb"),
            AgentSettings {
                default: true,
                system_prompt: Some("You are the chief of staff.".into()),
                ..agent("chief", "Chief", "cb")
            },
        ];
    })
    .await;
    let r = reqwest::Client::new()
        .post(format!("{}/admin/schedules", gw.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({
            "name": "morning", "cron": "0 7 * * *", "prompt": "Summarise the day.",
            "target": {"kind": "webhook", "webhook": "default", "conversation": "me"},
            "brain": "cb",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let id = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let (status, fired) = gw
        .admin(reqwest::Method::POST, &format!("/schedules/{id}/run"))
        .await;
    assert_eq!(status, 202, "{fired}");
    gw.work().await;
    let (_, task) = gw
        .admin(
            reqwest::Method::GET,
            &format!("/tasks/{}", fired["task_id"].as_i64().unwrap()),
        )
        .await;
    assert_eq!(task["task"]["agent"], "chief", "{task}");
    assert_eq!(task["task"]["status"], "completed", "{task}");
    let asked = chief.requests();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].system.contains("chief of staff"),
        "{:?}",
        asked[0].system
    );
    assert!(first.requests().is_empty());
}
