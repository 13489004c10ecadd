//! A faithful in-process fake Nextcloud Talk (spreed) server for tests and benchmarks.
//!
//! Every behaviour follows the published spreed documentation and, where the docs are silent,
//! the spreed/server source they describe (nextcloud/spreed, nextcloud/server on GitHub):
//!
//! | Behaviour | Source |
//! |---|---|
//! | OCS envelope `{"ocs":{"meta":{status,statuscode,message},"data"}}`, HTTP status = OCS status, 304/204 without body, JSON only with `Accept: application/json` or `format=json` (XML otherwise), PHP `json_encode` escaping (`\/`, `\uXXXX`, `JSON_HEX_TAG`) | server `lib/private/AppFramework/OCS/{V2Response,BaseResponse}.php`, `OCSController::getResponderByHTTPHeader` |
//! | Missing `OCS-APIRequest: true` → `412 {"message":"CSRF check failed"}`; `GET /v4/room` without a valid login → `401`, OCS `statuscode` 997; the chat, room and participant endpoints are public pages, so an anonymous (or wrongly authenticated) caller is a non-participant → `404` | server `SecurityMiddleware`, `OCSMiddleware`; spreed `#[PublicPage]`/`#[RequireParticipant]` attributes |
//! | `GET /v4/room` (`modifiedSince` kept when `lastActivity >= modifiedSince` or an attendee-level change, header `X-Nextcloud-Talk-Modified-Before` taken before the query, `X-Nextcloud-Talk-Hash`), `GET /v4/room/{token}`, room fields and types 1–6 | `docs/conversation.md`, `docs/constants.md`, `RoomController::getRooms` |
//! | `GET /v4/room/{token}/participants` | `docs/participant.md` |
//! | `GET /v1/chat/{token}`: `lookIntoFuture`, `limit` (100, max 200, `<= 0` = unlimited), `lastKnownMessageId`, `includeLastKnown`, `timeout` (30, capped at 30 s by the controller; the fake caps further with [`FakeTalk::set_long_poll_cap`]), `setReadMarker`, `lastCommonReadId`; 304 with empty body when nothing is found; `X-Chat-Last-Given` = id of the last message of the (raw) result, sent only with 200; `X-Chat-Last-Common-Read` | `docs/chat.md` "Receive chat messages", `ChatController::receiveMessages` / `prepareCommentsAsDataResponse`, `ChatManager::waitForNewMessages` / `getHistory`, server `CommentsManager::getForObjectSince` |
//! | Message fields (`id, token, actorType, actorId, actorDisplayName, timestamp, message, messageParameters` (`[]` when empty), `systemMessage, messageType, isReplyable, referenceId, reactions` (always an object), `expirationTimestamp, markdown, threadId, lastEdit*` (edited only), `deleted` (deleted only), `silent` (silent only), `parent`, `reactionsSelf`) | `docs/chat.md`, `Model\Message::toArray` |
//! | `parent`: the full parent message (never nested); a deleted parent is the rendered `comment_deleted` message ("Message deleted by …", with `deleted: true`); `{"id":N,"deleted":true}` only when the parent is not visible (expired, see [`FakeTalk::expire_message`]) | `docs/chat.md` "Parent data", `prepareCommentsAsDataResponse`, `tests/integration/features/chat-1/delete.feature` |
//! | `POST /v1/chat/{token}` (`message`, `replyTo`, `referenceId`, `silent`, `actorDisplayName`; form or JSON): 201 + message, 400 `{"error":"message"}` empty, 400 `{"error":"reply-to"}` bad parent, 413 over `max-length` (characters, after trim) | `docs/chat.md` "Sending a new chat message", `ChatController::sendMessage`, server `Comment::setMessage` |
//! | `PUT`/`DELETE /v1/chat/{token}/{id}`: system messages `message_edited` / `message_deleted` with the changed message as `parent`; 200, or 202 when a webhook bot is set up | `docs/chat.md` "Editing/Deleting a chat message", `ChatController::editMessage` / `deleteMessage`, `chat-1/edit-message.feature` |
//! | System message texts ("You created the conversation", "{actor} added {user}", …) per viewer | `docs/chat.md` "System messages", `Chat\Parser\SystemMessage` |
//! | Mentions: `@user`, `@"user id"`, `@all` → `{mention-user1}` / `{mention-call1}` parameters (`type, id, name, mention-id`) | server `Comment::getMentions`, `Chat\Parser\UserMention`, `chat-1/mentions.feature` |
//! | Reactions `POST/GET/DELETE /v1/reaction/{token}/{id}` (`reaction` system messages) | `docs/reaction.md`, `ReactionController`, `Chat\Parser\ReactionParser` |
//! | `GET /ocs/v2.php/cloud/capabilities` with `spreed.config.chat.max-length` (32000) | `docs/capabilities.md` |
//! | Bots: `Create` webhook with `X-Nextcloud-Talk-Random` (64 chars), `X-Nextcloud-Talk-Signature` = hex HMAC-SHA256(secret, random + body), `X-Nextcloud-Talk-Backend` = base URL + `/`, `object.content` a JSON string `{message, parameters}`, `inReplyTo` for replies; `Join`/`Leave`; bot replies `POST /v1/bot/{token}/message` verified over random + message text (400 bad headers, 401 bad signature, 201 no data), actor `bots`/`bot-<sha1(url)>`, display name "<name> (Bot)" | `docs/bots.md`, `BotController`, `Service\BotService`, `Service\ActivityPubHelper`, `chat-1/bots.feature` |
//!
//! Test-only controls: fault injection ([`FakeTalk::fail_next`], [`FakeTalk::hang_next`]), a
//! settable clock ([`FakeTalk::advance_time`]), request recording ([`FakeTalk::requests`]).
//! Long polls wait on a `tokio::sync::watch` per room; nothing sleeps to synchronise.

mod enc;
mod http;
mod state;

pub use enc::talk_signature;

use serde_json::{Map, Value, json};
use state::{Bot, Fault, FaultKind, NewMsg, Outgoing, Participant, Room, State, Verb};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Bot feature flags (`docs/constants.md` "Bot features").
pub const BOT_FEATURE_WEBHOOK: u8 = 1;
/// The bot may post messages and reactions.
pub const BOT_FEATURE_RESPONSE: u8 = 2;
/// The bot is invoked as a PHP event (not modelled).
pub const BOT_FEATURE_EVENT: u8 = 4;
/// The bot receives reaction webhooks (not sent by the fake).
pub const BOT_FEATURE_REACTION: u8 = 8;

/// Endpoint classes, for fault injection and request counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// `GET /api/v4/room`
    RoomList,
    /// `GET /api/v4/room/{token}`
    Room,
    /// `GET /api/v4/room/{token}/participants`
    Participants,
    /// `GET /api/v1/chat/{token}` (receive: long poll or history)
    Chat,
    /// `POST /api/v1/chat/{token}`
    Post,
    /// `PUT /api/v1/chat/{token}/{id}`
    Edit,
    /// `DELETE /api/v1/chat/{token}/{id}`
    Delete,
    /// `POST /api/v1/chat/{token}/read`
    MarkRead,
    /// `/api/v1/reaction/{token}/{id}`
    Reaction,
    /// `POST /api/v1/bot/{token}/message`
    BotMessage,
    /// `/api/v1/bot/{token}/reaction/{id}`
    BotReaction,
    /// `GET /ocs/v2.php/cloud/capabilities`
    Capabilities,
    /// Anything else (answered 404).
    Other,
    /// Matches every route (for [`FakeTalk::fail_next`], [`FakeTalk::request_count`]).
    Any,
}

impl Route {
    fn matches(self, actual: Route) -> bool {
        self == Route::Any || self == actual
    }
}

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct RequestRecord {
    /// Sequence number, unique for the server's lifetime.
    pub seq: u64,
    pub method: String,
    pub path: String,
    /// Raw query string (without `?`).
    pub query: String,
    pub route: Route,
    /// The basic-auth user name sent (valid or not).
    pub user: Option<String>,
    /// HTTP status answered; `None` while the request is still open (long poll, hang) or
    /// when the client gave up first.
    pub status: Option<u16>,
    pub at: Instant,
}

/// How [`FakeTalk::send_bot_event_with`] spoils a webhook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tamper {
    /// Correctly signed.
    None,
    /// One hex digit of the signature flipped.
    BadSignature,
    /// Signed with a different secret.
    WrongSecret,
    /// Signed, then the body changed (`target.name`).
    BodyAlteredAfterSigning,
    /// No `X-Nextcloud-Talk-Signature` header.
    MissingSignature,
    /// No `X-Nextcloud-Talk-Random` header.
    MissingRandom,
    /// Correctly signed, but `X-Nextcloud-Talk-Backend` names another server.
    WrongBackend,
}

/// A webhook the fake sent to a bot.
#[derive(Clone, Debug)]
pub struct BotDelivery {
    pub bot: String,
    pub token: String,
    pub message_id: Option<i64>,
    /// Activity type: `Create`, `Join`, `Leave`, `Activity`.
    pub kind: String,
    pub body: String,
    pub random: String,
    pub signature: String,
    /// The bot's HTTP status, `None` when the request failed.
    pub status: Option<u16>,
    pub error: Option<String>,
}

pub(crate) enum FaultAction {
    Fail {
        status: u16,
        retry_after: Option<u64>,
    },
    Hang,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    base_url: String,
    shutdown: Arc<watch::Sender<bool>>,
    /// Bumped on every change; [`FakeTalk::wait_for`] waits on it.
    events: watch::Sender<u64>,
    http: reqwest::Client,
    rt: tokio::runtime::Handle,
    server: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn bump(&self) {
        self.events.send_modify(|v| *v = v.wrapping_add(1));
    }

    pub(crate) fn mutate<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let r = f(&mut self.lock());
        self.bump();
        r
    }
}

pub(crate) fn take_fault(st: &mut State, route: Route) -> Option<FaultAction> {
    let pos = st
        .faults
        .iter()
        .position(|f| f.remaining > 0 && f.route.matches(route))?;
    let f = &mut st.faults[pos];
    f.remaining -= 1;
    let action = match f.kind {
        FaultKind::Fail {
            status,
            retry_after,
        } => FaultAction::Fail {
            status,
            retry_after,
        },
        FaultKind::Hang => FaultAction::Hang,
    };
    if f.remaining == 0 {
        st.faults.remove(pos);
    }
    Some(action)
}

/// Sends webhooks in the background (the server does it asynchronously too).
pub(crate) fn dispatch(shared: &Arc<Shared>, out: Vec<Outgoing>) {
    for o in out {
        let s = shared.clone();
        shared.rt.spawn(async move {
            let d = deliver(&s, &o, Tamper::None).await;
            s.mutate(|st| st.deliveries.push(d));
        });
    }
}

async fn deliver(shared: &Shared, o: &Outgoing, tamper: Tamper) -> BotDelivery {
    let random = enc::random_string(64);
    let mut body = o.body.clone();
    let mut signature = enc::talk_signature(&o.secret, &random, &o.body);
    match tamper {
        Tamper::BadSignature => {
            let flipped = if signature.starts_with('0') { "1" } else { "0" };
            signature.replace_range(0..1, flipped);
        }
        Tamper::WrongSecret => {
            signature = enc::talk_signature(&format!("wrong-{}", o.secret), &random, &o.body);
        }
        Tamper::BodyAlteredAfterSigning => {
            if let Ok(mut v) = serde_json::from_str::<Value>(&body) {
                let key = if v.get("target").is_some() {
                    "target"
                } else {
                    "object"
                };
                let name = v[key]["name"].as_str().unwrap_or_default().to_string();
                v[key]["name"] = json!(format!("{name} (tampered)"));
                body = enc::php_json(&v, false);
            } else {
                body.push(' ');
            }
        }
        _ => {}
    }
    let backend = if tamper == Tamper::WrongBackend {
        "https://evil.example.invalid/".to_string()
    } else {
        format!("{}/", shared.base_url)
    };
    let mut req = shared
        .http
        .post(&o.url)
        .header("Content-Type", "application/json")
        .header("X-Nextcloud-Talk-Backend", backend)
        .header("OCS-APIRequest", "true");
    if tamper != Tamper::MissingRandom {
        req = req.header("X-Nextcloud-Talk-Random", &random);
    }
    if tamper != Tamper::MissingSignature {
        req = req.header("X-Nextcloud-Talk-Signature", &signature);
    }
    let res = req.body(body.clone()).send().await;
    let (status, error) = match res {
        Ok(r) => (Some(r.status().as_u16()), None),
        Err(e) => (None, Some(e.to_string())),
    };
    BotDelivery {
        bot: o.bot.clone(),
        token: o.token.clone(),
        message_id: o.message_id,
        kind: o.kind.clone(),
        body,
        random,
        signature,
        status,
        error,
    }
}

/// The actor id Talk gives a bot: `bot-` + sha1 of its URL (`Attendee::ACTOR_BOT_PREFIX`,
/// `BotServer::getUrlHash`).
pub fn bot_actor_id(url: &str) -> String {
    format!("bot-{}", enc::sha1_hex(url.as_bytes()))
}

/// Signals shutdown when the last [`FakeTalk`] clone is dropped.
struct Guard(Arc<watch::Sender<bool>>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}

/// The fake server. Cheap to clone; serves until every clone is dropped or [`shutdown`]
/// is called.
///
/// The test helpers (`post`, `edit`, …) panic on impossible input (unknown room, user or
/// message) so that broken tests fail loudly.
///
/// [`shutdown`]: FakeTalk::shutdown
#[derive(Clone)]
pub struct FakeTalk {
    shared: Arc<Shared>,
    _guard: Arc<Guard>,
}

impl std::fmt::Debug for FakeTalk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeTalk")
            .field("base_url", &self.shared.base_url)
            .finish()
    }
}

fn params_map(v: &Value) -> Map<String, Value> {
    match v {
        Value::Object(o) => o.clone(),
        _ => Map::new(),
    }
}

impl FakeTalk {
    /// Binds `127.0.0.1:0` and starts serving.
    pub async fn start() -> FakeTalk {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let base_url = format!("http://{addr}");
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let shutdown = Arc::new(shutdown_tx);
        let (events, _) = watch::channel(0u64);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(base_url.clone())),
            base_url,
            shutdown: shutdown.clone(),
            events,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .expect("reqwest client"),
            rt: tokio::runtime::Handle::current(),
            server: Mutex::new(None),
        });
        let app = axum::Router::new()
            .fallback(http::handle)
            .with_state(shared.clone());
        let mut rx = shutdown_rx;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.wait_for(|v| *v).await;
                })
                .await;
        });
        *shared.server.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        FakeTalk {
            shared,
            _guard: Arc::new(Guard(shutdown)),
        }
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        self.shared.base_url.clone()
    }

    /// Stops serving: open long polls end (304), hung requests are released (503).
    pub async fn shutdown(&self) {
        self.shared.shutdown.send_replace(true);
        let task = self
            .shared
            .server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(mut task) = task
            && tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }

    // ------------------------------------------------------------ users & rooms

    /// A Nextcloud user. Only users with an app password can log in (basic auth).
    pub fn add_user(&self, id: &str, display_name: &str, app_password: Option<&str>) {
        self.shared.mutate(|st| {
            st.users.insert(
                id.to_string(),
                state::User {
                    display_name: display_name.to_string(),
                    password: app_password.map(str::to_string),
                },
            );
        });
    }

    /// Creates a conversation (`docs/constants.md` types: 1 one-to-one, 2 group, 3 public,
    /// 4 changelog, 5 former one-to-one, 6 note-to-self). The first participant is the owner
    /// (in one-to-one rooms both are) and author of `conversation_created`; in group and
    /// public rooms every further participant gets a `user_added` message, like adding them
    /// after creation. All participants start with everything read.
    pub fn create_room(&self, token: &str, room_type: u8, name: &str, participants: &[&str]) {
        assert!(
            (4..=30).contains(&token.len())
                && token
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
            "room token must match [a-z0-9]{{4,30}}: {token:?}"
        );
        assert!((1..=6).contains(&room_type), "room type must be 1..=6");
        self.shared.mutate(|st| {
            assert!(!st.rooms.contains_key(token), "room {token} exists already");
            for p in participants {
                assert!(
                    st.users.contains_key(*p),
                    "unknown user {p:?}: add_user first"
                );
            }
            let now = st.now();
            let id = st.next_room_id;
            st.next_room_id += 1;
            let mut room = Room {
                id,
                token: token.to_string(),
                room_type,
                name: name.to_string(),
                participants: Vec::new(),
                msg_ids: Vec::new(),
                last_activity: now,
                last_message: None,
                tx: watch::channel(0u64).0,
            };
            for (i, p) in participants.iter().enumerate() {
                let attendee_id = st.next_attendee_id;
                st.next_attendee_id += 1;
                room.participants.push(Participant {
                    user: p.to_string(),
                    attendee_id,
                    participant_type: if i == 0 || room_type == 1 { 1 } else { 3 },
                    last_read: 0,
                    last_attendee_activity: now,
                    last_mention: 0,
                    last_mention_direct: 0,
                });
            }
            st.rooms.insert(token.to_string(), room);
            let creator = participants.first().copied();
            let (atype, aid) = match creator {
                Some(c) => ("users", c),
                None => ("guests", "cli"),
            };
            st.insert(
                token,
                NewMsg::new(atype, aid, Verb::System, "conversation_created"),
            );
            if matches!(room_type, 2 | 3) {
                for p in participants.iter().skip(1) {
                    let mut nm = NewMsg::new(atype, aid, Verb::System, "user_added");
                    nm.params.insert("user".into(), json!(p));
                    st.insert(token, nm);
                }
            }
            let room = st.rooms.get_mut(token).expect("just inserted");
            let last = room.msg_ids.last().copied().unwrap_or(0);
            for p in &mut room.participants {
                p.last_read = last;
            }
        });
    }

    /// Adds a user (`user_added` by the first owner). New attendees start with everything
    /// read (`ParticipantService::addUsers`).
    pub fn add_participant(&self, token: &str, user: &str) {
        self.shared.mutate(|st| {
            assert!(
                st.users.contains_key(user),
                "unknown user {user:?}: add_user first"
            );
            let now = st.now();
            let attendee_id = st.next_attendee_id;
            st.next_attendee_id += 1;
            let room = st
                .rooms
                .get_mut(token)
                .unwrap_or_else(|| panic!("no room {token}"));
            if room.participants.iter().any(|p| p.user == user) {
                return;
            }
            let owner = room
                .participants
                .iter()
                .find(|p| p.participant_type == 1)
                .map(|p| p.user.clone())
                .unwrap_or_else(|| user.to_string());
            room.participants.push(Participant {
                user: user.to_string(),
                attendee_id,
                participant_type: 3,
                last_read: room.msg_ids.last().copied().unwrap_or(0),
                last_attendee_activity: now,
                last_mention: 0,
                last_mention_direct: 0,
            });
            let mut nm = NewMsg::new("users", &owner, Verb::System, "user_added");
            nm.params.insert("user".into(), json!(user));
            st.insert(token, nm);
        });
    }

    /// Removes a user (`user_removed` by the first remaining owner, or by the user
    /// themselves: "left the conversation"). Afterwards the user's chat and room calls for
    /// the token answer 404 and the room leaves their room list.
    pub fn remove_participant(&self, token: &str, user: &str) {
        self.shared.mutate(|st| {
            let room = st
                .rooms
                .get_mut(token)
                .unwrap_or_else(|| panic!("no room {token}"));
            let Some(pos) = room.participants.iter().position(|p| p.user == user) else {
                return;
            };
            room.participants.remove(pos);
            let actor = room
                .participants
                .iter()
                .find(|p| p.participant_type == 1)
                .map(|p| p.user.clone())
                .unwrap_or_else(|| user.to_string());
            let mut nm = NewMsg::new("users", &actor, Verb::System, "user_removed");
            nm.params.insert("user".into(), json!(user));
            st.insert(token, nm);
        });
    }

    // ------------------------------------------------------------ messages

    /// Posts `message` as the user `actor` (a participant). `parameters` are rich-object
    /// parameters for `{placeholders}` (`json!({})`/`Value::Null` for none); `@user` and
    /// `@all` in the text become mentions like on the server. Triggers bot webhooks.
    pub fn post(
        &self,
        token: &str,
        actor: &str,
        message: &str,
        parameters: Value,
        reply_to: Option<i64>,
    ) -> i64 {
        self.post_as(token, "users", actor, message, parameters, reply_to, None)
    }

    /// Posts as any actor type (`users`, `guests`, `bots`, `bridged`, …). Users must be
    /// participants; messages of users and guests trigger bot webhooks, others do not
    /// ("no bots for bots").
    #[allow(clippy::too_many_arguments)]
    pub fn post_as(
        &self,
        token: &str,
        actor_type: &str,
        actor: &str,
        message: &str,
        parameters: Value,
        reply_to: Option<i64>,
        reference_id: Option<&str>,
    ) -> i64 {
        let (id, out) = self.shared.mutate(|st| {
            assert!(st.rooms.contains_key(token), "no room {token}");
            if actor_type == "users" {
                assert!(
                    st.participant(token, actor).is_some(),
                    "user {actor:?} is not a participant of {token}"
                );
            }
            if let Some(p) = reply_to {
                assert!(
                    st.msgs.get(&p).is_some_and(|m| m.token == token),
                    "reply_to {p} is not a message of {token}"
                );
            }
            let mut nm = NewMsg::new(actor_type, actor, Verb::Comment, message.trim());
            nm.params = params_map(&parameters);
            nm.parent = reply_to;
            nm.reference_id = reference_id.unwrap_or_default().to_string();
            let id = st.insert(token, nm);
            (id, st.webhooks_for(id))
        });
        dispatch(&self.shared, out);
        id
    }

    /// Edits message `id` as the user `actor`: the stored text changes (with `lastEdit*`
    /// fields) and a `message_edited` system message with the edited message as `parent`
    /// follows. Returns the system message's id.
    pub fn edit(&self, token: &str, id: i64, actor: &str, new_text: &str) -> i64 {
        self.shared.mutate(|st| {
            assert!(
                st.msgs.get(&id).is_some_and(|m| m.token == token),
                "no message {id} in {token}"
            );
            st.edit_message(token, id, "users", actor, new_text)
        })
    }

    /// Deletes message `id` as the user `actor`: it becomes `comment_deleted` ("Message
    /// deleted by you/author/{actor}") and a `message_deleted` system message with it as
    /// `parent` follows. Returns the system message's id.
    pub fn delete(&self, token: &str, id: i64, actor: &str) -> i64 {
        self.shared.mutate(|st| {
            assert!(
                st.msgs.get(&id).is_some_and(|m| m.token == token),
                "no message {id} in {token}"
            );
            st.delete_message(token, id, "users", actor)
        })
    }

    /// A system message (`docs/chat.md` "System messages", e.g. `call_started`,
    /// `history_cleared`) by the user `actor`. Returns its id.
    pub fn system(&self, token: &str, actor: &str, system_message: &str) -> i64 {
        let (id, out) = self.shared.mutate(|st| {
            assert!(st.rooms.contains_key(token), "no room {token}");
            let id = st.insert(
                token,
                NewMsg::new("users", actor, Verb::System, system_message),
            );
            (id, st.webhooks_for(id))
        });
        dispatch(&self.shared, out);
        id
    }

    /// Reacts to message `id` as the user `actor`; returns the id of the `reaction` message
    /// (or of the existing one when the user already reacted so).
    pub fn react(&self, token: &str, id: i64, actor: &str, emoji: &str) -> i64 {
        self.shared.mutate(
            |st| match st.add_reaction(token, id, "users", actor, emoji) {
                Ok(Some(rid)) => rid,
                Ok(None) => st.msgs[&id]
                    .reactions
                    .iter()
                    .find(|r| r.emoji == emoji && r.actor_id == actor)
                    .map(|r| r.msg_id)
                    .unwrap_or_default(),
                Err(status) => panic!("cannot react to {id} in {token}: {status}"),
            },
        )
    }

    /// Lets message `id` expire (message expiration): it disappears from chat responses and
    /// replies to it carry `parent: {"id": id, "deleted": true}`.
    pub fn expire_message(&self, token: &str, id: i64) {
        self.shared.mutate(|st| {
            let m = st
                .msgs
                .get_mut(&id)
                .filter(|m| m.token == token)
                .unwrap_or_else(|| panic!("no message {id} in {token}"));
            m.expired = true;
        });
    }

    /// Every message of the room as the API renders it (for an observer who is none of the
    /// actors, so system messages read "{actor} …"), oldest first, with `parent`.
    pub fn messages(&self, token: &str) -> Vec<Value> {
        self.shared.lock().rendered_room(token, None)
    }

    /// Like [`messages`](FakeTalk::messages), rendered for `viewer` ("You …").
    pub fn messages_for(&self, token: &str, viewer: &str) -> Vec<Value> {
        self.shared.lock().rendered_room(token, Some(viewer))
    }

    /// Id of the newest message of the room (0 when none).
    pub fn last_message_id(&self, token: &str) -> i64 {
        self.shared
            .lock()
            .rooms
            .get(token)
            .and_then(|r| r.msg_ids.last().copied())
            .unwrap_or(0)
    }

    /// A participant's read marker (`lastReadMessage`).
    pub fn last_read(&self, token: &str, user: &str) -> Option<i64> {
        self.shared
            .lock()
            .participant(token, user)
            .map(|p| p.last_read)
    }

    /// Waits (on the change notification, not by polling) until a message of the room
    /// satisfies `pred`; returns the oldest such message.
    pub async fn wait_for(
        &self,
        token: &str,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.shared.events.subscribe();
        loop {
            if let Some(m) = self.messages(token).into_iter().find(|m| pred(m)) {
                return Some(m);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => return None,
            }
        }
    }

    // ------------------------------------------------------------ server knobs

    /// The next `times` requests matching `route` answer `status` (OCS failure envelope),
    /// with `Retry-After` when given (and `X-Nextcloud-Maintenance-Mode: 1` for 503).
    pub fn fail_next(
        &self,
        route: Route,
        status: u16,
        retry_after_secs: Option<u64>,
        times: usize,
    ) {
        self.shared.mutate(|st| {
            st.faults.push(Fault {
                route,
                kind: FaultKind::Fail {
                    status,
                    retry_after: retry_after_secs,
                },
                remaining: times,
            })
        });
    }

    /// The next `times` requests matching `route` never answer (until the client gives up
    /// or the fake shuts down).
    pub fn hang_next(&self, route: Route, times: usize) {
        self.shared.mutate(|st| {
            st.faults.push(Fault {
                route,
                kind: FaultKind::Hang,
                remaining: times,
            })
        });
    }

    /// Maximum message length in characters (capability `spreed.config.chat.max-length`);
    /// longer posts and edits answer 413.
    pub fn set_max_length(&self, n: usize) {
        self.shared.mutate(|st| st.max_length = n);
    }

    /// Caps the long-poll wait (the server caps `timeout` at 30 s; tests use short caps).
    pub fn set_long_poll_cap(&self, d: Duration) {
        self.shared.mutate(|st| st.long_poll_cap = d);
    }

    /// Moves the fake's clock (timestamps, `lastActivity`, `X-Nextcloud-Talk-Modified-Before`,
    /// the 24 h edit limit) forward.
    pub fn advance_time(&self, d: Duration) {
        self.shared
            .mutate(|st| st.clock_offset += d.as_secs() as i64);
    }

    /// The fake's current unix time.
    pub fn now(&self) -> i64 {
        self.shared.lock().now()
    }

    /// Every request received since the start or the last [`reset_counts`](FakeTalk::reset_counts).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.lock().requests.clone()
    }

    /// Number of requests matching `route` ([`Route::Any`] counts all).
    pub fn request_count(&self, route: Route) -> usize {
        self.shared
            .lock()
            .requests
            .iter()
            .filter(|r| route.matches(r.route))
            .count()
    }

    /// Forgets the recorded requests.
    pub fn reset_counts(&self) {
        self.shared.mutate(|st| st.requests.clear());
    }

    // ------------------------------------------------------------ bots

    /// Like `occ talk:bot:install <name> <secret> <url>` (features webhook + response)
    /// followed by `occ talk:bot:setup` for each room.
    pub fn install_bot(&self, name: &str, secret: &str, url: &str, rooms: &[&str]) {
        self.shared.mutate(|st| {
            let bot = st.bots.entry(name.to_string()).or_insert_with(|| Bot {
                name: name.to_string(),
                secret: secret.to_string(),
                url: url.to_string(),
                rooms: BTreeSet::new(),
                features: BOT_FEATURE_WEBHOOK | BOT_FEATURE_RESPONSE,
            });
            bot.secret = secret.to_string();
            bot.url = url.to_string();
            bot.rooms.extend(rooms.iter().map(|r| r.to_string()));
        });
    }

    /// Changes a bot's feature flags (`occ talk:bot:state --feature …`).
    pub fn set_bot_features(&self, name: &str, features: u8) {
        self.shared.mutate(|st| {
            st.bots
                .get_mut(name)
                .unwrap_or_else(|| panic!("no bot {name}"))
                .features = features;
        });
    }

    /// Newer servers also send system messages to bots as `Activity` webhooks
    /// (`BotService::afterSystemMessageSent`, not in `docs/bots.md`); off by default.
    pub fn set_bot_system_activity(&self, on: bool) {
        self.shared.mutate(|st| st.bot_system_activity = on);
    }

    /// The actor id of an installed bot (`bot-<sha1(url)>`).
    pub fn bot_actor(&self, name: &str) -> Option<String> {
        self.shared.lock().bots.get(name).map(Bot::actor_id)
    }

    /// (Re)sends the `Create` webhook of message `message_id` to `bot`; returns the bot's
    /// HTTP status (0 when the request failed).
    pub async fn send_bot_event(&self, bot: &str, token: &str, message_id: i64) -> u16 {
        self.send_bot_event_with(bot, token, message_id, Tamper::None)
            .await
    }

    /// Like [`send_bot_event`](FakeTalk::send_bot_event), spoiled as `tamper` says.
    pub async fn send_bot_event_with(
        &self,
        bot: &str,
        token: &str,
        message_id: i64,
        tamper: Tamper,
    ) -> u16 {
        let o = {
            let st = self.shared.lock();
            let b = st.bots.get(bot).unwrap_or_else(|| panic!("no bot {bot}"));
            let m = st
                .msgs
                .get(&message_id)
                .filter(|m| m.token == token)
                .unwrap_or_else(|| panic!("no message {message_id} in {token}"));
            Outgoing {
                bot: b.name.clone(),
                token: token.to_string(),
                message_id: Some(message_id),
                kind: "Create".into(),
                url: b.url.clone(),
                secret: b.secret.clone(),
                body: enc::php_json(&st.create_payload(m), false),
            }
        };
        self.deliver_recorded(o, tamper).await
    }

    /// Sends the `Join` (bot added) or `Leave` (bot removed) webhook of `docs/bots.md`.
    pub async fn send_bot_membership(&self, bot: &str, token: &str, joined: bool) -> u16 {
        let o = {
            let st = self.shared.lock();
            let b = st.bots.get(bot).unwrap_or_else(|| panic!("no bot {bot}"));
            let room = st
                .rooms
                .get(token)
                .unwrap_or_else(|| panic!("no room {token}"));
            let kind = if joined { "Join" } else { "Leave" };
            let payload = json!({
                "type": kind,
                "actor": {"type": "Application", "id": format!("bots/{}", b.actor_id()), "name": b.name},
                "object": {"type": "Collection", "id": room.token, "name": room.name},
            });
            Outgoing {
                bot: b.name.clone(),
                token: token.to_string(),
                message_id: None,
                kind: kind.into(),
                url: b.url.clone(),
                secret: b.secret.clone(),
                body: enc::php_json(&payload, false),
            }
        };
        self.deliver_recorded(o, Tamper::None).await
    }

    async fn deliver_recorded(&self, o: Outgoing, tamper: Tamper) -> u16 {
        let d = deliver(&self.shared, &o, tamper).await;
        let status = d.status.unwrap_or(0);
        self.shared.mutate(|st| st.deliveries.push(d));
        status
    }

    /// Every webhook sent so far (automatic and explicit), in completion order.
    pub fn bot_deliveries(&self) -> Vec<BotDelivery> {
        self.shared.lock().deliveries.clone()
    }

    /// Waits until at least `n` webhooks were sent (and answered or failed).
    pub async fn wait_bot_deliveries(&self, n: usize, timeout: Duration) -> Vec<BotDelivery> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.shared.events.subscribe();
        loop {
            let d = self.bot_deliveries();
            if d.len() >= n {
                return d;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => return self.bot_deliveries(),
            }
        }
    }
}
