use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::IntoParams;

use super::extract::{Path, Query};
use super::{ApiError, ErrorBody, schema};
use crate::context::{Incoming, render};
use crate::deps::Deps;
use crate::domain::{ConversationId, MessageId};

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PreviewQuery {
    /// The text of the hypothetical new message.
    text: String,
    /// The message it would reply to.
    reply_to: Option<i64>,
    /// Whether to run triage (an LLM call) as a real task would.
    #[param(default = true)]
    triage: Option<bool>,
    /// Token budget instead of the configured one.
    budget: Option<usize>,
}

/// Preview the context a new message would get.
///
/// The context a new message with `text` would get now, with the reason and token count of
/// every message considered. With `triage` (the default) this calls the triage brain.
#[utoipa::path(
    get,
    path = "/conversations/{id}/context",
    tag = "conversations",
    operation_id = "preview_context",
    params(("id" = i64, Path, description = "Conversation id"), PreviewQuery),
    responses(
        (status = 200, description = "What the context would be", body = schema::ContextPreview),
        (status = 400, description = "`invalid_parameter`: `text` is missing, or a parameter is malformed or unknown", body = ErrorBody),
        (status = 404, description = "`not_found`: no such conversation", body = ErrorBody),
        (status = 503, description = "`store_unavailable`", body = ErrorBody),
    )
)]
pub async fn preview(
    State(deps): State<Deps>,
    Path(id): Path<i64>,
    Query(q): Query<PreviewQuery>,
) -> Result<Json<Value>, ApiError> {
    let id = ConversationId(id);
    let conversation = deps
        .store
        .get_conversation(id)
        .await?
        .ok_or_else(|| ApiError::not_found("conversation"))?;
    let mut settings = deps.settings.conversation.clone();
    if let Some(b) = q.budget {
        settings.max_context_tokens = b;
    }
    let completer = if q.triage.unwrap_or(true) {
        crate::brain::triage_completer(
            &deps.brains,
            &settings.selection_model,
            deps.settings.brain_for_channel(&conversation.channel),
        )
    } else {
        None
    };
    let incoming = Incoming {
        id: None,
        text: q.text,
        at_ms: deps.clock.now_ms(),
        until_ms: None,
        reply_to: q.reply_to.map(MessageId),
        resume: None,
        agent: None,
    };
    let selection = deps
        .context
        .select(
            deps.store.as_ref(),
            &settings,
            id,
            &incoming,
            completer.as_deref(),
        )
        .await?;
    let selected: Vec<Value> = selection
        .items
        .iter()
        .map(|i| {
            json!({
                "id": i.message.id,
                "channel_message_id": i.message.channel_message_id,
                "role": i.message.role,
                "speaker": render::speaker(&i.message),
                "created_at": i.message.created_at,
                "reason": i.reason,
                "tokens": i.tokens,
                "text": i.text,
            })
        })
        .collect();
    Ok(Json(json!({
        "conversation_id": id,
        "selected": selected,
        "left_out": selection.left_out,
        "tokens": selection.tokens,
        "budget": selection.budget,
        "triage_usage": selection.triage_usage,
        "notes": selection.notes,
    })))
}
