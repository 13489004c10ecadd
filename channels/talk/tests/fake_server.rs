//! Behaviour of the fake Talk server (`ctxgate_talk::fake`), exercised with raw HTTP the way
//! the spreed docs describe it (no ctxgate client code involved).
#![cfg(feature = "fake")]

use ctxgate_talk::fake::{FakeTalk, Route, Tamper, bot_actor_id, talk_signature};
use hmac::{Hmac, Mac};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use sha2::Sha256;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const API: &str = "/ocs/v2.php/apps/spreed/api";
const SECRET: &str = "0123456789012345678901234567890123456789-secret";

/// A raw OCS client for one user.
struct Api {
    base: String,
    user: String,
    pass: String,
    http: reqwest::Client,
}

struct Resp {
    status: u16,
    headers: HeaderMap,
    text: String,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }
    fn data(&self) -> Value {
        self.json()["ocs"]["data"].clone()
    }
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    }
}

impl Api {
    fn new(fake: &FakeTalk, user: &str, pass: &str) -> Api {
        Api {
            base: fake.base_url(),
            user: user.into(),
            pass: pass.into(),
            http: reqwest::Client::new(),
        }
    }

    fn req(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{}", self.base, path))
            .basic_auth(&self.user, Some(&self.pass))
            .header("OCS-APIRequest", "true")
            .header("Accept", "application/json")
    }

    async fn send(rb: reqwest::RequestBuilder) -> Resp {
        let r = rb.send().await.expect("request");
        Resp {
            status: r.status().as_u16(),
            headers: r.headers().clone(),
            text: r.text().await.unwrap(),
        }
    }

    async fn get(&self, path: &str) -> Resp {
        Self::send(self.req(Method::GET, path)).await
    }

    async fn chat(&self, token: &str, query: &str) -> Resp {
        self.get(&format!("{API}/v1/chat/{token}?{query}")).await
    }

    async fn post_json(&self, path: &str, body: Value) -> Resp {
        Self::send(self.req(Method::POST, path).json(&body)).await
    }

    async fn post_form(&self, path: &str, form: &str) -> Resp {
        Self::send(
            self.req(Method::POST, path)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(form.to_string()),
        )
        .await
    }
}

/// bot (the gateway's user, with an app password), alice (with one), bob (without);
/// a one-to-one room alice↔bot and a group room with all three.
async fn setup() -> (FakeTalk, Api) {
    let fake = FakeTalk::start().await;
    fake.add_user("bot", "Gateway Bot", Some("bot-app-pass"));
    fake.add_user("alice", "Alice A.", Some("alice-pass"));
    fake.add_user("bob", "Bob", None);
    fake.create_room("dm4alice", 1, "", &["alice", "bot"]);
    fake.create_room("team1234", 2, "Team", &["alice", "bot", "bob"]);
    let api = Api::new(&fake, "bot", "bot-app-pass");
    (fake, api)
}

fn hmac_hex(secret: &str, random: &str, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(random.as_bytes());
    mac.update(body.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn ids(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn auth_csrf_and_formats() {
    let (fake, api) = setup().await;
    let rooms = format!("{API}/v4/room");

    let anon = Api::send(
        reqwest::Client::new()
            .get(format!("{}{rooms}", fake.base_url()))
            .header("OCS-APIRequest", "true")
            .header("Accept", "application/json"),
    )
    .await;
    assert_eq!(anon.status, 401);
    assert_eq!(anon.json()["ocs"]["meta"]["statuscode"], 997);
    assert_eq!(anon.json()["ocs"]["meta"]["status"], "failure");
    assert_eq!(
        Api::new(&fake, "bot", "wrong").get(&rooms).await.status,
        401
    );
    // A user without an app password cannot log in at all.
    assert_eq!(Api::new(&fake, "bob", "").get(&rooms).await.status, 401);

    let ok = api.get(&rooms).await;
    assert_eq!(ok.status, 200);
    assert_eq!(
        ok.json()["ocs"]["meta"],
        json!({"status": "ok", "statuscode": 200, "message": "OK"})
    );
    assert_eq!(ok.data().as_array().unwrap().len(), 2);
    assert!(ok.header("X-Nextcloud-Talk-Hash").is_some());

    // Chat endpoints are public pages: a failed login is a guest who is not a participant.
    let bad = Api::new(&fake, "bot", "wrong")
        .chat("team1234", "lookIntoFuture=0")
        .await;
    assert_eq!(bad.status, 404);

    // Without `OCS-APIRequest: true` the CSRF check fails (before the controller runs).
    let no_header = Api::send(
        reqwest::Client::new()
            .get(format!("{}{rooms}", fake.base_url()))
            .basic_auth("bot", Some("bot-app-pass"))
            .header("Accept", "application/json"),
    )
    .await;
    assert_eq!(no_header.status, 412);
    assert_eq!(no_header.json(), json!({"message": "CSRF check failed"}));

    // Without Accept: application/json (or format=json) OCS answers XML.
    let xml = Api::send(
        reqwest::Client::new()
            .get(format!("{}{rooms}", fake.base_url()))
            .basic_auth("bot", Some("bot-app-pass"))
            .header("OCS-APIRequest", "true"),
    )
    .await;
    assert_eq!(xml.status, 200);
    assert!(
        xml.header("content-type")
            .unwrap()
            .starts_with("application/xml")
    );
    assert!(xml.text.starts_with("<?xml"), "{}", xml.text);
    assert!(xml.text.contains("<statuscode>200</statuscode>"));

    // Capabilities are public.
    let caps = Api::send(reqwest::Client::new().get(format!(
        "{}/ocs/v2.php/cloud/capabilities?format=json",
        fake.base_url()
    )))
    .await;
    assert_eq!(caps.status, 200);
    assert_eq!(
        caps.data()["capabilities"]["spreed"]["config"]["chat"]["max-length"],
        32000
    );
    fake.shutdown().await;
}

#[tokio::test]
async fn long_poll_wakes_when_a_message_arrives() {
    let (fake, api) = setup().await;
    fake.set_long_poll_cap(Duration::from_secs(5));
    let last = fake.last_message_id("team1234");

    let poller = tokio::spawn(async move {
        let started = Instant::now();
        let r = api
            .chat(
                "team1234",
                &format!("lookIntoFuture=1&lastKnownMessageId={last}&timeout=30&setReadMarker=0"),
            )
            .await;
        (r, started.elapsed())
    });
    // Give the poll time to start waiting, then post from "another client".
    tokio::time::sleep(Duration::from_millis(150)).await;
    let id = fake.post("team1234", "alice", "wake up", Value::Null, None);

    let (r, took) = poller.await.unwrap();
    assert_eq!(r.status, 200);
    assert!(
        took < Duration::from_secs(2),
        "woke by the post, not the cap: {took:?}"
    );
    assert_eq!(ids(&r.data()), vec![id]);
    assert_eq!(r.header("X-Chat-Last-Given").unwrap(), id.to_string());
    assert!(r.header("X-Chat-Last-Common-Read").is_some());
    let chat = fake
        .requests()
        .into_iter()
        .find(|q| q.route == Route::Chat)
        .unwrap();
    assert_eq!(chat.status, Some(200));
    fake.shutdown().await;
}

#[tokio::test]
async fn long_poll_ends_with_304_after_the_cap() {
    let (fake, api) = setup().await;
    fake.set_long_poll_cap(Duration::from_millis(200));
    let last = fake.last_message_id("team1234");
    let started = Instant::now();
    let r = api
        .chat(
            "team1234",
            &format!("lookIntoFuture=1&lastKnownMessageId={last}&timeout=30"),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(r.status, 304);
    assert!(r.text.is_empty());
    assert!(r.header("X-Chat-Last-Given").is_none());
    assert!(took >= Duration::from_millis(190), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");

    // timeout=0 answers at once.
    let started = Instant::now();
    let r = api
        .chat(
            "team1234",
            &format!("lookIntoFuture=1&lastKnownMessageId={last}&timeout=0"),
        )
        .await;
    assert_eq!(r.status, 304);
    assert!(started.elapsed() < Duration::from_millis(150));
    fake.shutdown().await;
}

#[tokio::test]
async fn history_and_future_paging_with_last_given() {
    let (fake, api) = setup().await;
    let m: Vec<i64> = (1..=5)
        .map(|i| fake.post("team1234", "alice", &format!("m{i}"), Value::Null, None))
        .collect();

    // History: newest first; X-Chat-Last-Given is the oldest returned (next offset).
    let r = api.chat("team1234", "lookIntoFuture=0&limit=2").await;
    assert_eq!(ids(&r.data()), vec![m[4], m[3]]);
    assert_eq!(r.header("X-Chat-Last-Given").unwrap(), m[3].to_string());
    let r = api
        .chat(
            "team1234",
            &format!("lookIntoFuture=0&limit=2&lastKnownMessageId={}", m[3]),
        )
        .await;
    assert_eq!(ids(&r.data()), vec![m[2], m[1]]);
    assert_eq!(r.header("X-Chat-Last-Given").unwrap(), m[1].to_string());
    let r = api
        .chat(
            "team1234",
            &format!(
                "lookIntoFuture=0&limit=2&lastKnownMessageId={}&includeLastKnown=1",
                m[3]
            ),
        )
        .await;
    assert_eq!(ids(&r.data()), vec![m[3], m[2]]);

    // Future: ascending; X-Chat-Last-Given is the newest returned.
    let r = api
        .chat(
            "team1234",
            &format!(
                "lookIntoFuture=1&limit=2&lastKnownMessageId={}&timeout=0",
                m[1]
            ),
        )
        .await;
    assert_eq!(ids(&r.data()), vec![m[2], m[3]]);
    assert_eq!(r.header("X-Chat-Last-Given").unwrap(), m[3].to_string());
    let r = api
        .chat(
            "team1234",
            &format!("lookIntoFuture=1&lastKnownMessageId={}&timeout=0", m[4]),
        )
        .await;
    assert_eq!(r.status, 304);

    // The oldest page of history ends with 304 as well.
    let first = fake.messages("team1234")[0]["id"].as_i64().unwrap();
    let r = api
        .chat(
            "team1234",
            &format!("lookIntoFuture=0&lastKnownMessageId={first}"),
        )
        .await;
    assert_eq!(r.status, 304);

    // limit is capped at 200.
    for i in 0..205 {
        fake.post("dm4alice", "alice", &format!("bulk {i}"), Value::Null, None);
    }
    let r = api.chat("dm4alice", "lookIntoFuture=0&limit=500").await;
    assert_eq!(r.data().as_array().unwrap().len(), 200);
    let r = api.chat("dm4alice", "lookIntoFuture=0").await;
    assert_eq!(r.data().as_array().unwrap().len(), 100);
    fake.shutdown().await;
}

#[tokio::test]
async fn message_fields_parameters_and_mentions() {
    let (fake, api) = setup().await;
    let plain = fake.post("team1234", "alice", "just text", Value::Null, None);
    let rich = fake.post(
        "team1234",
        "alice",
        "hi {mention-user1}",
        json!({"mention-user1": {"type": "user", "id": "bot", "name": "Gateway Bot"}}),
        None,
    );
    // The server turns @mentions in the text into parameters.
    let typed = api
        .post_json(
            &format!("{API}/v1/chat/team1234"),
            json!({"message": "ping @alice and @all, also @nobody", "referenceId": "ctxgate:task:1:ack"}),
        )
        .await;
    assert_eq!(typed.status, 201);
    let typed = typed.data();

    let r = api.chat("team1234", "lookIntoFuture=0&limit=3").await;
    let list = r.data();
    let by_id = |id: i64| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap()
            .clone()
    };

    let p = by_id(plain);
    assert_eq!(p["messageParameters"], json!([]));
    for field in [
        "id",
        "token",
        "actorType",
        "actorId",
        "actorDisplayName",
        "timestamp",
        "message",
        "messageParameters",
        "systemMessage",
        "messageType",
        "isReplyable",
        "referenceId",
        "reactions",
        "expirationTimestamp",
        "markdown",
    ] {
        assert!(p.get(field).is_some(), "missing {field}: {p}");
    }
    assert_eq!(p["token"], "team1234");
    assert_eq!(p["actorType"], "users");
    assert_eq!(p["actorId"], "alice");
    assert_eq!(p["actorDisplayName"], "Alice A.");
    assert_eq!(p["systemMessage"], "");
    assert_eq!(p["messageType"], "comment");
    assert_eq!(p["isReplyable"], true);
    assert_eq!(p["reactions"], json!({}));
    assert_eq!(p["referenceId"], "");
    assert!(p.get("parent").is_none());
    assert!(p.get("silent").is_none());

    let q = by_id(rich);
    assert_eq!(q["messageParameters"]["mention-user1"]["id"], "bot");

    assert_eq!(
        typed["message"],
        "ping {mention-user1} and {mention-call1}, also @nobody"
    );
    assert_eq!(
        typed["messageParameters"]["mention-user1"],
        json!({"type": "user", "id": "alice", "name": "Alice A.", "mention-id": "alice"})
    );
    assert_eq!(typed["messageParameters"]["mention-call1"]["type"], "call");
    assert_eq!(
        typed["messageParameters"]["mention-call1"]["id"],
        "team1234"
    );
    assert_eq!(typed["referenceId"], "ctxgate:task:1:ack");
    assert_eq!(
        by_id(typed["id"].as_i64().unwrap())["message"],
        typed["message"]
    );

    // System messages are rendered for the viewer.
    let all = fake.messages_for("team1234", "alice");
    assert_eq!(all[0]["systemMessage"], "conversation_created");
    assert_eq!(all[0]["message"], "You created the conversation");
    let bot_view = api
        .chat(
            "team1234",
            &format!("lookIntoFuture=0&lastKnownMessageId={plain}"),
        )
        .await;
    let sys = bot_view.data();
    let created = sys
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["systemMessage"] == "conversation_created")
        .unwrap();
    assert_eq!(created["message"], "{actor} created the conversation");
    assert_eq!(created["messageType"], "system");
    assert_eq!(created["markdown"], false);
    assert_eq!(created["messageParameters"]["actor"]["id"], "alice");
    let added_bot = sys
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["systemMessage"] == "user_added" && m["messageParameters"]["user"]["id"] == "bot"
        })
        .unwrap();
    assert_eq!(added_bot["message"], "{actor} added you");

    // referenceId longer than 64 characters is refused.
    let long_ref = api
        .post_json(
            &format!("{API}/v1/chat/team1234"),
            json!({"message": "x", "referenceId": "r".repeat(65)}),
        )
        .await;
    assert_eq!(long_ref.status, 400);
    let empty = api
        .post_form(&format!("{API}/v1/chat/team1234"), "message=%20%20")
        .await;
    assert_eq!(empty.status, 400);
    assert_eq!(empty.data(), json!({"error": "message"}));
    fake.shutdown().await;
}

#[tokio::test]
async fn replies_carry_the_parent_including_deleted_and_expired_forms() {
    let (fake, api) = setup().await;
    let question = fake.post("team1234", "alice", "question?", Value::Null, None);

    let reply = api
        .post_form(
            &format!("{API}/v1/chat/team1234"),
            &format!("message=answer&replyTo={question}&silent=1"),
        )
        .await;
    assert_eq!(reply.status, 201);
    let reply = reply.data();
    assert_eq!(reply["parent"]["id"], question);
    assert_eq!(reply["parent"]["message"], "question?");
    assert_eq!(reply["parent"]["actorId"], "alice");
    assert!(reply["parent"].get("parent").is_none());
    assert_eq!(reply["silent"], true);

    // Only replyable messages of the same room can be replied to.
    let sys = fake.messages("team1234")[0]["id"].as_i64().unwrap();
    let r = api
        .post_form(
            &format!("{API}/v1/chat/team1234"),
            &format!("message=x&replyTo={sys}"),
        )
        .await;
    assert_eq!((r.status, r.data()), (400, json!({"error": "reply-to"})));
    let elsewhere = fake.post("dm4alice", "alice", "dm", Value::Null, None);
    let r = api
        .post_form(
            &format!("{API}/v1/chat/team1234"),
            &format!("message=x&replyTo={elsewhere}"),
        )
        .await;
    assert_eq!(r.status, 400);

    // A deleted parent is the full deleted message (deleted: true).
    fake.delete("team1234", question, "alice");
    let msgs = api
        .chat(
            "team1234",
            &format!("lookIntoFuture=1&lastKnownMessageId={question}&timeout=0"),
        )
        .await;
    let msgs = msgs.data();
    let reply_now = msgs
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == reply["id"])
        .unwrap();
    assert_eq!(reply_now["parent"]["id"], question);
    assert_eq!(reply_now["parent"]["deleted"], true);
    assert_eq!(reply_now["parent"]["messageType"], "comment_deleted");
    assert_eq!(reply_now["parent"]["message"], "Message deleted by author");

    // A parent that is no longer visible (expired) is {id, deleted: true}.
    let gone = fake.post("team1234", "alice", "ephemeral", Value::Null, None);
    let child = fake.post("team1234", "bob", "re", Value::Null, Some(gone));
    fake.expire_message("team1234", gone);
    let all = fake.messages("team1234");
    assert!(all.iter().all(|m| m["id"] != gone));
    let child = all.iter().find(|m| m["id"] == child).unwrap();
    assert_eq!(child["parent"], json!({"id": gone, "deleted": true}));
    fake.shutdown().await;
}

#[tokio::test]
async fn edits_and_deletions_arrive_as_system_messages_with_parent() {
    let (fake, api) = setup().await;
    let posted = api
        .post_json(
            &format!("{API}/v1/chat/team1234"),
            json!({"message": "draft"}),
        )
        .await
        .data();
    let id = posted["id"].as_i64().unwrap();

    let edited = Api::send(
        api.req(Method::PUT, &format!("{API}/v1/chat/team1234/{id}"))
            .json(&json!({"message": "final"})),
    )
    .await;
    assert_eq!(edited.status, 200);
    let e = edited.data();
    assert_eq!(e["systemMessage"], "message_edited");
    assert_eq!(e["message"], "You edited a message");
    assert_eq!(e["parent"]["id"], id);
    assert_eq!(e["parent"]["message"], "final");
    assert_eq!(e["parent"]["lastEditActorId"], "bot");
    assert_eq!(e["parent"]["lastEditActorType"], "users");

    // Others see the edit through the normal poll.
    let alice = Api::new(&fake, "alice", "alice-pass");
    let r = alice
        .chat(
            "team1234",
            &format!("lookIntoFuture=1&lastKnownMessageId={id}&timeout=0"),
        )
        .await;
    let seen = r.data();
    assert_eq!(seen[0]["systemMessage"], "message_edited");
    assert_eq!(seen[0]["message"], "{actor} edited a message");
    assert_eq!(seen[0]["parent"]["message"], "final");

    // Not your message and not a moderator: 403. System messages: 405.
    let alices = fake.post("team1234", "alice", "mine", Value::Null, None);
    let r = Api::send(
        api.req(Method::PUT, &format!("{API}/v1/chat/team1234/{alices}"))
            .json(&json!({"message": "hijack"})),
    )
    .await;
    assert_eq!(r.status, 403);
    let r = Api::send(api.req(
        Method::DELETE,
        &format!("{API}/v1/chat/team1234/{}", e["id"]),
    ))
    .await;
    assert_eq!(r.status, 405);

    let deleted = Api::send(api.req(Method::DELETE, &format!("{API}/v1/chat/team1234/{id}"))).await;
    assert_eq!(deleted.status, 200);
    let d = deleted.data();
    assert_eq!(d["systemMessage"], "message_deleted");
    assert_eq!(d["parent"]["id"], id);
    assert_eq!(d["parent"]["messageType"], "comment_deleted");
    assert_eq!(d["parent"]["message"], "Message deleted by you");
    assert_eq!(d["parent"]["deleted"], true);

    // Test-side helpers produce the same shapes; with a webhook bot the answer is 202.
    let sys = fake.edit("team1234", alices, "alice", "mine, edited");
    let m = fake
        .wait_for("team1234", |m| m["id"] == sys, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(m["systemMessage"], "message_edited");
    assert_eq!(m["parent"]["message"], "mine, edited");
    let sys = fake.delete("team1234", alices, "alice");
    let m = fake
        .messages("team1234")
        .into_iter()
        .find(|m| m["id"] == sys)
        .unwrap();
    assert_eq!(m["systemMessage"], "message_deleted");
    assert_eq!(m["parent"]["message"], "Message deleted by author");

    fake.install_bot("Hook", SECRET, "http://127.0.0.1:9/unused", &["team1234"]);
    let id2 = api
        .post_json(
            &format!("{API}/v1/chat/team1234"),
            json!({"message": "again"}),
        )
        .await
        .data()["id"]
        .as_i64()
        .unwrap();
    let r = Api::send(
        api.req(Method::PUT, &format!("{API}/v1/chat/team1234/{id2}"))
            .json(&json!({"message": "again!"})),
    )
    .await;
    assert_eq!(r.status, 202);
    fake.shutdown().await;
}

#[tokio::test]
async fn removed_participants_get_404_and_lose_the_room() {
    let (fake, api) = setup().await;
    assert_eq!(api.chat("team1234", "lookIntoFuture=0").await.status, 200);
    fake.remove_participant("team1234", "bot");

    assert_eq!(api.chat("team1234", "lookIntoFuture=0").await.status, 404);
    let post = api
        .post_json(
            &format!("{API}/v1/chat/team1234"),
            json!({"message": "still here?"}),
        )
        .await;
    assert_eq!(post.status, 404);
    assert_eq!(
        api.get(&format!("{API}/v4/room/team1234")).await.status,
        404
    );
    assert_eq!(
        api.get(&format!("{API}/v4/room/team1234/participants"))
            .await
            .status,
        404
    );
    let rooms = api.get(&format!("{API}/v4/room")).await.data();
    let tokens: Vec<&str> = rooms
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["token"].as_str().unwrap())
        .collect();
    assert_eq!(tokens, vec!["dm4alice"]);

    let last = fake.messages_for("team1234", "alice").pop().unwrap();
    assert_eq!(last["systemMessage"], "user_removed");
    assert_eq!(last["message"], "You removed {user}");
    fake.shutdown().await;
}

#[tokio::test]
async fn room_list_modified_since_and_fields() {
    let (fake, api) = setup().await;
    let full = api.get(&format!("{API}/v4/room")).await;
    let before: i64 = full
        .header("X-Nextcloud-Talk-Modified-Before")
        .unwrap()
        .parse()
        .unwrap();
    let rooms = full.data();
    let dm = rooms
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["token"] == "dm4alice")
        .unwrap();
    assert_eq!(dm["type"], 1);
    assert_eq!(dm["name"], "alice");
    assert_eq!(dm["displayName"], "Alice A.");
    assert_eq!(dm["participantType"], 1);
    assert_eq!(dm["unreadMessages"], 0);
    let team = rooms
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["token"] == "team1234")
        .unwrap();
    assert_eq!(
        (team["type"].clone(), team["displayName"].clone()),
        (json!(2), json!("Team"))
    );
    assert_eq!(team["participantType"], 3);
    assert_eq!(team["lastMessage"]["systemMessage"], "user_added");

    fake.advance_time(Duration::from_secs(10));
    let id = fake.post("team1234", "alice", "news", Value::Null, None);
    let since = before + 5;
    let r = api
        .get(&format!("{API}/v4/room?modifiedSince={since}"))
        .await;
    let changed = r.data();
    let tokens: Vec<&str> = changed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["token"].as_str().unwrap())
        .collect();
    assert_eq!(tokens, vec!["team1234"]);
    assert_eq!(changed[0]["lastMessage"]["id"], id);
    assert_eq!(changed[0]["unreadMessages"], 1);
    assert!(changed[0]["lastActivity"].as_i64().unwrap() >= since);
    let next: i64 = r
        .header("X-Nextcloud-Talk-Modified-Before")
        .unwrap()
        .parse()
        .unwrap();
    assert!(next >= before + 10);

    assert_eq!(changed[0]["unreadMention"], false);
    fake.post("team1234", "alice", "@all look", Value::Null, None);
    let team = api.get(&format!("{API}/v4/room/team1234")).await.data();
    assert_eq!(
        (
            team["unreadMention"].clone(),
            team["unreadMentionDirect"].clone()
        ),
        (json!(true), json!(false))
    );
    fake.post("team1234", "alice", "@bot you too", Value::Null, None);
    let team = api.get(&format!("{API}/v4/room/team1234")).await.data();
    assert_eq!(team["unreadMessages"], 3);
    assert_eq!(team["unreadMentionDirect"], true);

    // Nothing new since then.
    let r = api
        .get(&format!("{API}/v4/room?modifiedSince={}", next + 1))
        .await;
    assert_eq!(r.data(), json!([]));
    // A full refresh still lists both.
    assert_eq!(
        api.get(&format!("{API}/v4/room"))
            .await
            .data()
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let single = api.get(&format!("{API}/v4/room/team1234")).await;
    assert_eq!(single.data()["token"], "team1234");
    let parts = api
        .get(&format!("{API}/v4/room/team1234/participants"))
        .await
        .data();
    let names: Vec<&str> = parts
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["actorId"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["alice", "bot", "bob"]);
    assert_eq!(parts[0]["participantType"], 1);
    fake.shutdown().await;
}

#[tokio::test]
async fn read_marker_follows_set_read_marker() {
    let (fake, api) = setup().await;
    let a = fake.post("team1234", "alice", "one", Value::Null, None);
    let b = fake.post("team1234", "alice", "two", Value::Null, None);
    let before = fake.last_read("team1234", "bot").unwrap();
    assert!(before < a);
    api.chat(
        "team1234",
        &format!("lookIntoFuture=1&lastKnownMessageId={b}&timeout=0&setReadMarker=0"),
    )
    .await;
    assert_eq!(fake.last_read("team1234", "bot"), Some(before));
    api.chat(
        "team1234",
        &format!("lookIntoFuture=1&lastKnownMessageId={b}&timeout=0"),
    )
    .await;
    assert_eq!(fake.last_read("team1234", "bot"), Some(b));
    fake.shutdown().await;
}

#[tokio::test]
async fn fail_next_and_hang_next() {
    let (fake, api) = setup().await;
    fake.fail_next(Route::RoomList, 429, Some(7), 1);
    let r = api.get(&format!("{API}/v4/room")).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("Retry-After").as_deref(), Some("7"));
    assert_eq!(r.json()["ocs"]["meta"]["statuscode"], 429);
    assert_eq!(api.get(&format!("{API}/v4/room")).await.status, 200);
    assert_eq!(fake.request_count(Route::RoomList), 2);
    assert_eq!(fake.request_count(Route::Chat), 0);

    fake.fail_next(Route::Any, 503, None, 2);
    let r = api.chat("team1234", "lookIntoFuture=0").await;
    assert_eq!(r.status, 503);
    assert_eq!(
        r.header("X-Nextcloud-Maintenance-Mode").as_deref(),
        Some("1")
    );
    assert_eq!(api.get(&format!("{API}/v4/room")).await.status, 503);
    assert_eq!(api.get(&format!("{API}/v4/room")).await.status, 200);
    assert_eq!(fake.request_count(Route::Any), 5);
    fake.reset_counts();
    assert_eq!(fake.request_count(Route::Any), 0);

    fake.hang_next(Route::Chat, 1);
    let short = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let err = short
        .get(format!(
            "{}{API}/v1/chat/team1234?lookIntoFuture=0",
            fake.base_url()
        ))
        .basic_auth("bot", Some("bot-app-pass"))
        .header("OCS-APIRequest", "true")
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert_eq!(api.chat("team1234", "lookIntoFuture=0").await.status, 200);
    let recs = fake.requests();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].status, None);
    assert_eq!(recs[1].status, Some(200));
    fake.shutdown().await;
}

#[tokio::test]
async fn max_length_gives_413_and_shows_in_capabilities() {
    let (fake, api) = setup().await;
    fake.set_max_length(10);
    let caps = api.get("/ocs/v2.php/cloud/capabilities").await;
    assert_eq!(
        caps.data()["capabilities"]["spreed"]["config"]["chat"]["max-length"],
        10
    );
    let path = format!("{API}/v1/chat/team1234");
    let r = api
        .post_json(&path, json!({"message": "01234567890"}))
        .await;
    assert_eq!((r.status, r.data()), (413, json!({"error": "message"})));
    // Characters, not bytes; surrounding whitespace is trimmed first.
    assert_eq!(
        api.post_json(&path, json!({"message": "éééééééééé"}))
            .await
            .status,
        201
    );
    assert_eq!(
        api.post_json(&path, json!({"message": "  0123456789  "}))
            .await
            .status,
        201
    );
    assert_eq!(
        api.post_json(&path, json!({"message": "ééééééééééé"}))
            .await
            .status,
        413
    );
    fake.shutdown().await;
}

#[tokio::test]
async fn reactions() {
    let (fake, api) = setup().await;
    let id = fake.post("team1234", "alice", "react to me", Value::Null, None);
    let path = format!("{API}/v1/reaction/team1234/{id}");
    let r = api.post_json(&path, json!({"reaction": "👍"})).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.data()["👍"][0]["actorId"], "bot");
    assert_eq!(
        api.post_json(&path, json!({"reaction": "👍"})).await.status,
        200
    );
    // The raw body escapes non-ASCII like PHP; JSON decoding restores it.
    assert!(r.text.contains("\\ud83d\\udc4d"));

    let msgs = api
        .chat(
            "team1234",
            &format!(
                "lookIntoFuture=0&lastKnownMessageId={}&includeLastKnown=1",
                id + 1
            ),
        )
        .await;
    let list = msgs.data();
    let target = list
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap();
    assert_eq!(target["reactions"], json!({"👍": 1}));
    assert_eq!(target["reactionsSelf"], json!(["👍"]));
    let reaction = list
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["systemMessage"] == "reaction")
        .unwrap();
    assert_eq!(reaction["message"], "👍");
    assert_eq!(reaction["parent"]["id"], id);
    fake.shutdown().await;
}

/// A bot endpoint that checks the signature like `docs/bots.md` and reports what it got.
async fn bot_receiver(
    expected_backend: String,
) -> (String, mpsc::UnboundedReceiver<(HeaderMap, String)>) {
    use axum::http::StatusCode;
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let tx = tx.clone();
            let expected_backend = expected_backend.clone();
            async move {
                let h = |k: &str| {
                    headers
                        .get(k)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string)
                };
                let ok = match (
                    h("X-Nextcloud-Talk-Random"),
                    h("X-Nextcloud-Talk-Signature"),
                ) {
                    (Some(random), Some(sig)) => {
                        hmac_hex(SECRET, &random, &body) == sig.to_lowercase()
                    }
                    _ => false,
                } && h("X-Nextcloud-Talk-Backend").as_deref()
                    == Some(expected_backend.as_str());
                let _ = tx.send((headers, body));
                if ok {
                    StatusCode::OK
                } else {
                    StatusCode::UNAUTHORIZED
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, rx)
}

#[tokio::test]
async fn bot_webhook_is_signed_over_random_and_body() {
    let (fake, _api) = setup().await;
    let (url, mut rx) = bot_receiver(format!("{}/", fake.base_url())).await;
    fake.install_bot("Gateway", SECRET, &url, &["team1234"]);

    let question = fake.post(
        "team1234",
        "alice",
        "hello @bot, see https://x.example/a",
        Value::Null,
        None,
    );
    let (headers, body) = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    let random = headers["X-Nextcloud-Talk-Random"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(random.len(), 64);
    assert_eq!(
        headers["X-Nextcloud-Talk-Signature"].to_str().unwrap(),
        hmac_hex(SECRET, &random, &body)
    );
    assert_eq!(
        talk_signature(SECRET, &random, &body),
        hmac_hex(SECRET, &random, &body)
    );
    assert_eq!(
        headers["X-Nextcloud-Talk-Backend"].to_str().unwrap(),
        format!("{}/", fake.base_url())
    );
    // PHP json_encode escapes slashes, twice inside object.content (as in the docs' sample).
    assert!(body.contains(r#""id":"users\/alice""#), "{body}");
    assert!(body.contains(r#"https:\\\/\\\/x.example"#), "{body}");

    let p: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(p["type"], "Create");
    assert_eq!(p["actor"]["type"], "Person");
    assert_eq!(p["actor"]["id"], "users/alice");
    assert_eq!(p["actor"]["name"], "Alice A.");
    assert_eq!(p["object"]["type"], "Note");
    assert_eq!(p["object"]["id"], question.to_string());
    assert_eq!(p["object"]["name"], "message");
    assert_eq!(p["object"]["mediaType"], "text/markdown");
    assert_eq!(
        p["target"],
        json!({"type": "Collection", "id": "team1234", "name": "Team"})
    );
    // object.content is itself a JSON string.
    let content: Value = serde_json::from_str(p["object"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        content["message"],
        "hello {mention-user1}, see https://x.example/a"
    );
    assert_eq!(content["parameters"]["mention-user1"]["id"], "bot");

    let d = fake.wait_bot_deliveries(1, Duration::from_secs(5)).await;
    assert_eq!(d[0].status, Some(200));
    assert_eq!(d[0].message_id, Some(question));

    // A reply carries inReplyTo; empty parameters are a JSON list inside the content.
    let plain = fake.post("team1234", "bob", "plain", Value::Null, Some(question));
    let (_, body) = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    let p: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(p["object"]["id"], plain.to_string());
    assert_eq!(
        p["object"]["inReplyTo"]["object"]["id"],
        question.to_string()
    );
    assert_eq!(p["object"]["inReplyTo"]["actor"]["id"], "users/alice");
    let content: Value = serde_json::from_str(p["object"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"message": "plain", "parameters": []}));

    // Explicit (re)sends, good and spoiled.
    assert_eq!(
        fake.send_bot_event("Gateway", "team1234", question).await,
        200
    );
    for tamper in [
        Tamper::BadSignature,
        Tamper::WrongSecret,
        Tamper::BodyAlteredAfterSigning,
        Tamper::MissingSignature,
        Tamper::MissingRandom,
        Tamper::WrongBackend,
    ] {
        assert_eq!(
            fake.send_bot_event_with("Gateway", "team1234", question, tamper)
                .await,
            401,
            "{tamper:?}"
        );
    }
    assert_eq!(
        fake.send_bot_membership("Gateway", "team1234", true).await,
        200
    );
    while let Ok(Some((_, body))) = tokio::time::timeout(Duration::from_millis(50), rx.recv()).await
    {
        let p: Value = serde_json::from_str(&body).unwrap();
        if p["type"] == "Join" {
            assert_eq!(p["actor"]["type"], "Application");
            assert_eq!(p["actor"]["id"], format!("bots/{}", bot_actor_id(&url)));
            assert_eq!(p["object"]["id"], "team1234");
        }
    }

    // Messages in rooms without the bot, and messages of bots, are not sent.
    let before = fake.bot_deliveries().len();
    fake.post("dm4alice", "alice", "private", Value::Null, None);
    fake.post_as(
        "team1234",
        "bots",
        "bot-other",
        "from a bot",
        Value::Null,
        None,
        None,
    );
    fake.post("team1234", "alice", "marker", Value::Null, None);
    let d = fake
        .wait_bot_deliveries(before + 1, Duration::from_secs(5))
        .await;
    assert_eq!(d.len(), before + 1);
    let last: Value = serde_json::from_str(&d[before].body).unwrap();
    let content: Value = serde_json::from_str(last["object"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["message"], "marker");
    fake.shutdown().await;
}

#[tokio::test]
async fn bot_replies_are_verified_over_random_and_message_text() {
    let (fake, _api) = setup().await;
    let url = "https://bot.example/hook";
    fake.install_bot("Gateway", SECRET, url, &["team1234"]);
    let question = fake.post("team1234", "alice", "question", Value::Null, None);
    let http = reqwest::Client::new();
    let send = |token: &str, random: String, signature: String, body: Value| {
        Api::send(
            http.post(format!("{}{API}/v1/bot/{token}/message", fake.base_url()))
                .header("OCS-APIRequest", "true")
                .header("Accept", "application/json")
                .header("X-Nextcloud-Talk-Bot-Random", random)
                .header("X-Nextcloud-Talk-Bot-Signature", signature)
                .json(&body),
        )
    };

    let random = "a".repeat(64);
    let text = "the answer";
    let good = send(
        "team1234",
        random.clone(),
        hmac_hex(SECRET, &random, text),
        json!({"message": text, "replyTo": question, "referenceId": "ctxgate:task:7:result"}),
    )
    .await;
    assert_eq!(good.status, 201);
    assert_eq!(good.data(), Value::Null);

    let m = fake
        .wait_for("team1234", |m| m["message"] == text, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(m["actorType"], "bots");
    assert_eq!(m["actorId"], bot_actor_id(url));
    assert_eq!(m["actorDisplayName"], "Gateway (Bot)");
    assert_eq!(m["referenceId"], "ctxgate:task:7:result");
    assert_eq!(m["parent"]["id"], question);
    assert_eq!(fake.bot_actor("Gateway"), Some(bot_actor_id(url)));

    // Signing the JSON body instead of the message text is wrong.
    let body = json!({"message": text});
    let wrong = send(
        "team1234",
        random.clone(),
        hmac_hex(SECRET, &random, &body.to_string()),
        body,
    )
    .await;
    assert_eq!(wrong.status, 401);
    let bad = send(
        "team1234",
        random.clone(),
        "00".repeat(32),
        json!({"message": text}),
    )
    .await;
    assert_eq!(bad.status, 401);
    // The bot is not set up in the one-to-one room.
    let other_room = send(
        "dm4alice",
        random.clone(),
        hmac_hex(SECRET, &random, text),
        json!({"message": text}),
    )
    .await;
    assert_eq!(other_room.status, 401);
    // Short random or empty message: 400.
    let short = send(
        "team1234",
        "abc".into(),
        hmac_hex(SECRET, "abc", text),
        json!({"message": text}),
    )
    .await;
    assert_eq!(short.status, 400);
    let empty = send(
        "team1234",
        random.clone(),
        hmac_hex(SECRET, &random, " "),
        json!({"message": " "}),
    )
    .await;
    assert_eq!(empty.status, 400);

    // Reactions are signed over the reaction.
    let r = Api::send(
        http.post(format!(
            "{}{API}/v1/bot/team1234/reaction/{question}",
            fake.base_url()
        ))
        .header("OCS-APIRequest", "true")
        .header("X-Nextcloud-Talk-Bot-Random", random.clone())
        .header(
            "X-Nextcloud-Talk-Bot-Signature",
            hmac_hex(SECRET, &random, "👍"),
        )
        .json(&json!({"reaction": "👍"})),
    )
    .await;
    assert_eq!(r.status, 201);
    let target = fake
        .messages("team1234")
        .into_iter()
        .find(|m| m["id"] == question)
        .unwrap();
    assert_eq!(target["reactions"], json!({"👍": 1}));
    fake.shutdown().await;
}

#[tokio::test]
async fn wait_for_and_shutdown() {
    let (fake, api) = setup().await;
    let waiter = {
        let fake = fake.clone();
        tokio::spawn(async move {
            fake.wait_for(
                "team1234",
                |m| m["message"] == "via api",
                Duration::from_secs(5),
            )
            .await
        })
    };
    api.post_json(
        &format!("{API}/v1/chat/team1234"),
        json!({"message": "via api"}),
    )
    .await;
    let m = waiter.await.unwrap().unwrap();
    assert_eq!(m["actorId"], "bot");
    assert!(
        fake.wait_for(
            "team1234",
            |m| m["message"] == "never",
            Duration::from_millis(50)
        )
        .await
        .is_none()
    );

    // An open long poll ends when the fake shuts down.
    fake.set_long_poll_cap(Duration::from_secs(30));
    let last = fake.last_message_id("team1234");
    let poll = tokio::spawn(async move {
        api.chat(
            "team1234",
            &format!("lookIntoFuture=1&lastKnownMessageId={last}"),
        )
        .await
        .status
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let base = fake.base_url();
    let started = Instant::now();
    fake.shutdown().await;
    assert_eq!(poll.await.unwrap(), 304);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        reqwest::get(format!("{base}/ocs/v2.php/cloud/capabilities"))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn dropping_every_clone_stops_the_server() {
    let fake = FakeTalk::start().await;
    let clone = fake.clone();
    let url = format!("{}/ocs/v2.php/cloud/capabilities", fake.base_url());
    assert!(reqwest::get(&url).await.is_ok());
    drop(fake);
    assert!(reqwest::get(&url).await.is_ok(), "a clone keeps it alive");
    drop(clone);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let fresh = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        if fresh.get(&url).send().await.is_err() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "server still answers after the last clone was dropped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
