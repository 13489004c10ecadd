use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use ctxgate_contract::{
    Audience, EventKind, InboundEvent, InboundMessage, Intake, IntakeError, MessageKind, Role,
    SenderKind, SourceType,
};
use serde_json::json;

use crate::payload::WebhookPayload;
use crate::replay::ReplayGuard;
use crate::signature::{self, SIGNATURE_HEADER, TIMESTAMP_HEADER};

/// One configured webhook.
#[derive(Clone)]
pub struct WebhookEndpoint {
    pub name: String,
    pub secret: Vec<u8>,
    /// The agent answering this webhook's messages when the payload names none.
    pub agent: Option<String>,
    /// Signed requests must carry a timestamp within this many seconds of now.
    pub window_secs: i64,
}

/// The HTTP side of the webhook channel: verifies, parses and hands events to intake.
#[derive(Clone)]
pub struct WebhookReceiver {
    inner: Arc<Inner>,
}

struct Inner {
    endpoints: HashMap<String, WebhookEndpoint>,
    intake: Arc<dyn Intake>,
    replay: ReplayGuard,
    clock: fn() -> i64,
}

fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl WebhookReceiver {
    pub fn new(endpoints: Vec<WebhookEndpoint>, intake: Arc<dyn Intake>) -> Self {
        let endpoints = endpoints.into_iter().map(|e| (e.name.clone(), e)).collect();
        Self {
            inner: Arc::new(Inner {
                endpoints,
                intake,
                replay: ReplayGuard::default(),
                clock: unix_now,
            }),
        }
    }

    /// `POST /webhooks/{name}`.
    pub fn router<S>(self) -> Router<S> {
        Router::new()
            .route("/webhooks/{name}", post(receive))
            .with_state(self)
    }
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({"error": {"code": code, "message": message.into()}});
    (status, axum::Json(body)).into_response()
}

#[tracing::instrument(skip_all, fields(channel = %format!("webhook:{name}")))]
async fn receive(
    State(receiver): State<WebhookReceiver>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            return error(
                e.status(),
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    "body_too_large"
                } else {
                    "unreadable_body"
                },
                e.body_text(),
            );
        }
    };
    let inner = &receiver.inner;
    let Some(endpoint) = inner.endpoints.get(&name) else {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_webhook",
            format!("no webhook named {name:?} is configured"),
        );
    };
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let now = (inner.clock)();
    let sig = match signature::verify(
        &endpoint.secret,
        header(SIGNATURE_HEADER),
        header(TIMESTAMP_HEADER),
        &body,
        now,
        endpoint.window_secs,
    ) {
        Ok(canonical) => canonical,
        Err(e) => {
            tracing::debug!(code = e.code(), "webhook request refused");
            return error(StatusCode::UNAUTHORIZED, e.code(), e.to_string());
        }
    };
    if !inner
        .replay
        .first_sight(&sig, now, now + 2 * endpoint.window_secs)
    {
        return error(
            StatusCode::UNAUTHORIZED,
            "replayed",
            "this exact signed request was already received",
        );
    }
    let payload = match WebhookPayload::parse(&body) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::UNPROCESSABLE_ENTITY, e.code(), e.to_string()),
    };
    let event = to_event(&name, endpoint, payload, &sig);
    match inner.intake.submit(event).await {
        Ok(receipt) => (
            StatusCode::ACCEPTED,
            axum::Json(json!({
                "task_id": receipt.task_id,
                "conversation_id": receipt.conversation_id,
                "message_id": receipt.message_id,
                "duplicate": receipt.duplicate,
            })),
        )
            .into_response(),
        Err(e) => {
            // Not stored: let the sender retry the very same request.
            inner.replay.forget(&sig);
            match e {
                IntakeError::Invalid(m) => {
                    error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_payload", m)
                }
                IntakeError::Unavailable(m) => {
                    tracing::warn!(error = %m, "webhook intake failed");
                    error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "store_unavailable",
                        "the message could not be stored; retry later",
                    )
                }
                IntakeError::ShuttingDown => error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "shutting_down",
                    "the gateway is shutting down; retry later",
                ),
            }
        }
    }
}

fn to_event(name: &str, endpoint: &WebhookEndpoint, p: WebhookPayload, sig: &str) -> InboundEvent {
    // Without a caller-chosen id, the signature identifies the request: the same signed request
    // delivered twice (even across a restart) is one message.
    let channel_message_id = p.message_id.unwrap_or_else(|| format!("sig:{sig}"));
    let meta = match &p.callback_url {
        Some(url) => json!({ "callback_url": url }),
        None => serde_json::Value::Null,
    };
    InboundEvent {
        channel: crate::channel_name(name),
        conversation: p.conversation,
        kind: EventKind::Posted(InboundMessage {
            kind: MessageKind::Message,
            channel_message_id,
            sender_id: p.sender,
            sender_name: p.sender_name,
            sender_kind: SenderKind::User,
            role: Role::User,
            text: p.text,
            timestamp: chrono::Utc::now(),
            reply_to: p.reply_to,
            source_type: SourceType::Webhook,
            trigger: p.trigger,
            // A message naming an agent is addressed to it; otherwise to everyone.
            audience: match &p.agent {
                Some(a) => Audience::Addressed {
                    agents: vec![a.clone()],
                    users: Vec::new(),
                },
                None => Audience::Everyone,
            },
            agent: p.agent.or_else(|| endpoint.agent.clone()),
            meta,
        }),
        cursor: None,
    }
}
