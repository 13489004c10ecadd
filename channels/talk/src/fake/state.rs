//! The fake server's data model and the rendering of messages, rooms and participants exactly
//! as the spreed controllers do (`Message::toArray`, `ChatController::prepareCommentsAsDataResponse`,
//! `Chat\Parser\SystemMessage`, `Chat\Parser\UserMention`, `RoomFormatter`).

use super::enc;
use super::{BotDelivery, RequestRecord, Route};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;
use tokio::sync::watch;

pub(crate) struct User {
    pub display_name: String,
    pub password: Option<String>,
}

pub(crate) struct Participant {
    pub user: String,
    pub attendee_id: i64,
    /// `docs/constants.md` participant types: 1 owner, 2 moderator, 3 user.
    pub participant_type: u8,
    pub last_read: i64,
    pub last_attendee_activity: i64,
    /// Newest message mentioning this participant (directly or via `@all`), and newest
    /// direct mention; maintained on write like the server's attendee columns.
    pub last_mention: i64,
    pub last_mention_direct: i64,
}

pub(crate) struct Room {
    pub id: i64,
    pub token: String,
    pub room_type: u8,
    pub name: String,
    pub participants: Vec<Participant>,
    /// Ids of the room's messages, ascending.
    pub msg_ids: Vec<i64>,
    pub last_activity: i64,
    pub last_message: Option<i64>,
    /// Bumped on every new message of the room; long polls wait on it.
    pub tx: watch::Sender<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Verb {
    Comment,
    System,
    Deleted,
    Reaction,
    ReactionDeleted,
}

#[derive(Clone)]
pub(crate) struct Reaction {
    pub emoji: String,
    pub actor_type: String,
    pub actor_id: String,
    pub ts: i64,
    /// Id of the `reaction` chat message that carries this reaction.
    pub msg_id: i64,
}

pub(crate) struct Msg {
    pub id: i64,
    pub token: String,
    pub actor_type: String,
    pub actor_id: String,
    /// Display name stored for guests (users and bots are resolved when rendering).
    pub actor_name: String,
    pub ts: i64,
    pub verb: Verb,
    /// Comment text, system-message key or reaction emoji.
    pub text: String,
    /// Rich-object parameters of a comment, or the parameters of a system message.
    pub params: Map<String, Value>,
    pub parent: Option<i64>,
    pub reference_id: String,
    pub silent: bool,
    pub last_edit: Option<(String, String, i64)>,
    pub deleted_by: Option<(String, String)>,
    pub reactions: Vec<Reaction>,
    pub expired: bool,
    pub can_mention_all: bool,
}

pub(crate) struct Bot {
    pub name: String,
    pub secret: String,
    pub url: String,
    pub rooms: BTreeSet<String>,
    pub features: u8,
}

impl Bot {
    pub fn actor_id(&self) -> String {
        format!("bot-{}", enc::sha1_hex(self.url.as_bytes()))
    }
}

pub(crate) enum FaultKind {
    Fail {
        status: u16,
        retry_after: Option<u64>,
    },
    Hang,
}

pub(crate) struct Fault {
    pub route: Route,
    pub kind: FaultKind,
    pub remaining: usize,
}

/// A new message before it gets an id.
pub(crate) struct NewMsg {
    pub actor_type: String,
    pub actor_id: String,
    pub actor_name: String,
    pub verb: Verb,
    pub text: String,
    pub params: Map<String, Value>,
    pub parent: Option<i64>,
    pub reference_id: String,
    pub silent: bool,
}

impl NewMsg {
    pub fn new(actor_type: &str, actor_id: &str, verb: Verb, text: &str) -> Self {
        NewMsg {
            actor_type: actor_type.to_string(),
            actor_id: actor_id.to_string(),
            actor_name: String::new(),
            verb,
            text: text.to_string(),
            params: Map::new(),
            parent: None,
            reference_id: String::new(),
            silent: false,
        }
    }
}

/// An outgoing webhook, computed under the lock and sent afterwards.
pub(crate) struct Outgoing {
    pub bot: String,
    pub token: String,
    pub message_id: Option<i64>,
    pub kind: String,
    pub url: String,
    pub secret: String,
    pub body: String,
}

pub(crate) struct State {
    pub base_url: String,
    pub users: BTreeMap<String, User>,
    pub rooms: BTreeMap<String, Room>,
    pub msgs: HashMap<i64, Msg>,
    pub next_msg_id: i64,
    pub next_room_id: i64,
    pub next_attendee_id: i64,
    pub max_length: usize,
    pub long_poll_cap: Duration,
    pub clock_offset: i64,
    pub faults: Vec<Fault>,
    pub requests: Vec<RequestRecord>,
    pub next_request_seq: u64,
    pub bots: BTreeMap<String, Bot>,
    pub deliveries: Vec<BotDelivery>,
    pub bot_system_activity: bool,
}

/// System messages that do not become the room's `lastMessage` (clients hide them).
fn hidden_system(key: &str) -> bool {
    matches!(
        key,
        "message_deleted" | "message_edited" | "reaction_revoked"
    )
}

impl State {
    pub fn new(base_url: String) -> Self {
        State {
            base_url,
            users: BTreeMap::new(),
            rooms: BTreeMap::new(),
            msgs: HashMap::new(),
            next_msg_id: 1,
            next_room_id: 1,
            next_attendee_id: 1,
            max_length: 32000,
            long_poll_cap: Duration::from_secs(30),
            clock_offset: 0,
            faults: Vec::new(),
            requests: Vec::new(),
            next_request_seq: 1,
            bots: BTreeMap::new(),
            deliveries: Vec::new(),
            bot_system_activity: false,
        }
    }

    pub fn now(&self) -> i64 {
        chrono::Utc::now().timestamp() + self.clock_offset
    }

    pub fn participant(&self, token: &str, user: &str) -> Option<&Participant> {
        self.rooms
            .get(token)?
            .participants
            .iter()
            .find(|p| p.user == user)
    }

    pub fn participant_mut(&mut self, token: &str, user: &str) -> Option<&mut Participant> {
        self.rooms
            .get_mut(token)?
            .participants
            .iter_mut()
            .find(|p| p.user == user)
    }

    pub fn is_moderator(&self, token: &str, user: &str) -> bool {
        self.participant(token, user)
            .is_some_and(|p| matches!(p.participant_type, 1 | 2))
    }

    /// Stores a message: global id, room list, `lastActivity`, `lastMessage`, wakes long polls.
    pub fn insert(&mut self, token: &str, m: NewMsg) -> i64 {
        let id = self.next_msg_id;
        self.next_msg_id += 1;
        let now = self.now();
        let hidden = match m.verb {
            Verb::Reaction | Verb::ReactionDeleted => true,
            Verb::System => hidden_system(&m.text),
            _ => false,
        };
        // Set by ChatManager::sendMessage for participants allowed to use `@all`; bots post
        // without a participant and do not get it.
        let can_mention_all = m.verb == Verb::Comment && m.actor_type != "bots";
        let msg = Msg {
            id,
            token: token.to_string(),
            actor_type: m.actor_type,
            actor_id: m.actor_id,
            actor_name: m.actor_name,
            ts: now,
            verb: m.verb,
            text: m.text,
            params: m.params,
            parent: m.parent,
            reference_id: m.reference_id,
            silent: m.silent,
            last_edit: None,
            deleted_by: None,
            reactions: Vec::new(),
            expired: false,
            can_mention_all,
        };
        let is_user_comment = msg.verb == Verb::Comment && msg.actor_type == "users";
        let sender = msg.actor_id.clone();
        self.msgs.insert(id, msg);
        let room = self.rooms.get_mut(token).expect("room exists");
        room.msg_ids.push(id);
        room.last_activity = now;
        if !hidden {
            room.last_message = Some(id);
        }
        // ChatManager::sendMessage moves the sender's read marker to their own message.
        if is_user_comment && let Some(p) = room.participants.iter_mut().find(|p| p.user == sender)
        {
            p.last_read = id;
            p.last_attendee_activity = now;
        }
        room.tx.send_modify(|v| *v += 1);
        self.track_mentions(token, id);
        id
    }

    pub fn last_common_read(&self, room: &Room) -> i64 {
        room.participants
            .iter()
            .map(|p| p.last_read)
            .min()
            .unwrap_or(0)
    }

    pub fn talk_hash(&self) -> String {
        enc::sha1_hex(format!("fake-talk#{}", self.max_length).as_bytes())
    }

    // ---------------------------------------------------------------- actors

    fn user_name(&self, uid: &str) -> Option<&str> {
        self.users.get(uid).map(|u| u.display_name.as_str())
    }

    fn bot_by_actor(&self, actor_id: &str) -> Option<&Bot> {
        self.bots.values().find(|b| b.actor_id() == actor_id)
    }

    /// `actorDisplayName` of a message.
    pub fn actor_display_name(&self, actor_type: &str, actor_id: &str, stored: &str) -> String {
        match actor_type {
            "users" => self.user_name(actor_id).unwrap_or_default().to_string(),
            "bots" => match self.bot_by_actor(actor_id) {
                Some(b) => format!("{} (Bot)", b.name),
                None if stored.is_empty() => actor_id.to_string(),
                None => stored.to_string(),
            },
            _ => stored.to_string(),
        }
    }

    /// `SystemMessage::getUser`.
    fn user_param(&self, uid: &str) -> Value {
        match self.user_name(uid) {
            Some(name) => json!({"type": "user", "id": uid, "name": name, "mention-id": uid}),
            None => json!({"type": "highlight", "id": "deleted_user", "name": "Deleted user"}),
        }
    }

    /// `SystemMessage::getActor`.
    fn actor_param(&self, actor_type: &str, actor_id: &str, stored_name: &str) -> Value {
        match actor_type {
            "guests" | "emails" => {
                let prefix = if actor_type == "guests" {
                    "guest/"
                } else {
                    "email/"
                };
                let name = match actor_id {
                    "cli" => "Administration".to_string(),
                    "system" => "System".to_string(),
                    _ if stored_name.is_empty() => "Guest".to_string(),
                    _ => format!("{stored_name} (guest)"),
                };
                let id = format!("{prefix}{actor_id}");
                json!({"type": "guest", "id": id, "name": name, "mention-id": id})
            }
            _ => self.user_param(actor_id),
        }
    }

    // ---------------------------------------------------------------- rooms

    /// The conversation name as seen by `viewer` (`Room::getDisplayName`): the other
    /// participant's display name in one-to-one conversations.
    pub fn room_display_name(&self, room: &Room, viewer: Option<&str>) -> String {
        if room.room_type == 1
            && let Some(other) = self.one_to_one_other(room, viewer)
        {
            return self.user_name(&other).unwrap_or(&other).to_string();
        }
        room.name.clone()
    }

    fn one_to_one_other(&self, room: &Room, viewer: Option<&str>) -> Option<String> {
        room.participants
            .iter()
            .map(|p| p.user.clone())
            .find(|u| Some(u.as_str()) != viewer)
    }

    fn icon_url(&self, token: &str) -> String {
        format!(
            "{}/ocs/v2.php/apps/spreed/api/v1/room/{token}/avatar",
            self.base_url
        )
    }

    // ---------------------------------------------------------------- messages

    /// `Chat\Parser\UserMention`: `@user`, `@"user with space"`, `@all` → `{mention-…N}`.
    fn parse_mentions(
        &self,
        room: &Room,
        m: &Msg,
        viewer: Option<&str>,
        mut text: String,
        params: &mut Map<String, Value>,
    ) -> String {
        let mut mentions: Vec<(String, String)> = find_mentions(&text)
            .into_iter()
            .map(|full| {
                let clean = full[1..].trim_matches('"').to_string();
                classify_mention(&clean)
            })
            .collect();
        mentions.sort_by_key(|(_, id)| std::cmp::Reverse(id.chars().count()));
        let mut counts: HashMap<String, usize> = HashMap::new();
        for (mut kind, id) in mentions {
            if kind == "user" && id == "all" {
                if !m.can_mention_all {
                    continue;
                }
                kind = "call".to_string();
            }
            let param = match kind.as_str() {
                "user" => match self.user_name(&id) {
                    Some(name) => json!({"type": "user", "id": id, "name": name, "mention-id": id}),
                    None => continue,
                },
                "call" => json!({
                    "type": "call",
                    "id": room.token,
                    "name": self.room_display_name(room, viewer),
                    "call-type": match room.room_type { 2 => "group", 3 => "public", _ => "one2one" },
                    "icon-url": self.icon_url(&room.token),
                    "mention-id": "all",
                }),
                "guest" => json!({"type": "guest", "id": id, "name": "Guest", "mention-id": id}),
                // Groups, teams and federated users are not modelled: the text stays as is.
                _ => continue,
            };
            let n = counts.entry(kind.clone()).or_insert(0);
            *n += 1;
            let key = format!("mention-{}{}", kind.replace('_', "-"), n);
            text = text.replace(&format!("@\"{id}\""), &format!("{{{key}}}"));
            if !id.contains(' ') && !id.starts_with("guest/") {
                text = text.replace(&format!("@{id}"), &format!("{{{key}}}"));
            }
            params.insert(key, param);
        }
        if text.starts_with("//") {
            text.remove(0);
        }
        text
    }

    /// `Chat\Parser\SystemMessage::parseMessage` for the subjects the fake produces.
    fn parse_system(
        &self,
        room: &Room,
        m: &Msg,
        viewer: Option<&str>,
    ) -> Option<(String, Map<String, Value>)> {
        let actor = self.actor_param(&m.actor_type, &m.actor_id, &m.actor_name);
        let is_actor =
            viewer.is_some() && actor["type"] == "user" && actor["id"].as_str() == viewer;
        let mut params = Map::new();
        params.insert("actor".into(), actor.clone());
        let pick = |third: &str, you: &str| {
            if is_actor {
                you.to_string()
            } else {
                third.to_string()
            }
        };
        let text = match m.text.as_str() {
            "conversation_created" => pick(
                "{actor} created the conversation",
                "You created the conversation",
            ),
            "user_added" | "user_removed" | "moderator_promoted" | "moderator_demoted" => {
                let uid = m
                    .params
                    .get("user")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let user = self.user_param(uid);
                let self_change = user["id"] == actor["id"];
                let is_user =
                    viewer.is_some() && user["type"] == "user" && user["id"].as_str() == viewer;
                params.insert("user".into(), user);
                match m.text.as_str() {
                    "user_added" if self_change => pick(
                        "{actor} joined the conversation",
                        "You joined the conversation",
                    ),
                    "user_added" if is_actor => "You added {user}".into(),
                    "user_added" if is_user => "{actor} added you".into(),
                    "user_added" => "{actor} added {user}".into(),
                    "user_removed" if self_change => {
                        pick("{actor} left the conversation", "You left the conversation")
                    }
                    "user_removed" if is_actor => "You removed {user}".into(),
                    "user_removed" if is_user => "{actor} removed you".into(),
                    "user_removed" => "{actor} removed {user}".into(),
                    "moderator_promoted" if is_actor => "You promoted {user} to moderator".into(),
                    "moderator_promoted" if is_user => "{actor} promoted you to moderator".into(),
                    "moderator_promoted" => "{actor} promoted {user} to moderator".into(),
                    _ if is_actor => "You demoted {user} from moderator".into(),
                    _ if is_user => "{actor} demoted you from moderator".into(),
                    _ => "{actor} demoted {user} from moderator".into(),
                }
            }
            "call_started" if room.room_type == 1 || room.room_type == 5 => {
                pick("Incoming call", "Outgoing call")
            }
            "call_started" => pick("{actor} started a call", "You started a call"),
            "lobby_timer_reached" => "The conversation is now open to everyone".into(),
            key => {
                let (third, you) = SIMPLE_SYSTEM
                    .iter()
                    .find(|(k, _, _)| *k == key)
                    .map(|(_, t, y)| (*t, *y))?;
                pick(third, you)
            }
        };
        Some((text, params))
    }

    /// One message as `Message::toArray` renders it for `viewer` (no `parent`).
    pub fn render(&self, m: &Msg, viewer: Option<&str>) -> Value {
        let room = &self.rooms[&m.token];
        let mut params = Map::new();
        let (message, message_type, system_message) = match m.verb {
            Verb::Comment => {
                params = m.params.clone();
                let text = self.parse_mentions(room, m, viewer, m.text.clone(), &mut params);
                (text, "comment", String::new())
            }
            Verb::System => match self.parse_system(room, m, viewer) {
                Some((text, p)) => {
                    params = p;
                    (text, "system", m.text.clone())
                }
                None => {
                    // Unknown subject: the parser throws and the raw JSON stays unparsed.
                    let raw =
                        json!({"message": m.text, "parameters": Value::Object(m.params.clone())});
                    (enc::php_json(&raw, false), "system", String::new())
                }
            },
            Verb::Deleted => {
                let (by_type, by_id) = m.deleted_by.clone().unwrap_or_default();
                let actor = self.actor_param(&by_type, &by_id, "");
                let author_is_actor = by_type == m.actor_type && by_id == m.actor_id;
                let current_is_actor =
                    viewer.is_some() && actor["type"] == "user" && actor["id"].as_str() == viewer;
                params.insert("actor".into(), actor);
                let text = if current_is_actor {
                    "Message deleted by you"
                } else if author_is_actor {
                    "Message deleted by author"
                } else {
                    "Message deleted by {actor}"
                };
                (text.to_string(), "comment_deleted", String::new())
            }
            Verb::Reaction => (m.text.clone(), "system", "reaction".to_string()),
            Verb::ReactionDeleted => (
                "Reaction deleted by author".to_string(),
                "system",
                "reaction_deleted".to_string(),
            ),
        };
        let replyable = !matches!(
            m.verb,
            Verb::Deleted | Verb::Reaction | Verb::ReactionDeleted
        ) && message_type != "system"
            && matches!(
                m.actor_type.as_str(),
                "users" | "federated_users" | "guests" | "emails" | "bots"
            );
        let mut reactions = Map::new();
        if m.verb != Verb::Deleted {
            for r in &m.reactions {
                let n = reactions.entry(r.emoji.clone()).or_insert(json!(0));
                *n = json!(n.as_i64().unwrap_or(0) + 1);
            }
        }
        let mut o = Map::new();
        o.insert("id".into(), json!(m.id));
        o.insert("token".into(), json!(m.token));
        o.insert("actorType".into(), json!(m.actor_type));
        o.insert("actorId".into(), json!(m.actor_id));
        o.insert(
            "actorDisplayName".into(),
            json!(self.actor_display_name(&m.actor_type, &m.actor_id, &m.actor_name)),
        );
        o.insert("timestamp".into(), json!(m.ts));
        o.insert("message".into(), json!(message));
        o.insert("messageParameters".into(), params_value(params));
        o.insert("systemMessage".into(), json!(system_message));
        o.insert("messageType".into(), json!(message_type));
        o.insert("isReplyable".into(), json!(replyable));
        o.insert("referenceId".into(), json!(m.reference_id));
        o.insert("reactions".into(), Value::Object(reactions));
        o.insert("expirationTimestamp".into(), json!(0));
        o.insert("markdown".into(), json!(message_type != "system"));
        o.insert("threadId".into(), json!(self.thread_id(m)));
        if let Some((t, id, ts)) = &m.last_edit {
            o.insert("lastEditActorType".into(), json!(t));
            o.insert("lastEditActorId".into(), json!(id));
            o.insert(
                "lastEditActorDisplayName".into(),
                json!(self.actor_display_name(t, id, "")),
            );
            o.insert("lastEditTimestamp".into(), json!(ts));
        }
        if m.verb == Verb::Deleted {
            o.insert("deleted".into(), json!(true));
        }
        if m.silent {
            o.insert("silent".into(), json!(true));
        }
        Value::Object(o)
    }

    /// `topmostParentId ?: id` (the comments manager's reply-chain root).
    fn thread_id(&self, m: &Msg) -> i64 {
        let mut root = m;
        let mut guard = 0;
        while let Some(p) = root.parent.and_then(|p| self.msgs.get(&p)) {
            root = p;
            guard += 1;
            if guard > 10_000 {
                break;
            }
        }
        if root.id == m.id { m.id } else { root.id }
    }

    fn reactions_self(&self, m: &Msg, viewer: Option<&str>) -> Option<Value> {
        let viewer = viewer?;
        if m.verb == Verb::Deleted {
            return None;
        }
        let mine: Vec<&str> = m
            .reactions
            .iter()
            .filter(|r| r.actor_type == "users" && r.actor_id == viewer)
            .map(|r| r.emoji.as_str())
            .collect();
        (!mine.is_empty()).then(|| json!(mine))
    }

    /// A message as the chat endpoints return it: with `parent` (the full parent message,
    /// never nested, or `{id, deleted: true}` when the parent is not visible any more) and
    /// `reactionsSelf`.
    pub fn render_full(&self, m: &Msg, viewer: Option<&str>) -> Value {
        let mut v = self.render(m, viewer);
        if let Some(rs) = self.reactions_self(m, viewer) {
            v["reactionsSelf"] = rs;
        }
        if let Some(pid) = m.parent {
            let parent = match self.msgs.get(&pid) {
                Some(p) if !p.expired && p.token == m.token => {
                    let mut pv = self.render(p, viewer);
                    if let Some(rs) = self.reactions_self(p, viewer) {
                        pv["reactionsSelf"] = rs;
                    }
                    pv
                }
                _ => json!({"id": pid, "deleted": true}),
            };
            v["parent"] = parent;
        }
        v
    }

    /// Messages of a room rendered for `viewer`, oldest first (expired ones are skipped).
    pub fn rendered_room(&self, token: &str, viewer: Option<&str>) -> Vec<Value> {
        let Some(room) = self.rooms.get(token) else {
            return Vec::new();
        };
        room.msg_ids
            .iter()
            .filter_map(|id| self.msgs.get(id))
            .filter(|m| !m.expired)
            .map(|m| self.render_full(m, viewer))
            .collect()
    }

    /// `{message, parameters}` as the bot webhook's `object.content` holds it.
    pub fn content_of(&self, m: &Msg, viewer: Option<&str>) -> Value {
        let v = self.render(m, viewer);
        json!({"message": v["message"], "parameters": v["messageParameters"]})
    }

    // ---------------------------------------------------------------- rooms

    fn unread(&self, room: &Room, p: &Participant) -> (i64, bool, bool) {
        let from = room.msg_ids.partition_point(|id| *id <= p.last_read);
        let count = room.msg_ids[from..]
            .iter()
            .filter_map(|id| self.msgs.get(id))
            .filter(|m| m.verb == Verb::Comment && !m.expired)
            .count() as i64;
        (
            count,
            p.last_mention > p.last_read,
            p.last_mention_direct > p.last_read,
        )
    }

    /// Records who message `id` mentions (on post and on edit).
    pub fn track_mentions(&mut self, token: &str, id: i64) {
        let Some(m) = self.msgs.get(&id).filter(|m| m.verb == Verb::Comment) else {
            return;
        };
        let author = (m.actor_type == "users").then(|| m.actor_id.clone());
        let v = self.render(m, None);
        let (mut users, mut all) = (Vec::new(), false);
        if let Some(params) = v["messageParameters"].as_object() {
            for param in params.values() {
                match param["type"].as_str() {
                    Some("user") => users.extend(param["id"].as_str().map(str::to_string)),
                    Some("call") => all = true,
                    _ => {}
                }
            }
        }
        if users.is_empty() && !all {
            return;
        }
        let Some(room) = self.rooms.get_mut(token) else {
            return;
        };
        for p in room.participants.iter_mut() {
            if author.as_deref() == Some(p.user.as_str()) {
                continue;
            }
            if users.contains(&p.user) {
                p.last_mention = id;
                p.last_mention_direct = id;
            } else if all {
                p.last_mention = id;
            }
        }
    }

    /// A conversation as `RoomFormatter::formatRoom` renders it for `user` (API v4).
    pub fn render_room(&self, room: &Room, user: &str) -> Value {
        let p = room
            .participants
            .iter()
            .find(|p| p.user == user)
            .expect("caller checked participation");
        let moderator = matches!(p.participant_type, 1 | 2);
        let (unread, mention, direct) = self.unread(room, p);
        let name = if room.room_type == 1 {
            self.one_to_one_other(room, Some(user)).unwrap_or_default()
        } else {
            room.name.clone()
        };
        let last_message = room
            .last_message
            .and_then(|id| self.msgs.get(&id))
            .filter(|m| !m.expired)
            .map(|m| {
                let mut v = self.render(m, Some(user));
                if let Some(o) = v.as_object_mut() {
                    o.remove("parent");
                }
                v
            })
            .unwrap_or_else(|| json!([]));
        let mut o = Map::new();
        let part = json!({
            "id": room.id,
            "token": room.token,
            "type": room.room_type,
            "name": name,
            "displayName": self.room_display_name(room, Some(user)),
            "description": "",
            "participantType": p.participant_type,
            "attendeeId": p.attendee_id,
            "attendeePin": "",
            "actorType": "users",
            "actorId": user,
            "permissions": if moderator { 254 } else { 246 },
            "attendeePermissions": 0,
            "callPermissions": 0,
            "defaultPermissions": 0,
            "participantFlags": 0,
            "readOnly": 0,
            "listable": 0,
            "messageExpiration": 0,
            "lastPing": 0,
            "sessionId": "0",
            "hasPassword": false,
            "hasCall": false,
            "callFlag": 0,
            "canStartCall": room.room_type != 6,
            "canDeleteConversation": moderator && room.room_type != 1 && room.room_type != 5,
        });
        if let Value::Object(m) = part {
            o.extend(m);
        }
        let part = json!({
            "canLeaveConversation": true,
            "lastActivity": room.last_activity,
            "isFavorite": false,
            "notificationLevel": if room.room_type == 1 { 1 } else { 2 },
            "lobbyState": 0,
            "lobbyTimer": 0,
            "sipEnabled": 0,
            "canEnableSIP": false,
            "unreadMessages": unread,
            "unreadMention": mention,
            "unreadMentionDirect": direct,
            "lastReadMessage": p.last_read,
            "lastCommonReadMessage": self.last_common_read(room),
            "lastMessage": last_message,
            "objectType": "",
            "objectId": "",
            "breakoutRoomMode": 0,
            "breakoutRoomStatus": 0,
            "avatarVersion": "",
            "isCustomAvatar": false,
            "callStartTime": 0,
            "callRecording": 0,
            "recordingConsent": 0,
            "mentionPermissions": 0,
            "isArchived": false,
            "isImportant": false,
            "isSensitive": false,
        });
        if let Value::Object(m) = part {
            o.extend(m);
        }
        Value::Object(o)
    }

    /// `docs/participant.md` "Get list of participants in a conversation".
    pub fn render_participants(&self, room: &Room) -> Value {
        Value::Array(
            room.participants
                .iter()
                .map(|p| {
                    json!({
                        "roomToken": room.token,
                        "inCall": 0,
                        "lastPing": 0,
                        "sessionIds": [],
                        "participantType": p.participant_type,
                        "attendeeId": p.attendee_id,
                        "actorId": p.user,
                        "actorType": "users",
                        "displayName": self.user_name(&p.user).unwrap_or_default(),
                        "permissions": if matches!(p.participant_type, 1 | 2) { 254 } else { 246 },
                        "attendeePermissions": 0,
                        "attendeePin": "",
                    })
                })
                .collect(),
        )
    }

    // ---------------------------------------------------------------- bots

    /// The Activity Streams `Create` body for `m`, as `BotService::afterChatMessageSent`
    /// builds it (actor is the sending attendee; `inReplyTo` for replies, Talk 21+).
    pub fn create_payload(&self, m: &Msg) -> Value {
        let room = &self.rooms[&m.token];
        let sender = (m.actor_type == "users").then_some(m.actor_id.as_str());
        let participant_type = sender
            .and_then(|u| self.participant(&m.token, u))
            .map(|p| p.participant_type)
            .unwrap_or(4);
        let mut object = note(m, &self.content_of(m, sender), "message");
        if let Some(parent) = m.parent.and_then(|p| self.msgs.get(&p)) {
            object["inReplyTo"] = json!({
                "type": "Note",
                "actor": {
                    "type": "Person",
                    "id": format!("{}/{}", parent.actor_type, parent.actor_id),
                    "name": self.actor_display_name(&parent.actor_type, &parent.actor_id, &parent.actor_name),
                },
                "object": note(parent, &self.content_of(parent, sender), "message"),
            });
        }
        json!({
            "type": "Create",
            "actor": {
                "type": "Person",
                "id": format!("{}/{}", m.actor_type, m.actor_id),
                "name": self.actor_display_name(&m.actor_type, &m.actor_id, &m.actor_name),
                "talkParticipantType": participant_type.to_string(),
            },
            "object": object,
            "target": {"type": "Collection", "id": room.token, "name": room.name},
        })
    }

    /// `BotService::afterSystemMessageSent` (newer servers; not in `docs/bots.md`).
    pub fn activity_payload(&self, m: &Msg) -> Value {
        let room = &self.rooms[&m.token];
        json!({
            "type": "Activity",
            "actor": {
                "type": "Person",
                "id": format!("{}/{}", m.actor_type, m.actor_id),
                "name": self.actor_display_name(&m.actor_type, &m.actor_id, &m.actor_name),
            },
            "object": note(m, &self.content_of(m, None), &m.text),
            "target": {"type": "Collection", "id": room.token, "name": room.name},
        })
    }

    /// Webhooks due for a freshly stored message: `Create` for messages of attendees (users,
    /// guests; "no bots for bots"), `Activity` for system messages when enabled.
    pub fn webhooks_for(&self, id: i64) -> Vec<Outgoing> {
        let Some(m) = self.msgs.get(&id) else {
            return Vec::new();
        };
        let payload = match m.verb {
            Verb::Comment if matches!(m.actor_type.as_str(), "users" | "guests" | "emails") => {
                self.create_payload(m)
            }
            Verb::System if self.bot_system_activity && !hidden_system(&m.text) => {
                self.activity_payload(m)
            }
            _ => return Vec::new(),
        };
        let kind = payload["type"].as_str().unwrap_or_default().to_string();
        let body = enc::php_json(&payload, false);
        self.bots
            .values()
            .filter(|b| b.rooms.contains(&m.token) && b.features & super::BOT_FEATURE_WEBHOOK != 0)
            .map(|b| Outgoing {
                bot: b.name.clone(),
                token: m.token.clone(),
                message_id: Some(id),
                kind: kind.clone(),
                url: b.url.clone(),
                secret: b.secret.clone(),
                body: body.clone(),
            })
            .collect()
    }

    pub fn has_webhook_bot(&self, token: &str) -> bool {
        self.bots
            .values()
            .any(|b| b.rooms.contains(token) && b.features & super::BOT_FEATURE_WEBHOOK != 0)
    }
}

/// `ActivityPubHelper::generateNote`.
fn note(m: &Msg, content: &Value, name: &str) -> Value {
    json!({
        "type": "Note",
        "id": m.id.to_string(),
        "name": name,
        "content": enc::php_json(content, false),
        "mediaType": "text/markdown",
    })
}

/// PHP renders an empty parameter array as `[]`, a filled one as an object.
pub(crate) fn params_value(params: Map<String, Value>) -> Value {
    if params.is_empty() {
        json!([])
    } else {
        Value::Object(params)
    }
}

/// Subjects without extra parameters: (key, third person, "You …").
const SIMPLE_SYSTEM: &[(&str, &str, &str)] = &[
    (
        "call_joined",
        "{actor} joined the call",
        "You joined the call",
    ),
    ("call_left", "{actor} left the call", "You left the call"),
    (
        "read_only_off",
        "{actor} unlocked the conversation",
        "You unlocked the conversation",
    ),
    (
        "read_only",
        "{actor} locked the conversation",
        "You locked the conversation",
    ),
    (
        "listable_none",
        "{actor} limited the conversation to the current participants",
        "You limited the conversation to the current participants",
    ),
    (
        "listable_users",
        "{actor} opened the conversation to registered users",
        "You opened the conversation to registered users",
    ),
    (
        "lobby_none",
        "{actor} opened the conversation to everyone",
        "You opened the conversation to everyone",
    ),
    (
        "lobby_non_moderators",
        "{actor} restricted the conversation to moderators",
        "You restricted the conversation to moderators",
    ),
    (
        "guests_allowed",
        "{actor} allowed guests",
        "You allowed guests",
    ),
    (
        "guests_disallowed",
        "{actor} disallowed guests",
        "You disallowed guests",
    ),
    (
        "password_set",
        "{actor} set a password",
        "You set a password",
    ),
    (
        "password_removed",
        "{actor} removed the password",
        "You removed the password",
    ),
    (
        "description_set",
        "{actor} set the description",
        "You set the description",
    ),
    (
        "description_removed",
        "{actor} removed the description",
        "You removed the description",
    ),
    (
        "message_deleted",
        "{actor} deleted a message",
        "You deleted a message",
    ),
    (
        "message_edited",
        "{actor} edited a message",
        "You edited a message",
    ),
    (
        "reaction_revoked",
        "{actor} deleted a reaction",
        "You deleted a reaction",
    ),
    (
        "history_cleared",
        "{actor} cleared the history of the conversation",
        "You cleared the history of the conversation",
    ),
    (
        "avatar_set",
        "{actor} set the conversation picture",
        "You set the conversation picture",
    ),
    (
        "avatar_removed",
        "{actor} removed the conversation picture",
        "You removed the conversation picture",
    ),
    (
        "message_expiration_disabled",
        "{actor} disabled message expiration",
        "You disabled message expiration",
    ),
    (
        "recording_started",
        "{actor} started the video recording",
        "You started the video recording",
    ),
    (
        "recording_stopped",
        "{actor} stopped the video recording",
        "You stopped the video recording",
    ),
    (
        "audio_recording_started",
        "{actor} started the audio recording",
        "You started the audio recording",
    ),
    (
        "audio_recording_stopped",
        "{actor} stopped the audio recording",
        "You stopped the audio recording",
    ),
    (
        "breakout_rooms_started",
        "{actor} started breakout rooms",
        "You started breakout rooms",
    ),
    (
        "breakout_rooms_stopped",
        "{actor} stopped breakout rooms",
        "You stopped breakout rooms",
    ),
    (
        "matterbridge_config_enabled",
        "{actor} started Matterbridge",
        "You started Matterbridge",
    ),
    (
        "matterbridge_config_disabled",
        "{actor} stopped Matterbridge",
        "You stopped Matterbridge",
    ),
];

/// `OC\Comments\Comment::getMentions` (server): the regex
/// `\B(?<![^a-z0-9_\-@\.\'\s])@("guest\/[a-f0-9]+"|"(?:federated_)?(?:group|team|user)\/[a-z0-9_\-@\.\' \/:]+"|"[a-z0-9_\-@\.\' ]+"|[a-z0-9_\-@\.\']+)`
/// (case-insensitive, byte mode), returning the unique full matches sorted longest first.
pub(crate) fn find_mentions(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let boundary = i == 0 || {
            let p = chars[i - 1];
            matches!(
                p,
                '-' | '@' | '.' | '\'' | ' ' | '\t' | '\n' | '\r' | '\u{b}' | '\u{c}'
            )
        };
        if chars[i] == '@'
            && boundary
            && let Some(end) = match_mention(&chars, i + 1)
        {
            let s: String = chars[i..end].iter().collect();
            if !out.contains(&s) {
                out.push(s);
            }
            i = end;
            continue;
        }
        i += 1;
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.chars().count()));
    out
}

fn match_mention(chars: &[char], start: usize) -> Option<usize> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '@' | '.' | '\'');
    if chars.get(start) == Some(&'"') {
        let close = chars[start + 1..].iter().position(|c| *c == '"')? + start + 1;
        let inner: String = chars[start + 1..close].iter().collect();
        if inner.is_empty() {
            return None;
        }
        let lower = inner.to_ascii_lowercase();
        if let Some(hexpart) = lower.strip_prefix("guest/")
            && !hexpart.is_empty()
            && hexpart.chars().all(|c| c.is_ascii_hexdigit())
        {
            return Some(close + 1);
        }
        let typed = ["group/", "team/", "user/"].iter().any(|p| {
            lower
                .strip_prefix("federated_")
                .unwrap_or(&lower)
                .starts_with(p)
        });
        if typed {
            let rest = lower.split_once('/').map(|x| x.1).unwrap_or("");
            if !rest.is_empty()
                && rest
                    .chars()
                    .all(|c| plain(c) || matches!(c, ' ' | '/' | ':'))
            {
                return Some(close + 1);
            }
        }
        if inner.chars().all(|c| plain(c) || c == ' ') {
            return Some(close + 1);
        }
        return None;
    }
    let mut end = start;
    while end < chars.len() && plain(chars[end]) {
        end += 1;
    }
    (end > start).then_some(end)
}

/// Type and id of a mention (`guest/…`, `group/…`, … or a user id).
fn classify_mention(clean: &str) -> (String, String) {
    for (prefix, kind) in [
        ("federated_group/", "federated_group"),
        ("group/", "group"),
        ("federated_team/", "federated_team"),
        ("team/", "team"),
        ("federated_user/", "federated_user"),
    ] {
        if let Some(rest) = clean.strip_prefix(prefix) {
            return (kind.to_string(), rest.to_string());
        }
    }
    if clean.starts_with("guest/") {
        return ("guest".to_string(), clean.to_string());
    }
    ("user".to_string(), clean.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_follow_the_server_regex() {
        assert_eq!(find_mentions("hi @alice and @bob"), vec!["@alice", "@bob"]);
        assert_eq!(find_mentions("mail a@b.c"), Vec::<String>::new());
        assert_eq!(find_mentions("(@alice)"), Vec::<String>::new());
        assert_eq!(
            find_mentions("@\"space user\" @al @alice"),
            vec!["@\"space user\"", "@alice", "@al"]
        );
        assert_eq!(find_mentions("@all, please"), vec!["@all"]);
        assert_eq!(find_mentions("@\"guest/abc1\""), vec!["@\"guest/abc1\""]);
        assert_eq!(find_mentions("@\"unterminated"), Vec::<String>::new());
    }
}
