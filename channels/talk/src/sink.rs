//! Delivers answers into Talk rooms: `replyTo` in group rooms, `referenceId` =
//! the delivery's idempotency key (`ctxgate:task:{id}:{kind}`), long answers split at the
//! server's `spreed.config.chat.max-length`.
//!
//! A retried delivery may already have reached the room (the process died between the post and
//! its record), so before sending again the sink looks for its own tagged post in the room's
//! recent history (`docs/chat.md`: `referenceId` is returned with every message) and reuses it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ctxgate_contract::{ChannelError, Delivered, OutboundMessage, Sink};

use crate::bot::BotClient;
use crate::client::{DEFAULT_MAX_LENGTH, Direction, TalkClient, TalkError};
use crate::wire::room_type;

/// How many recent messages a retry searches for its own earlier post.
const LOOKBACK: usize = 200;

enum Via {
    User(TalkClient),
    Bot(BotClient),
}

pub struct TalkSink {
    channel: String,
    via: Via,
    /// 0 until the capability was read.
    max_length: AtomicUsize,
}

impl TalkSink {
    /// Posts as the account's user (poll mode).
    pub fn user(channel: &str, client: TalkClient) -> Self {
        Self {
            channel: channel.to_owned(),
            via: Via::User(client),
            max_length: AtomicUsize::new(0),
        }
    }

    /// Posts through the bot API (webhook mode). Bots cannot read history, so a retry after an
    /// uncertain post may post again; the reference id still marks both.
    pub fn bot(channel: &str, client: BotClient, max_length: usize) -> Self {
        Self {
            channel: channel.to_owned(),
            via: Via::Bot(client),
            max_length: AtomicUsize::new(max_length),
        }
    }

    async fn max_length(&self) -> usize {
        match self.max_length.load(Ordering::Relaxed) {
            0 => {
                let n = match &self.via {
                    Via::User(c) => c.max_length().await.unwrap_or(DEFAULT_MAX_LENGTH),
                    Via::Bot(_) => DEFAULT_MAX_LENGTH,
                };
                self.max_length.store(n, Ordering::Relaxed);
                n
            }
            n => n,
        }
    }

    /// The ids of the room's recent messages tagged with each reference.
    async fn already_posted(
        &self,
        client: &TalkClient,
        room: &str,
        references: &[String],
    ) -> Result<Vec<Option<i64>>, TalkError> {
        let recent = client
            .receive(room, Direction::History { before: None }, LOOKBACK)
            .await?;
        Ok(references
            .iter()
            .map(|r| {
                recent
                    .messages
                    .iter()
                    .find(|m| m.actor_id == client.user() && m.reference_id.as_deref() == Some(r))
                    .map(|m| m.id)
            })
            .collect())
    }
}

#[async_trait]
impl Sink for TalkSink {
    fn channel(&self) -> &str {
        &self.channel
    }

    #[tracing::instrument(skip_all, fields(channel = %self.channel, key = %message.idempotency_key))]
    async fn deliver(&self, message: &OutboundMessage) -> Result<Delivered, ChannelError> {
        let room = message.conversation.as_str();
        let limit = self.max_length().await;
        let parts = split(&message.text, limit);
        let references: Vec<String> = (0..parts.len())
            .map(|i| reference(&message.idempotency_key, i))
            .collect();
        let group = message
            .meta
            .get("room_type")
            .and_then(serde_json::Value::as_u64)
            .is_none_or(|t| t != u64::from(room_type::ONE_TO_ONE));
        let reply_to = message
            .reply_to
            .as_deref()
            .and_then(|r| r.parse::<i64>().ok())
            .filter(|_| group);
        let mut first_id = None;
        match &self.via {
            Via::User(client) => {
                let existing = if message.attempt > 1 {
                    self.already_posted(client, room, &references).await?
                } else {
                    vec![None; parts.len()]
                };
                for (i, part) in parts.iter().enumerate() {
                    let id = match existing[i] {
                        Some(id) => {
                            tracing::info!(
                                part = i,
                                id,
                                "found the earlier post; not posting again"
                            );
                            id
                        }
                        None => match client
                            .post(
                                room,
                                part,
                                reply_to.filter(|_| i == 0),
                                Some(&references[i]),
                                false,
                            )
                            .await
                        {
                            Ok(posted) => posted.id,
                            Err(TalkError::TooLong) => return Err(self.shrink(limit)),
                            Err(e) => return Err(e.into()),
                        },
                    };
                    first_id.get_or_insert(id);
                }
            }
            Via::Bot(client) => {
                for (i, part) in parts.iter().enumerate() {
                    match client
                        .post(
                            room,
                            part,
                            reply_to.filter(|_| i == 0),
                            Some(&references[i]),
                        )
                        .await
                    {
                        Ok(()) => {}
                        Err(TalkError::TooLong) => return Err(self.shrink(limit)),
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        Ok(Delivered {
            channel_message_id: first_id.map(|id| id.to_string()),
        })
    }
}

impl TalkSink {
    /// The server refused a part as too long: its limit is lower than believed. Halve ours and
    /// let the outbox retry.
    fn shrink(&self, limit: usize) -> ChannelError {
        self.max_length
            .store((limit / 2).max(100), Ordering::Relaxed);
        ChannelError::Transient {
            message: format!("Talk refused a message of up to {limit} characters as too long"),
            retry_after: Some(Duration::ZERO),
        }
    }
}

/// `key` for the first part, `key:2`, `key:3`… after it; always ≤ 64 characters.
fn reference(key: &str, index: usize) -> String {
    let suffix = if index == 0 {
        String::new()
    } else {
        format!(":{}", index + 1)
    };
    let mut base: String = key.chars().take(64 - suffix.len()).collect();
    base.push_str(&suffix);
    base
}

/// Splits `text` into parts of at most `limit` characters, preferring paragraph, then line, then
/// word boundaries.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while rest.chars().count() > limit {
        let cut = rest
            .char_indices()
            .nth(limit)
            .map_or(rest.len(), |(i, _)| i);
        let window = &rest[..cut];
        let at = ["\n\n", "\n", " "]
            .iter()
            .find_map(|sep| window.rfind(sep).filter(|&i| i > cut / 2))
            .unwrap_or(cut);
        parts.push(rest[..at].trim_end().to_owned());
        rest = rest[at..].trim_start();
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest.to_owned());
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_stay_whole() {
        assert_eq!(split("hello", 10), vec!["hello"]);
    }

    #[test]
    fn long_texts_split_at_boundaries_within_the_limit() {
        let text = format!("{}\n\n{}", "a ".repeat(30).trim(), "b ".repeat(30).trim());
        let parts = split(&text, 70);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.chars().count() <= 70));
        assert_eq!(parts.join("\n\n"), text);
        let words = "word ".repeat(100);
        let parts = split(&words, 42);
        assert!(
            parts
                .iter()
                .all(|p| p.chars().count() <= 42 && !p.starts_with(' '))
        );
        assert_eq!(parts.join(" "), words.trim());
        let unbroken = "é".repeat(25);
        let parts = split(&unbroken, 10);
        assert_eq!(
            parts.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
            [10, 10, 5]
        );
    }

    #[test]
    fn references_stay_within_64_characters() {
        assert_eq!(
            reference("ctxgate:task:7:result", 0),
            "ctxgate:task:7:result"
        );
        assert_eq!(
            reference("ctxgate:task:7:result", 2),
            "ctxgate:task:7:result:3"
        );
        let long = "k".repeat(80);
        assert_eq!(reference(&long, 11).len(), 64);
    }
}
