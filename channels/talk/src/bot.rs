//! Talk bots (webhook mode), following nextcloud/spreed `docs/bots.md`.
//!
//! Server → bot: a POST whose `X-Nextcloud-Talk-Signature` is the lowercase hex HMAC-SHA256 of
//! `X-Nextcloud-Talk-Random` + the raw body under the shared secret, with the sender's base URL in
//! `X-Nextcloud-Talk-Backend`. The body is an Activity Streams 2.0 object whose `object.content`
//! is itself a JSON string `{message, parameters}`.
//!
//! Bot → server: `POST /ocs/v2.php/apps/spreed/api/v1/bot/{token}/message` signed the same way
//! over random + the MESSAGE TEXT (not the JSON body).

use std::collections::BTreeMap;
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use crate::client::TalkError;
use crate::wire::RichObject;

type HmacSha256 = Hmac<Sha256>;

pub const RANDOM_HEADER: &str = "X-Nextcloud-Talk-Random";
pub const SIGNATURE_HEADER: &str = "X-Nextcloud-Talk-Signature";
pub const BACKEND_HEADER: &str = "X-Nextcloud-Talk-Backend";
pub const BOT_RANDOM_HEADER: &str = "X-Nextcloud-Talk-Bot-Random";
pub const BOT_SIGNATURE_HEADER: &str = "X-Nextcloud-Talk-Bot-Signature";

/// Lowercase hex HMAC-SHA256(secret, random + payload).
pub fn sign(secret: &str, random: &str, payload: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(random.as_bytes());
    mac.update(payload);
    hex::encode(mac.finalize().into_bytes())
}

/// Checks a server → bot request in constant time. The signature may be in any hex case.
pub fn verify(secret: &str, random: &str, body: &[u8], signature: &str) -> bool {
    let Ok(expected) = hex::decode(signature.trim().to_ascii_lowercase()) else {
        return false;
    };
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(random.as_bytes());
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

/// Whether the `X-Nextcloud-Talk-Backend` header names the configured server (trailing slashes
/// and letter case of the host ignored).
pub fn backend_matches(header: &str, configured_base: &str) -> bool {
    let norm = |s: &str| s.trim().trim_end_matches('/').to_ascii_lowercase();
    norm(header) == norm(configured_base)
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Activity {
    #[serde(rename = "type")]
    pub kind: String,
    pub actor: Actor,
    pub object: serde_json::Value,
    pub target: Target,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Actor {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Target {
    #[serde(rename = "type", default)]
    pub kind: String,
    pub id: String,
    #[serde(default)]
    pub name: String,
}

/// A chat message received by a bot (`type: "Create"`, `object.type: "Note"`).
#[derive(Debug, Clone, PartialEq)]
pub struct BotMessage {
    /// The room token (`target.id`).
    pub room: String,
    pub room_name: String,
    pub message_id: String,
    /// `users/<uid>`, `guests/<hash>`, `bots/<id>`… split at the first `/`.
    pub actor_type: String,
    pub actor_id: String,
    pub actor_name: String,
    /// `message` for written messages, else a system message identifier (an empty string marked
    /// attachments until Talk 23).
    pub name: String,
    pub message: String,
    pub parameters: BTreeMap<String, RichObject>,
    /// The quoted parent (Talk 21+): its message id and actor (`users/<uid>`, `bots/<id>`).
    pub in_reply_to: Option<(String, String)>,
}

/// What a webhook delivered.
#[derive(Debug, Clone, PartialEq)]
pub enum BotEvent {
    Message(Box<BotMessage>),
    /// The bot was added to (`Join`) or removed from (`Leave`) a room.
    Membership {
        room: String,
        joined: bool,
    },
    /// Reactions (`Like`/`Undo`) and anything newer: acknowledged, not stored.
    Other(String),
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PayloadError {
    #[error("the body is not an Activity Streams object: {0}")]
    Shape(String),
    #[error("object.content is not the JSON string {{message, parameters}}: {0}")]
    Content(String),
}

#[derive(Deserialize)]
struct Note {
    id: serde_json::Value,
    #[serde(default)]
    name: String,
    content: String,
    #[serde(rename = "inReplyTo")]
    in_reply_to: Option<Quoted>,
}

#[derive(Deserialize)]
struct Quoted {
    actor: Actor,
    object: QuotedObject,
}

#[derive(Deserialize)]
struct QuotedObject {
    id: serde_json::Value,
}

#[derive(Deserialize)]
struct Content {
    message: String,
    #[serde(default, deserialize_with = "crate::wire::parameters")]
    parameters: BTreeMap<String, RichObject>,
}

fn id_string(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn parse(body: &[u8]) -> Result<BotEvent, PayloadError> {
    let activity: Activity =
        serde_json::from_slice(body).map_err(|e| PayloadError::Shape(e.to_string()))?;
    match activity.kind.as_str() {
        "Create" => {
            let note: Note = serde_json::from_value(activity.object)
                .map_err(|e| PayloadError::Shape(format!("object: {e}")))?;
            let content: Content = serde_json::from_str(&note.content)
                .map_err(|e| PayloadError::Content(e.to_string()))?;
            let (actor_type, actor_id) = split_actor(&activity.actor.id);
            Ok(BotEvent::Message(Box::new(BotMessage {
                room: activity.target.id,
                room_name: activity.target.name,
                message_id: id_string(&note.id),
                actor_type,
                actor_id,
                actor_name: activity.actor.name,
                name: note.name,
                message: content.message,
                parameters: content.parameters,
                in_reply_to: note
                    .in_reply_to
                    .map(|q| (id_string(&q.object.id), q.actor.id)),
            })))
        }
        "Join" | "Leave" => Ok(BotEvent::Membership {
            room: activity.target.id,
            joined: activity.kind == "Join",
        }),
        other => Ok(BotEvent::Other(other.to_owned())),
    }
}

fn split_actor(id: &str) -> (String, String) {
    match id.split_once('/') {
        Some((kind, rest)) => (kind.to_owned(), rest.to_owned()),
        None => (String::new(), id.to_owned()),
    }
}

/// Posts as a bot: signed over random + the message text.
#[derive(Clone)]
pub struct BotClient {
    http: reqwest::Client,
    base: String,
    secret: String,
}

impl std::fmt::Debug for BotClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl BotClient {
    pub fn new(base_url: &str, secret: &str, timeout: Duration) -> Result<Self, TalkError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| TalkError::Network(e.to_string()))?;
        Ok(Self {
            http,
            base: base_url.trim_end_matches('/').to_owned(),
            secret: secret.to_owned(),
        })
    }

    pub async fn post(
        &self,
        room: &str,
        message: &str,
        reply_to: Option<i64>,
        reference_id: Option<&str>,
    ) -> Result<(), TalkError> {
        let random = random_token();
        let signature = sign(&self.secret, &random, message.as_bytes());
        let mut body = serde_json::json!({ "message": message });
        if let Some(parent) = reply_to {
            body["replyTo"] = parent.into();
        }
        if let Some(reference) = reference_id {
            body["referenceId"] = reference.into();
        }
        let req = self
            .http
            .post(format!(
                "{}/ocs/v2.php/apps/spreed/api/v1/bot/{room}/message",
                self.base
            ))
            .header("OCS-APIRequest", "true")
            .header("Accept", "application/json")
            .header(BOT_RANDOM_HEADER, &random)
            .header(BOT_SIGNATURE_HEADER, signature)
            .json(&body);
        crate::client::send(req, Some(room)).await.map(drop)
    }
}

/// 64 characters from `[A-Za-z0-9]`, as the server's random header.
pub fn random_token() -> String {
    use rand::Rng;
    rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(64)
        .map(char::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample chat message of `docs/bots.md`, verbatim.
    const SAMPLE: &str = r#"{
        "type": "Create",
        "actor": {"type": "Person", "id": "users/ada-lovelace", "name": "Ada Lovelace"},
        "object": {
            "type": "Note",
            "id": "1567",
            "name": "message",
            "content": "{\"message\":\"hi {mention-call1} !\",\"parameters\":{\"mention-call1\":{\"type\":\"call\",\"id\":\"n3xtc10ud\",\"name\":\"world\",\"call-type\":\"group\",\"icon-url\":\"https:\\/\\/nextcloud.local\\/ocs\\/v2.php\\/apps\\/spreed\\/api\\/v1\\/room\\/n3xtc10ud\\/avatar\"}}}",
            "mediaType": "text/markdown"
        },
        "target": {"type": "Collection", "id": "n3xtc10ud", "name": "world"}
    }"#;

    #[test]
    fn parses_the_documented_sample() {
        let BotEvent::Message(m) = parse(SAMPLE.as_bytes()).unwrap() else {
            panic!("a message");
        };
        assert_eq!(m.room, "n3xtc10ud");
        assert_eq!(m.message_id, "1567");
        assert_eq!(
            (m.actor_type.as_str(), m.actor_id.as_str()),
            ("users", "ada-lovelace")
        );
        assert_eq!(m.message, "hi {mention-call1} !");
        assert_eq!(m.parameters["mention-call1"].kind, "call");
        assert_eq!(m.in_reply_to, None);
    }

    #[test]
    fn content_must_be_a_json_string() {
        let bad = SAMPLE.replace(r#""content": "{"#, r#""content": "not json {"#);
        assert!(matches!(
            parse(bad.as_bytes()),
            Err(PayloadError::Content(_))
        ));
    }

    #[test]
    fn signatures_round_trip_and_reject_tampering() {
        let secret = "a".repeat(40);
        let random = random_token();
        assert_eq!(random.len(), 64);
        let sig = sign(&secret, &random, SAMPLE.as_bytes());
        assert!(verify(&secret, &random, SAMPLE.as_bytes(), &sig));
        assert!(verify(
            &secret,
            &random,
            SAMPLE.as_bytes(),
            &sig.to_uppercase()
        ));
        assert!(!verify(&secret, &random, b"{}", &sig));
        assert!(!verify(&secret, "other", SAMPLE.as_bytes(), &sig));
        assert!(!verify(&secret, &random, SAMPLE.as_bytes(), "zz"));
        assert_ne!(random_token(), random);
    }

    #[test]
    fn membership_and_reactions() {
        let join = r#"{"type":"Join","actor":{"type":"Application","id":"bots/bot-x","name":"x"},
            "object":{"type":"Collection","id":"n3xtc10ud","name":"world"},
            "target":{"type":"Collection","id":"n3xtc10ud","name":"world"}}"#;
        assert_eq!(
            parse(join.as_bytes()).unwrap(),
            BotEvent::Membership {
                room: "n3xtc10ud".into(),
                joined: true
            }
        );
        assert!(backend_matches(
            "https://Cloud.example.org/",
            "https://cloud.example.org"
        ));
        assert!(!backend_matches(
            "https://evil.example",
            "https://cloud.example.org"
        ));
    }
}
