//! The HTTP side of bot (webhook) mode: `POST /talk/{account}/bot`.
//!
//! Verifies `X-Nextcloud-Talk-Signature` over `X-Nextcloud-Talk-Random` + the raw body in
//! constant time, checks `X-Nextcloud-Talk-Backend` against the configured server, decodes
//! `object.content` a second time and hands the message to intake (`docs/bots.md`). A replayed
//! request carries the same message id, which intake deduplicates.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::Utc;
use ctxgate_contract::{
    AgentHandle, Audience, EventKind, InboundEvent, InboundMessage, Intake, IntakeError,
    MessageKind, Role, SenderKind, SourceType, addressed_agents,
};
use serde_json::json;

use crate::bot::{self, BotEvent, BotMessage};
use crate::render::render;

/// One Talk account in bot mode.
#[derive(Clone)]
pub struct BotEndpoint {
    pub account: String,
    /// The channel instance, `talk:<account>`.
    pub channel: String,
    pub secret: String,
    /// The configured server; `X-Nextcloud-Talk-Backend` must name it.
    pub backend: String,
    /// In group rooms, `@<bot_name>` in the text asks for an answer.
    pub bot_name: String,
    pub answer_all: bool,
    /// Users whose messages may be answered; empty = anyone.
    pub allowed_users: Vec<String>,
    /// The agents answering on this account: `@name` in a message addresses them (each
    /// answers); empty = the one implicit agent, asked with `@<bot_name>`.
    pub agents: Vec<AgentHandle>,
}

#[derive(Clone)]
pub struct BotReceiver {
    endpoints: Arc<HashMap<String, BotEndpoint>>,
    intake: Arc<dyn Intake>,
}

impl BotReceiver {
    pub fn new(endpoints: Vec<BotEndpoint>, intake: Arc<dyn Intake>) -> Self {
        Self {
            endpoints: Arc::new(
                endpoints
                    .into_iter()
                    .map(|e| (e.account.clone(), e))
                    .collect(),
            ),
            intake,
        }
    }

    pub fn router<S>(self) -> Router<S> {
        Router::new()
            .route("/talk/{account}/bot", post(receive))
            .with_state(self)
    }
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({"error": {"code": code, "message": message.into()}});
    (status, axum::Json(body)).into_response()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[tracing::instrument(skip_all, fields(channel = %format!("talk:{account}")))]
async fn receive(
    State(receiver): State<BotReceiver>,
    Path(account): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(endpoint) = receiver.endpoints.get(&account) else {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_account",
            format!("no Talk account {account:?} in bot mode"),
        );
    };
    let (Some(random), Some(signature)) = (
        header(&headers, bot::RANDOM_HEADER),
        header(&headers, bot::SIGNATURE_HEADER),
    ) else {
        return error(
            StatusCode::UNAUTHORIZED,
            "missing_signature",
            "X-Nextcloud-Talk-Random and X-Nextcloud-Talk-Signature are required",
        );
    };
    if !bot::verify(&endpoint.secret, random, &body, signature) {
        tracing::warn!("rejected a Talk bot request with a bad signature");
        return error(
            StatusCode::UNAUTHORIZED,
            "bad_signature",
            "the signature does not match the body",
        );
    }
    match header(&headers, bot::BACKEND_HEADER) {
        Some(b) if bot::backend_matches(b, &endpoint.backend) => {}
        other => {
            tracing::warn!(backend = ?other, "rejected a Talk bot request from another server");
            return error(
                StatusCode::FORBIDDEN,
                "unknown_backend",
                "X-Nextcloud-Talk-Backend does not name the configured server",
            );
        }
    }
    let event = match bot::parse(&body) {
        Ok(e) => e,
        Err(e) => return error(StatusCode::BAD_REQUEST, "bad_payload", e.to_string()),
    };
    let message = match event {
        BotEvent::Message(m) => m,
        BotEvent::Membership { room, joined } => {
            tracing::info!(%room, joined, "the bot's room membership changed");
            return (StatusCode::OK, axum::Json(json!({"status": "ignored"}))).into_response();
        }
        BotEvent::Other(kind) => {
            tracing::debug!(%kind, "ignored a Talk bot event");
            return (StatusCode::OK, axum::Json(json!({"status": "ignored"}))).into_response();
        }
    };
    // Written messages are named "message" (attachments were "" until Talk 23); anything else is
    // a system message, which never enters history.
    if !(message.name == "message" || message.name.is_empty()) {
        return (StatusCode::OK, axum::Json(json!({"status": "ignored"}))).into_response();
    }
    match receiver.intake.submit(to_event(endpoint, *message)).await {
        Ok(receipt) => (
            StatusCode::OK,
            axum::Json(json!({
                "status": if receipt.duplicate { "duplicate" } else { "accepted" },
                "task_id": receipt.task_id,
            })),
        )
            .into_response(),
        Err(IntakeError::Invalid(why)) => error(StatusCode::BAD_REQUEST, "invalid_event", why),
        Err(IntakeError::ShuttingDown) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the gateway is shutting down; Talk retries later",
        ),
        Err(IntakeError::Unavailable(why)) => {
            tracing::error!(error = %why, "cannot store a Talk bot message");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "the message could not be stored; retry later",
            )
        }
    }
}

fn to_event(endpoint: &BotEndpoint, m: BotMessage) -> InboundEvent {
    let rendered = render(&m.message, &m.parameters);
    let from_bot = m.actor_type == "bots";
    let mention = format!("@{}", endpoint.bot_name.to_lowercase());
    let addressed = addressed_agents(&rendered.text, &endpoint.agents);
    let asks = endpoint.answer_all
        || !addressed.is_empty()
        || rendered.text.to_lowercase().contains(&mention)
        || m.in_reply_to
            .as_ref()
            .is_some_and(|(_, actor)| actor.starts_with("bots/"));
    let allowed = endpoint.allowed_users.is_empty()
        || (m.actor_type == "users" && endpoint.allowed_users.contains(&m.actor_id));
    let mut meta = json!({ "actor_type": m.actor_type, "room_name": m.room_name, "bot": true });
    if asks && !allowed && !from_bot {
        meta["skipped"] = "sender_not_allowed".into();
    }
    InboundEvent {
        channel: endpoint.channel.clone(),
        conversation: m.room.clone(),
        kind: EventKind::Posted(InboundMessage {
            channel_message_id: m.message_id,
            sender_id: m.actor_id,
            sender_name: Some(m.actor_name).filter(|n| !n.is_empty()),
            sender_kind: match m.actor_type.as_str() {
                "guests" | "emails" => SenderKind::Guest,
                "bots" | "bridged" => SenderKind::Bot,
                _ => SenderKind::User,
            },
            role: Role::User,
            kind: MessageKind::Message,
            text: rendered.text,
            timestamp: Utc::now(),
            reply_to: m.in_reply_to.map(|(id, _)| id),
            source_type: SourceType::Talk,
            trigger: asks && allowed && !from_bot,
            agent: None,
            // Addressed to the agents it names (each answers), else to everyone.
            audience: if addressed.is_empty() {
                Audience::Everyone
            } else {
                Audience::Addressed {
                    agents: addressed,
                    users: Vec::new(),
                }
            },
            meta,
        }),
        cursor: None,
    }
}
