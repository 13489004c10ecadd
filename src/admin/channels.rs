//! `GET /admin/channels`: every configured channel instance and how it is doing — for Talk
//! accounts the poller's rooms, last poll, lag, errors and backoff.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use utoipa::IntoParams;

use super::extract::Query;
use super::{ApiError, ErrorBody, schema};

use crate::config::TalkMode;
use crate::deps::Deps;

/// Every configured channel instance and how it is doing.
///
/// For Talk accounts the poller's rooms, last poll, lag, errors and backoff; for mailboxes the
/// tracker's.
#[utoipa::path(
    get,
    path = "/channels",
    tag = "channels",
    operation_id = "list_channels",
    responses((status = 200, description = "The channel instances", body = schema::ChannelList))
)]
pub async fn list(State(deps): State<Deps>) -> Json<Value> {
    let settings = &deps.settings;
    let mut channels = Vec::new();
    for (name, hook) in &settings.webhooks {
        channels.push(json!({
            "channel": format!("webhook:{name}"),
            "kind": "webhook",
            "enabled": hook.enabled,
            "delivers": deps.sinks.contains_key(&format!("webhook:{name}")),
        }));
    }
    let pollers = deps.talk_pollers.get();
    for (name, talk) in &settings.talk {
        let duty = pollers.and_then(|p| p.get(name));
        let status =
            duty.map(|p| serde_json::to_value(p.current().status()).unwrap_or(Value::Null));
        let lease = duty.map(|p| serde_json::to_value(p.lease().get()).unwrap_or(Value::Null));
        channels.push(json!({
            "channel": crate::talk::channel_name(name),
            "kind": "talk",
            "enabled": talk.enabled,
            "mode": match talk.mode { TalkMode::Poll => "poll", TalkMode::Bot => "bot" },
            "base_url": talk.base_url,
            "poller": status,
            "lease": lease,
        }));
    }
    let trackers = deps.email_trackers.get();
    for (name, mail) in &settings.email {
        let duty = trackers.and_then(|t| t.get(name));
        let status =
            duty.map(|t| serde_json::to_value(t.current().status()).unwrap_or(Value::Null));
        let lease = duty.map(|t| serde_json::to_value(t.lease().get()).unwrap_or(Value::Null));
        channels.push(json!({
            "channel": crate::email::channel_name(name),
            "kind": "email",
            "enabled": mail.enabled,
            "address": mail.address,
            "mailbox": mail.mailbox,
            "tracker": status,
            "lease": lease,
        }));
    }
    Json(json!({ "channels": channels }))
}

#[derive(Debug, serde::Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SkippedQuery {
    /// Only this channel instance, such as `email:main`.
    channel: Option<String>,
    /// The `next_cursor` of the previous page; omit it for the first page.
    cursor: Option<i64>,
    /// Items per page, 1–500.
    #[param(minimum = 1, maximum = 500, default = 50)]
    limit: Option<usize>,
}

/// Inbound messages recorded without an answer.
///
/// With the reason (loop guards, sender policy, rate limits, unreadable mail), newest first.
#[utoipa::path(
    get,
    path = "/skipped",
    tag = "channels",
    operation_id = "list_skipped",
    params(SkippedQuery),
    responses(
        (status = 200, description = "A page of skipped messages", body = schema::SkippedPage),
        (status = 400, description = "`invalid_parameter`", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn skipped(
    State(deps): State<Deps>,
    Query(q): Query<SkippedQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = super::limit(q.limit)?;
    let rows = deps
        .store
        .skipped_messages(
            q.channel.as_deref(),
            q.cursor.map(crate::domain::MessageId),
            limit,
        )
        .await?;
    let next = (rows.len() == limit)
        .then(|| rows.last().map(|m| m.id))
        .flatten();
    let items: Vec<Value> = rows
        .into_iter()
        .map(|m| {
            json!({
                "reason": m.meta.get("skipped").cloned().unwrap_or(Value::Null),
                "message": m,
            })
        })
        .collect();
    Ok(Json(json!({ "items": items, "next_cursor": next })))
}
