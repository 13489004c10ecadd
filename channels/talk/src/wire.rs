//! Typed shapes of the Talk OCS API, accepting what real servers send.
//!
//! Follows nextcloud/spreed `docs/chat.md` (message fields, parent data), `docs/conversation.md`
//! (room fields) and `docs/participant.md`. Real servers are looser than the tables suggest, so
//! the types are lenient where it matters: `messageParameters` is `[]` when empty and an object
//! otherwise; a rich object's `id` may be a number; a deleted parent is only `{id, deleted}`;
//! optional capabilities leave fields out.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// `{"ocs": {"meta": {...}, "data": ...}}`
#[derive(Debug, Deserialize)]
pub struct Envelope<T> {
    pub ocs: Ocs<T>,
}

#[derive(Debug, Deserialize)]
pub struct Ocs<T> {
    pub meta: Meta,
    pub data: T,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct Meta {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub statuscode: i64,
    #[serde(default)]
    pub message: Option<String>,
}

/// Actor types of chat messages (`docs/constants.md`).
pub mod actor {
    pub const USERS: &str = "users";
    pub const GUESTS: &str = "guests";
    pub const BOTS: &str = "bots";
    pub const BRIDGED: &str = "bridged";
    pub const FEDERATED_USERS: &str = "federated_users";
    pub const DELETED_USERS: &str = "deleted_users";
}

/// One chat message as `GET /chat/{token}` returns it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage {
    pub id: i64,
    #[serde(default)]
    pub token: String,
    pub actor_type: String,
    pub actor_id: String,
    #[serde(default)]
    pub actor_display_name: String,
    pub timestamp: i64,
    pub message: String,
    #[serde(default, deserialize_with = "parameters")]
    pub message_parameters: BTreeMap<String, RichObject>,
    #[serde(default)]
    pub message_type: String,
    #[serde(default)]
    pub system_message: String,
    #[serde(default, deserialize_with = "empty_as_none")]
    pub reference_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    #[serde(default)]
    pub silent: bool,
}

impl ChatMessage {
    pub fn is_system(&self) -> bool {
        self.message_type == "system" || !self.system_message.is_empty()
    }

    pub fn parent_id(&self) -> Option<i64> {
        self.parent.as_ref().map(Parent::id)
    }
}

/// The replied-to message: the full message, or `{id, deleted: true}` once it was deleted.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Parent {
    Message(Box<ChatMessage>),
    Deleted { id: i64, deleted: bool },
}

impl Parent {
    pub fn id(&self) -> i64 {
        match self {
            Parent::Message(m) => m.id,
            Parent::Deleted { id, .. } => *id,
        }
    }

    pub fn message(&self) -> Option<&ChatMessage> {
        match self {
            Parent::Message(m) => Some(m),
            Parent::Deleted { .. } => None,
        }
    }
}

/// A rich object parameter (`{mention-user1}`, `{file}`, …).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RichObject {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, deserialize_with = "string_or_number")]
    pub id: String,
    #[serde(default)]
    pub name: String,
}

/// A conversation as `GET /api/v4/room` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Room {
    pub token: String,
    #[serde(rename = "type")]
    pub kind: u8,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub display_name: String,
    #[serde(default)]
    pub last_activity: i64,
    #[serde(default, deserialize_with = "bool_or_int")]
    pub read_only: bool,
    /// The newest message (`[]` in an empty room).
    #[serde(default)]
    pub last_message: serde_json::Value,
}

impl Room {
    pub fn last_message_id(&self) -> Option<i64> {
        self.last_message
            .get("id")
            .and_then(serde_json::Value::as_i64)
    }
}

/// Conversation types (`docs/constants.md`).
pub mod room_type {
    pub const ONE_TO_ONE: u8 = 1;
    pub const GROUP: u8 = 2;
    pub const PUBLIC: u8 = 3;
    pub const CHANGELOG: u8 = 4;
    pub const FORMER_ONE_TO_ONE: u8 = 5;
    pub const NOTE_TO_SELF: u8 = 6;
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Participant {
    pub actor_type: String,
    pub actor_id: String,
    #[serde(default)]
    pub display_name: String,
}

pub(crate) fn parameters<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, RichObject>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    #[allow(dead_code)] // the list is only matched, never read
    enum Params {
        Map(BTreeMap<String, RichObject>),
        List(Vec<serde::de::IgnoredAny>),
        Null(()),
    }
    Ok(match Params::deserialize(d)? {
        Params::Map(m) => m,
        Params::List(_) | Params::Null(()) => BTreeMap::new(),
    })
}

fn empty_as_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.filter(|s| !s.is_empty()))
}

fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => s,
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    })
}

fn bool_or_int<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Bool(b) => b,
        serde_json::Value::Number(n) => n.as_i64().unwrap_or(0) != 0,
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(json: serde_json::Value) -> ChatMessage {
        serde_json::from_value(json).expect("parses")
    }

    #[test]
    fn empty_parameters_arrive_as_a_list() {
        let m = message(serde_json::json!({
            "id": 5, "token": "abcd1234", "actorType": "users", "actorId": "alice",
            "actorDisplayName": "Alice", "timestamp": 1700000000, "message": "hi",
            "messageParameters": [], "systemMessage": "", "messageType": "comment",
            "referenceId": ""
        }));
        assert!(m.message_parameters.is_empty());
        assert_eq!(m.reference_id, None);
        assert!(!m.is_system());
    }

    #[test]
    fn mentions_and_numeric_file_ids_parse() {
        let m = message(serde_json::json!({
            "id": 6, "token": "abcd1234", "actorType": "users", "actorId": "alice",
            "actorDisplayName": "Alice", "timestamp": 1700000000,
            "message": "{mention-user1} see {file}",
            "messageParameters": {
                "mention-user1": {"type": "user", "id": "bot", "name": "Assistant"},
                "file": {"type": "file", "id": 1234, "name": "notes.txt", "size": 10}
            },
            "systemMessage": "", "messageType": "comment"
        }));
        assert_eq!(m.message_parameters["mention-user1"].id, "bot");
        assert_eq!(m.message_parameters["file"].id, "1234");
    }

    #[test]
    fn parents_full_and_deleted() {
        let full = message(serde_json::json!({
            "id": 8, "actorType": "users", "actorId": "alice", "timestamp": 1, "message": "re",
            "messageParameters": [],
            "parent": {"id": 7, "actorType": "users", "actorId": "bot", "timestamp": 0,
                       "message": "earlier", "messageParameters": []}
        }));
        assert_eq!(full.parent_id(), Some(7));
        assert_eq!(
            full.parent.as_ref().unwrap().message().unwrap().actor_id,
            "bot"
        );
        let deleted = message(serde_json::json!({
            "id": 9, "actorType": "users", "actorId": "alice", "timestamp": 1, "message": "re",
            "messageParameters": [], "parent": {"id": 7, "deleted": true}
        }));
        assert_eq!(
            deleted.parent,
            Some(Parent::Deleted {
                id: 7,
                deleted: true
            })
        );
    }

    #[test]
    fn room_read_only_as_int() {
        let r: Room = serde_json::from_value(serde_json::json!({
            "token": "abcd1234", "type": 2, "name": "team", "displayName": "Team",
            "lastActivity": 1700000000, "readOnly": 0, "lastMessage": []
        }))
        .unwrap();
        assert_eq!(r.kind, room_type::GROUP);
        assert!(!r.read_only);
        assert_eq!(r.last_message_id(), None);
    }
}
