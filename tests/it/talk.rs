//! The Talk channel end to end: the real `App` (poller, worker, context engine, outbox, sink)
//! against the fake Talk server of `ctxgate-talk` (built from nextcloud/spreed `docs/chat.md`,
//! `docs/conversation.md` and `docs/bots.md`).

use std::time::Duration;

use ctxgate::config::{Secret, TalkMode, TalkSettings};
use ctxgate::outbox::Outbox;
use ctxgate::worker::Worker;
use ctxgate_talk::fake::{FakeTalk, Route, Tamper};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with};

const PASSWORD: &str = "app-password-of-the-assistant";
const BOT_SECRET: &str = "a-bot-secret-of-at-least-forty-characters-0123";
const WAIT: Duration = Duration::from_secs(20);

struct Talk {
    fake: FakeTalk,
    app: TestApp,
}

fn account(fake: &FakeTalk) -> TalkSettings {
    TalkSettings {
        base_url: fake.base_url(),
        user: "assistant".into(),
        password: Some(Secret::new(PASSWORD)),
        room_list_interval: Duration::from_millis(50),
        long_poll_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(5),
        max_backoff: Duration::from_millis(200),
        ..TalkSettings::default()
    }
}

async fn talk(tweak: impl FnOnce(&FakeTalk, &mut TalkSettings)) -> Talk {
    let fake = FakeTalk::start().await;
    fake.add_user("assistant", "Assistant", Some(PASSWORD));
    fake.add_user("alice", "Alice", Some("alice-pw"));
    fake.add_user("bob", "Bob", Some("bob-pw"));
    fake.set_long_poll_cap(Duration::from_millis(300));
    let mut settings = account(&fake);
    tweak(&fake, &mut settings);
    let app = spawn_app_with(|s| {
        s.talk.insert("main".into(), settings);
    })
    .await;
    // Talk stamps messages with the real time; the gateway's clock follows it.
    let now = chrono::Utc::now().timestamp_millis();
    app.advance(Duration::from_millis(
        (now - crate::helpers::START_MS).max(0) as u64,
    ));
    Talk { fake, app }
}

impl Talk {
    fn start_polling(&self) {
        let pollers = self.app.deps.talk_pollers.get().expect("pollers built");
        tokio::spawn(pollers["main"].current().run());
    }

    fn start_workers(&self) {
        tokio::spawn(Worker::new(self.app.deps.clone(), "talk-worker").run());
    }

    fn start_outbox(&self) {
        tokio::spawn(Outbox::new(self.app.deps.clone(), "talk-outbox").run());
    }

    /// Waits until the poller watches `room`, then moves Talk's clock past the second the
    /// account was first watched in: messages from that second count as history.
    async fn watching(&self, room: &str) {
        let pollers = self.app.deps.talk_pollers.get().expect("pollers built");
        let deadline = tokio::time::Instant::now() + WAIT;
        while !pollers["main"]
            .current()
            .status()
            .rooms
            .iter()
            .any(|r| r.token == room && r.cursor.is_some())
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "never watched {room}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.fake.advance_time(Duration::from_secs(2));
    }

    fn start_all(&self) {
        self.start_polling();
        self.start_workers();
        self.start_outbox();
    }

    /// The assistant's post number `skip + 1` in `room` carrying a ctxgate reference id.
    async fn answer(&self, room: &str, skip: usize) -> Value {
        fn ours(m: &Value) -> bool {
            m["actorId"] == "assistant"
                && m["referenceId"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("ctxgate:task:"))
        }
        loop {
            let posted: Vec<Value> = self.fake.messages(room).into_iter().filter(ours).collect();
            if let Some(answer) = posted.get(skip) {
                return answer.clone();
            }
            let newest = posted.last().map_or(0, |m| m["id"].as_i64().unwrap());
            self.fake
                .wait_for(room, |m| ours(m) && m["id"].as_i64() > Some(newest), WAIT)
                .await
                .unwrap_or_else(|| {
                    let log: Vec<String> = self
                        .fake
                        .requests()
                        .iter()
                        .map(|r| format!("{} {}?{} -> {:?}", r.method, r.path, r.query, r.status))
                        .collect();
                    panic!(
                        "no answer from the assistant in {room}; brain calls: {}; requests: {log:#?}",
                        self.app.brain.requests().len()
                    )
                });
        }
    }

    async fn stored_text(&self, room: &str, id: i64) -> Option<(String, bool)> {
        let store = &self.app.deps.store;
        let conv = store.find_conversation("talk:main", room).await.unwrap()?;
        let m = store
            .find_message(conv.id, &id.to_string())
            .await
            .unwrap()?;
        Some((m.text, m.deleted_at.is_some()))
    }

    async fn wait_stored(&self, room: &str, id: i64, f: impl Fn(&(String, bool)) -> bool) {
        // The store has no change feed: look again at a short interval, up to a deadline.
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(found) = self.stored_text(room, id).await
                && f(&found)
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "message {id} never stored as expected"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Talk {
    fn drop(&mut self) {
        self.app.deps.shutdown.cancel();
    }
}

fn mention(user: &str, name: &str) -> Value {
    json!({"mention-user1": {"type": "user", "id": user, "name": name}})
}

#[tokio::test]
async fn a_direct_message_gets_an_answer_without_reply_threading() {
    let t = talk(|_, _| {}).await;
    t.fake
        .create_room("dmalice1", 1, "alice", &["assistant", "alice"]);
    t.start_all();
    t.watching("dmalice1").await;
    let asked = t
        .fake
        .post("dmalice1", "alice", "hello there", json!([]), None);
    let answer = t.answer("dmalice1", 0).await;
    assert_eq!(answer["message"], "re: hello there");
    assert!(
        answer.get("parent").is_none(),
        "no replyTo in one-to-one rooms: {answer}"
    );
    let reference = answer["referenceId"].as_str().unwrap();
    assert!(reference.ends_with(":result"), "{reference}");
    // The answer is in history under the id Talk gave it, once.
    let answer_id = answer["id"].as_i64().unwrap();
    t.wait_stored("dmalice1", answer_id, |(text, _)| text == "re: hello there")
        .await;
    assert!(t.stored_text("dmalice1", asked).await.is_some());
    assert_eq!(t.app.brain.requests().len(), 1);
    // The poll lag and reachability are exported for Prometheus.
    let metrics = t
        .app
        .http
        .get(format!("{}/metrics", t.app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lag = metrics
        .lines()
        .find(|l| l.starts_with("ctxgate_channel_poll_lag_seconds{channel=\"talk:main\"}"))
        .unwrap_or_else(|| panic!("{metrics}"));
    let lag: f64 = lag.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((0.0..60.0).contains(&lag), "{lag}");
    assert!(
        metrics.contains("ctxgate_channel_up{channel=\"talk:main\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn group_rooms_answer_mentions_with_the_unmentioned_talk_as_context() {
    let t = talk(|_, _| {}).await;
    t.fake
        .create_room("team1234", 2, "Team", &["assistant", "alice", "bob"]);
    t.start_all();
    t.watching("team1234").await;
    let plain = t.fake.post(
        "team1234",
        "bob",
        "the code word is papaya",
        json!([]),
        None,
    );
    let chatter = t.fake.post(
        "team1234",
        "alice",
        "@all lunch?",
        json!({"mention-call1": {"type": "call", "id": "team1234", "name": "Team"}}),
        None,
    );
    t.wait_stored("team1234", chatter, |_| true).await;
    assert!(t.stored_text("team1234", plain).await.is_some());
    assert!(t.app.brain.requests().is_empty(), "no mention, no answer");
    let asked = t.fake.post(
        "team1234",
        "alice",
        "{mention-user1} what is the code word?",
        mention("assistant", "Assistant"),
        None,
    );
    let answer = t.answer("team1234", 0).await;
    assert_eq!(
        answer["parent"]["id"], asked,
        "threaded under the question: {answer}"
    );
    assert_eq!(answer["message"], "re: @Assistant what is the code word?");
    let request = &t.app.brain.requests()[0];
    assert!(
        request
            .context
            .iter()
            .any(|turn| turn.text.contains("papaya")),
        "context holds the un-mentioned message: {:?}",
        request.context
    );
    // A reply to the assistant's answer asks again without a mention.
    let answer_id = answer["id"].as_i64().unwrap();
    t.fake.post(
        "team1234",
        "bob",
        "and in French?",
        json!([]),
        Some(answer_id),
    );
    let second = t.answer("team1234", 1).await;
    assert_eq!(second["message"], "re: and in French?");
    assert_eq!(t.app.brain.requests().len(), 2);
}

#[tokio::test]
async fn edits_and_deletions_update_history() {
    let t = talk(|_, _| {}).await;
    t.fake
        .create_room("team5678", 2, "Team", &["assistant", "alice", "bob"]);
    t.start_polling();
    t.watching("team5678").await;
    let id = t
        .fake
        .post("team5678", "bob", "meet at 10", json!([]), None);
    t.wait_stored("team5678", id, |(text, _)| text == "meet at 10")
        .await;
    t.fake.edit("team5678", id, "bob", "meet at 11");
    t.wait_stored("team5678", id, |(text, _)| text == "meet at 11")
        .await;
    let gone = t
        .fake
        .post("team5678", "alice", "oops, secret", json!([]), None);
    t.wait_stored("team5678", gone, |_| true).await;
    t.fake.delete("team5678", gone, "alice");
    t.wait_stored("team5678", gone, |(_, deleted)| *deleted)
        .await;
}

#[tokio::test]
async fn old_history_is_context_only_and_the_bots_own_posts_are_not_answered() {
    let t = talk(|_, _| {}).await;
    t.fake
        .create_room("dmbob123", 1, "bob", &["assistant", "bob"]);
    let old = t.fake.post(
        "dmbob123",
        "bob",
        "from before the gateway",
        json!([]),
        None,
    );
    // The account is first watched after this message: it is history, not a question.
    t.fake.post_as(
        "dmbob123",
        "users",
        "assistant",
        "a manual post",
        json!([]),
        None,
        None,
    );
    t.start_all();
    t.wait_stored("dmbob123", old, |_| true).await;
    // Talk timestamps are whole seconds: the next message is from a later second.
    t.fake.advance_time(Duration::from_secs(2));
    let new = t
        .fake
        .post("dmbob123", "bob", "a new question", json!([]), None);
    let answer = t.answer("dmbob123", 0).await;
    assert_eq!(answer["message"], "re: a new question");
    let requests = t.app.brain.requests();
    assert_eq!(requests.len(), 1, "only the new message is answered");
    assert!(t.stored_text("dmbob123", new).await.is_some());
}

#[tokio::test]
async fn a_crash_between_post_and_record_posts_once() {
    let t = talk(|_, _| {}).await;
    t.fake
        .create_room("dmcrash1", 1, "alice", &["assistant", "alice"]);
    t.start_polling();
    t.start_workers();
    t.watching("dmcrash1").await;
    t.fake
        .post("dmcrash1", "alice", "are you there?", json!([]), None);
    t.app.brain.wait_for_calls(1).await;
    // Wait for the answer to reach the outbox, then deliver it the way a process that dies right
    // after posting would: claimed (attempt 1), posted, never recorded.
    let store = t.app.deps.store.clone();
    let lease = t.app.deps.settings.outbox.lease;
    let claimed = loop {
        let now = t.app.deps.clock.now_ms();
        if let Some(d) = store
            .claim_delivery("dying-process", now, lease.as_millis() as i64, 5)
            .await
            .unwrap()
        {
            break d;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(claimed.attempts, 1);
    let sink = t.app.deps.sinks["talk:main"].clone();
    let message = ctxgate_contract::OutboundMessage {
        idempotency_key: claimed.idempotency_key.clone(),
        task_id: claimed.task_id.map(|t| t.0),
        conversation: claimed.conversation.clone(),
        text: claimed.text.clone(),
        reply_to: claimed.reply_to.clone(),
        meta: claimed.meta.clone(),
        attempt: claimed.attempts,
    };
    let first = sink.deliver(&message).await.unwrap();
    // The lease runs out; another process takes the delivery over.
    t.app.advance(lease + Duration::from_secs(1));
    let outbox = Outbox::new(t.app.deps.clone(), "survivor");
    let outcome = outbox.run_once().await.unwrap();
    assert!(
        matches!(outcome, ctxgate::outbox::DeliverOnce::Delivered(_)),
        "{outcome:?}"
    );
    let posts: Vec<Value> = t
        .fake
        .messages("dmcrash1")
        .into_iter()
        .filter(|m| m["referenceId"] == claimed.idempotency_key.as_str())
        .collect();
    assert_eq!(posts.len(), 1, "exactly one post: {posts:?}");
    let delivered = store
        .deliveries_for_task(claimed.task_id.unwrap())
        .await
        .unwrap();
    assert_eq!(delivered[0].channel_message_id, first.channel_message_id);
    assert_eq!(delivered[0].attempts, 2);
}

#[tokio::test]
async fn long_answers_are_split_at_the_servers_limit() {
    let t = talk(|_, _| {}).await;
    t.fake.set_max_length(60);
    t.fake
        .create_room("dmlong12", 1, "alice", &["assistant", "alice"]);
    let long = "word ".repeat(40);
    t.app.brain.then_reply(long.trim());
    t.start_all();
    t.watching("dmlong12").await;
    t.fake
        .post("dmlong12", "alice", "tell me a lot", json!([]), None);
    t.answer("dmlong12", 3).await;
    let parts: Vec<Value> = t
        .fake
        .messages("dmlong12")
        .into_iter()
        .filter(|m| m["actorId"] == "assistant" && m["referenceId"] != "")
        .collect();
    assert_eq!(parts.len(), 4, "200 characters in parts of at most 60");
    assert!(
        parts
            .iter()
            .all(|p| p["message"].as_str().unwrap().chars().count() <= 60)
    );
    let joined: Vec<&str> = parts
        .iter()
        .map(|p| p["message"].as_str().unwrap())
        .collect();
    assert_eq!(joined.join(" "), long.trim());
    assert!(
        parts[1]["referenceId"]
            .as_str()
            .unwrap()
            .ends_with(":result:2")
    );
}

#[tokio::test]
async fn rate_limits_and_removal_are_survived() {
    let t = talk(|_, _| {}).await;
    t.fake
        .create_room("dmrate12", 1, "alice", &["assistant", "alice"]);
    t.fake.fail_next(Route::RoomList, 429, Some(0), 2);
    t.fake.fail_next(Route::Post, 503, None, 1);
    t.start_all();
    t.watching("dmrate12").await;
    t.fake
        .post("dmrate12", "alice", "still there?", json!([]), None);
    // The first post fails with 503; the outbox retries after its backoff (on the gateway's
    // clock, which the test moves once the failure is recorded).
    let store = t.app.deps.store.clone();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let failed = store
            .list_tasks(&Default::default())
            .await
            .unwrap()
            .into_iter()
            .next();
        if let Some(task) = failed {
            let d = store.deliveries_for_task(task.id).await.unwrap();
            if d.first().is_some_and(|d| d.last_error.is_some()) {
                break;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the 503 was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t.app.advance(Duration::from_secs(3600));
    t.app.deps.delivery_ready.notify_one();
    let answer = t.answer("dmrate12", 0).await;
    assert_eq!(answer["message"], "re: still there?");
    // Removed from the room: the poller stops polling it and keeps its history.
    t.fake.remove_participant("dmrate12", "assistant");
    let pollers = t.app.deps.talk_pollers.get().unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = pollers["main"].current().status();
        if status.rooms.iter().any(|r| r.token == "dmrate12" && r.left) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never noticed the removal: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let conv = t
        .app
        .deps
        .store
        .find_conversation("talk:main", "dmrate12")
        .await
        .unwrap();
    assert!(conv.is_some(), "history kept");
}

#[tokio::test]
async fn the_bot_webhook_mode_answers_signed_requests_only() {
    let fake = FakeTalk::start().await;
    fake.add_user("alice", "Alice", Some("alice-pw"));
    let base = fake.base_url();
    let app = spawn_app_with(|s| {
        s.talk.insert(
            "bots".into(),
            TalkSettings {
                base_url: base.clone(),
                mode: TalkMode::Bot,
                secret: Some(Secret::new(BOT_SECRET)),
                bot_name: "assistant".into(),
                ..TalkSettings::default()
            },
        );
    })
    .await;
    tokio::spawn(Worker::new(app.deps.clone(), "bot-worker").run());
    tokio::spawn(Outbox::new(app.deps.clone(), "bot-outbox").run());
    fake.create_room("botroom1", 2, "Team", &["alice"]);
    fake.install_bot(
        "assistant",
        BOT_SECRET,
        &format!("{}/talk/bots/bot", app.base),
        &["botroom1"],
    );
    fake.post("botroom1", "alice", "no question here", json!([]), None);
    let asked = fake.post(
        "botroom1",
        "alice",
        "@assistant what time is it?",
        json!([]),
        None,
    );
    let answer = fake
        .wait_for("botroom1", |m| m["actorType"] == "bots", WAIT)
        .await
        .expect("the bot answers");
    assert_eq!(answer["message"], "re: @assistant what time is it?");
    assert_eq!(answer["parent"]["id"], asked);
    assert_eq!(
        app.brain.requests().len(),
        1,
        "the unmentioned message got no answer"
    );
    assert!(
        app.brain.requests()[0]
            .context
            .iter()
            .any(|t| t.text == "no question here")
    );
    // A request signed with another secret is refused and stores nothing.
    for tamper in [
        Tamper::WrongSecret,
        Tamper::BodyAlteredAfterSigning,
        Tamper::MissingSignature,
    ] {
        let status = fake
            .send_bot_event_with("assistant", "botroom1", asked, tamper)
            .await;
        assert_eq!(status, 401, "{tamper:?}");
    }
    let status = fake
        .send_bot_event_with("assistant", "botroom1", asked, Tamper::WrongBackend)
        .await;
    assert_eq!(status, 403);
    // A replayed, correctly signed request is taken once.
    assert_eq!(
        fake.send_bot_event("assistant", "botroom1", asked).await,
        200
    );
    assert_eq!(app.brain.requests().len(), 1);
    app.deps.shutdown.cancel();
}

#[tokio::test]
async fn briefings_are_posted_into_talk_rooms() {
    let t = talk(|_, _| {}).await;
    t.fake
        .create_room("dmbrief1", 1, "alice", &["alice", "assistant"]);
    t.app.brain.then_reply("Good morning: two meetings today.");
    t.start_all();
    t.watching("dmbrief1").await;
    let created: Value = t
        .app
        .http
        .post(format!("{}/admin/schedules", t.app.base))
        .bearer_auth(crate::helpers::ADMIN_TOKEN)
        .json(
            &json!({"name": "morning", "cron": "0 7 * * *", "prompt": "Brief me.",
            "target": {"kind": "talk", "room": "dmbrief1"}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_i64().expect("created");
    let r = t
        .app
        .http
        .post(format!("{}/admin/schedules/{id}/run", t.app.base))
        .bearer_auth(crate::helpers::ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let posted = t.answer("dmbrief1", 0).await;
    assert_eq!(posted["message"], "Good morning: two meetings today.");
    assert!(posted.get("parent").is_none());
    // The briefing lives in the room's conversation, under the id Talk gave it.
    let answer_id = posted["id"].as_i64().unwrap();
    t.wait_stored("dmbrief1", answer_id, |(text, _)| {
        text.starts_with("Good morning")
    })
    .await;
}

#[tokio::test]
async fn slow_answers_are_acknowledged_once_and_acks_stay_out_of_context() {
    let t = talk(|_, s| s.ack_after = Duration::from_millis(50)).await;
    t.fake
        .create_room("dmslow12", 1, "alice", &["alice", "assistant"]);
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    t.app.brain.then(ctxgate::brain::Step::Gated(
        gate.clone(),
        ctxgate::brain::BrainReply::text("the slow answer".into(), Default::default()),
    ));
    t.start_all();
    t.watching("dmslow12").await;
    t.fake
        .post("dmslow12", "alice", "think hard", json!([]), None);
    let ack = t
        .fake
        .wait_for(
            "dmslow12",
            |m| {
                m["referenceId"]
                    .as_str()
                    .is_some_and(|r| r.ends_with(":ack"))
            },
            WAIT,
        )
        .await
        .expect("an acknowledgement");
    assert_eq!(ack["message"], "Working on it…");
    gate.notify_one();
    let answer = t.answer("dmslow12", 1).await;
    assert_eq!(answer["message"], "the slow answer");
    t.fake.post("dmslow12", "alice", "thanks", json!([]), None);
    t.answer("dmslow12", 2).await;
    let second = &t.app.brain.requests()[1];
    assert!(
        second
            .context
            .iter()
            .any(|turn| turn.text == "the slow answer")
    );
    assert!(
        !second
            .context
            .iter()
            .any(|turn| turn.text.contains("Working on it")),
        "acks are not context: {:?}",
        second.context
    );
    let acks = t
        .fake
        .messages("dmslow12")
        .into_iter()
        .filter(|m| {
            m["referenceId"]
                .as_str()
                .is_some_and(|r| r.ends_with(":ack"))
        })
        .count();
    assert_eq!(acks, 1);
}

/// A user flooding the assistant: past `per_sender_per_hour` their messages still enter
/// history but ask for no answer (`skipped: rate_limited_sender`); another user is answered.
#[tokio::test]
async fn a_flooding_user_is_held_to_the_hourly_limit() {
    let t = talk(|_, s| s.per_sender_per_hour = 3).await;
    t.fake
        .create_room("dmalice1", 1, "alice", &["assistant", "alice"]);
    t.fake
        .create_room("dmbob001", 1, "bob", &["assistant", "bob"]);
    t.start_polling();
    t.watching("dmalice1").await;
    t.watching("dmbob001").await;
    let flood: Vec<i64> = (0..6)
        .map(|n| {
            t.fake
                .post("dmalice1", "alice", &format!("flood {n}"), json!([]), None)
        })
        .collect();
    let from_bob = t.fake.post("dmbob001", "bob", "just one", json!([]), None);
    t.wait_stored("dmalice1", *flood.last().unwrap(), |_| true)
        .await;
    t.wait_stored("dmbob001", from_bob, |_| true).await;
    let store = &t.app.deps.store;
    let skipped = |room: &'static str, id: i64| async move {
        let conv = store
            .find_conversation("talk:main", room)
            .await
            .unwrap()
            .unwrap();
        let m = store
            .find_message(conv.id, &id.to_string())
            .await
            .unwrap()
            .unwrap();
        m.meta["skipped"].as_str().map(str::to_owned)
    };
    let mut outcome = Vec::new();
    for id in &flood {
        outcome.push(skipped("dmalice1", *id).await);
    }
    let limited = Some("rate_limited_sender".to_owned());
    assert_eq!(
        outcome,
        [None, None, None, limited.clone(), limited.clone(), limited],
        "the first three asked for answers, the rest were held"
    );
    assert_eq!(skipped("dmbob001", from_bob).await, None);
    let tasks = store.list_tasks(&Default::default()).await.unwrap();
    assert_eq!(tasks.len(), 4, "three for alice, one for bob");
    // The operator sees the held messages with their reason.
    let listed = t.app.admin_json("/admin/skipped?channel=talk:main").await;
    let reasons: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["rate_limited_sender"; 3]);
}
