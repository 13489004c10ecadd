//! Targets: Talk OCS payloads (room list, chat messages, participants) and the Talk bot webhook
//! (signature check and Activity payload, then the real route).

use std::sync::{Arc, LazyLock};

use super::engine::Outcome;
use super::support::{AcceptAll, json_error, through_router};

pub fn ocs(input: &[u8]) -> Outcome {
    use ctxgate_talk::wire::{ChatMessage, Envelope, Participant, Room};
    let mut labels = Vec::new();
    match serde_json::from_slice::<Envelope<Vec<Room>>>(input) {
        Ok(rooms) => {
            for room in &rooms.ocs.data {
                let _ = room.last_message_id();
            }
            labels.push("rooms ok".to_owned());
        }
        Err(e) => labels.push(format!("rooms {}", json_error(&e)?)),
    }
    match serde_json::from_slice::<Envelope<Vec<ChatMessage>>>(input) {
        Ok(messages) => {
            for m in &messages.ocs.data {
                let rendered = ctxgate_talk::render::render(&m.message, &m.message_parameters);
                if m.message_parameters.is_empty() && rendered.text != m.message {
                    return Err(format!(
                        "rendering without parameters changed {:?} into {:?}",
                        m.message, rendered.text
                    ));
                }
                let _ = (m.is_system(), m.parent_id());
                if let Some(parent) = m.parent.as_ref().and_then(|p| p.message()) {
                    ctxgate_talk::render::render(&parent.message, &parent.message_parameters);
                }
                // What the poller keeps is stored as JSON again.
                serde_json::to_string(m)
                    .map_err(|e| format!("a message does not re-serialise: {e}"))?;
            }
            labels.push("chat ok".to_owned());
        }
        Err(e) => labels.push(format!("chat {}", json_error(&e)?)),
    }
    if let Err(e) = serde_json::from_slice::<Envelope<Vec<Participant>>>(input) {
        json_error(&e)?;
    }
    Ok(labels.join(", "))
}

pub const OCS_TOKENS: &[&[u8]] = &[
    b"\"ocs\":",
    b"\"meta\":",
    b"\"data\":",
    b"\"id\":",
    b"\"token\":",
    b"\"type\":",
    b"\"actorType\":\"users\"",
    b"\"actorId\":",
    b"\"message\":",
    b"\"messageParameters\":",
    b"\"parent\":",
    b"\"deleted\":true",
    b"\"systemMessage\":\"message_edited\"",
    b"\"lastMessage\":",
    b"\"readOnly\":",
    b"{mention-user1}",
    b"{mention-call1}",
    b"{file}",
    b"\"mention-user1\":{\"type\":\"user\",\"id\":\"assistant\",\"name\":\"A\"}",
];

const BOT_SECRET: &str = "a-bot-secret-of-at-least-forty-characters-0123";
const BOT_BACKEND: &str = "https://cloud.example.org";

static BOT_ROUTER: LazyLock<axum::Router> = LazyLock::new(|| {
    let endpoint = ctxgate_talk::receiver::BotEndpoint {
        account: "bots".into(),
        channel: "talk:bots".into(),
        secret: BOT_SECRET.into(),
        backend: BOT_BACKEND.into(),
        bot_name: "assistant".into(),
        answer_all: false,
        allowed_users: Vec::new(),
        agents: vec![ctxgate_contract::AgentHandle {
            id: "reviewer".into(),
            names: vec!["reviewer".into(), "Rev".into()],
        }],
    };
    ctxgate_talk::receiver::BotReceiver::new(vec![endpoint], Arc::new(AcceptAll)).router()
});

pub fn bot(input: &[u8]) -> Outcome {
    use ctxgate_talk::bot::{self, BotEvent, PayloadError};
    let random = "r4nd0m".repeat(10);
    // The signature check: what we sign verifies, a different body or secret does not, and
    // header text derived from the input is checked without trouble.
    let signature = bot::sign(BOT_SECRET, &random, input);
    if !bot::verify(BOT_SECRET, &random, input, &signature) {
        return Err("a correct signature is refused".into());
    }
    if bot::verify(
        "another-secret-of-at-least-forty-characters",
        &random,
        input,
        &signature,
    ) {
        return Err("a signature under another secret is accepted".into());
    }
    let header_ish = String::from_utf8_lossy(&input[..input.len().min(96)]);
    if bot::verify(BOT_SECRET, &random, input, &header_ish) && header_ish.trim() != signature {
        return Err(format!("the header {header_ish:?} verifies"));
    }
    let _ = bot::backend_matches(&header_ish, BOT_BACKEND);

    let parsed = match bot::parse(input) {
        Ok(BotEvent::Message(m)) => {
            ctxgate_talk::render::render(&m.message, &m.parameters);
            "message"
        }
        Ok(BotEvent::Membership { .. }) => "membership",
        Ok(BotEvent::Other(_)) => "other",
        Err(e @ (PayloadError::Shape(_) | PayloadError::Content(_))) => {
            if e.to_string().is_empty() {
                return Err("a payload error without a message".into());
            }
            match e {
                PayloadError::Shape(_) => "err shape",
                PayloadError::Content(_) => "err content",
            }
        }
    };
    // The same body through the real route, correctly signed.
    let request = axum::http::Request::post("/talk/bots/bot")
        .header(bot::RANDOM_HEADER, &random)
        .header(bot::SIGNATURE_HEADER, &signature)
        .header(bot::BACKEND_HEADER, BOT_BACKEND)
        .body(axum::body::Body::from(input.to_vec()))
        .map_err(|e| e.to_string())?;
    let http = through_router(&BOT_ROUTER, request)?;
    Ok(format!("{parsed}; {http}"))
}

pub const BOT_TOKENS: &[&[u8]] = &[
    b"\"type\":\"Create\"",
    b"\"type\":\"Join\"",
    b"\"type\":\"Like\"",
    b"\"actor\":",
    b"\"object\":",
    b"\"target\":",
    b"\"content\":",
    b"\"inReplyTo\":",
    b"\"id\":\"users/",
    b"\"id\":\"bots/",
    b"\\\"message\\\":",
    b"\\\"parameters\\\":",
    b"\\\\ud800",
    b"@assistant",
];
