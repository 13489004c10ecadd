//! The OCS client: the room, chat, reaction and capability endpoints the gateway uses.
//!
//! Every request carries `OCS-APIRequest: true`, `Accept: application/json` and HTTP basic auth
//! with the account's app password (`docs/chat.md`, `docs/conversation.md`). The HTTP timeout is
//! set longer than the long-poll timeout, so a quiet room ends with the server's 304, not a
//! client error.

use std::time::Duration;

use ctxgate_contract::ChannelError;
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;

use crate::wire::{ChatMessage, Envelope, Participant, Room};

const CHAT: &str = "/ocs/v2.php/apps/spreed/api/v1/chat";
const ROOMS: &str = "/ocs/v2.php/apps/spreed/api/v4/room";
const REACTION: &str = "/ocs/v2.php/apps/spreed/api/v1/reaction";
const CAPABILITIES: &str = "/ocs/v2.php/cloud/capabilities";

/// The server's default message length limit (`spreed.config.chat.max-length`).
pub const DEFAULT_MAX_LENGTH: usize = 32_000;

#[derive(Debug, thiserror::Error)]
pub enum TalkError {
    #[error("Talk rejected the login (HTTP 401): check the user and app password")]
    Unauthorized,
    #[error("not a participant of room {0} (HTTP 404): it was left or removed")]
    NotFound(String),
    #[error("the message is longer than the server allows (HTTP 413)")]
    TooLong,
    #[error("Talk is rate limiting (HTTP 429)")]
    RateLimited { retry_after: Option<Duration> },
    #[error("Talk answered HTTP {status}: {body}")]
    Status {
        status: u16,
        retry_after: Option<Duration>,
        body: String,
    },
    #[error("Talk did not answer in time")]
    Timeout,
    #[error("cannot reach Talk: {0}")]
    Network(String),
    #[error("Talk sent a body ctxgate cannot read: {0}")]
    Decode(String),
}

impl TalkError {
    /// Worth retrying later (rate limits, server errors, timeouts, network trouble).
    pub fn is_transient(&self) -> bool {
        match self {
            TalkError::RateLimited { .. } | TalkError::Timeout | TalkError::Network(_) => true,
            TalkError::Status { status, .. } => *status >= 500 || *status == 408,
            _ => false,
        }
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            TalkError::RateLimited { retry_after } | TalkError::Status { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }
}

impl From<TalkError> for ChannelError {
    fn from(e: TalkError) -> Self {
        if e.is_transient() {
            ChannelError::Transient {
                message: e.to_string(),
                retry_after: e.retry_after(),
            }
        } else {
            ChannelError::Permanent(e.to_string())
        }
    }
}

/// What a `GET /chat/{token}` returned.
#[derive(Debug, Clone, Default)]
pub struct Received {
    pub messages: Vec<ChatMessage>,
    /// `X-Chat-Last-Given`: the offset for the next request (absent on 304).
    pub last_given: Option<i64>,
}

/// Where to read from.
#[derive(Debug, Clone, Copy)]
pub enum Direction {
    /// Wait (long poll) for messages newer than `after`.
    Future { after: i64, timeout: Duration },
    /// History older than `before` (the newest when `None`), newest first.
    History { before: Option<i64> },
}

#[derive(Clone)]
pub struct TalkClient {
    http: reqwest::Client,
    base: String,
    user: String,
    password: String,
}

impl std::fmt::Debug for TalkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalkClient")
            .field("base", &self.base)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl TalkClient {
    /// `request_timeout` must exceed the long-poll timeout used with [`Direction::Future`].
    pub fn new(
        base_url: &str,
        user: &str,
        app_password: &str,
        request_timeout: Duration,
    ) -> Result<Self, TalkError> {
        let http = reqwest::Client::builder()
            .timeout(request_timeout)
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("ctxgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| TalkError::Network(e.to_string()))?;
        Ok(Self {
            http,
            base: base_url.trim_end_matches('/').to_owned(),
            user: user.to_owned(),
            password: app_password.to_owned(),
        })
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .basic_auth(&self.user, Some(&self.password))
            .header("OCS-APIRequest", "true")
            .header("Accept", "application/json")
    }

    /// The rooms the account is in; with `modified_since`, only those active since then.
    /// Returns the rooms and `X-Nextcloud-Talk-Modified-Before`, the next `modified_since`.
    pub async fn rooms(
        &self,
        modified_since: Option<i64>,
    ) -> Result<(Vec<Room>, Option<i64>), TalkError> {
        let mut req = self.request(Method::GET, ROOMS);
        if let Some(since) = modified_since {
            req = req.query(&[("modifiedSince", since)]);
        }
        let resp = send(req, None).await?;
        let next = header_i64(&resp, "X-Nextcloud-Talk-Modified-Before");
        let rooms: Vec<Room> = data(resp).await?;
        Ok((rooms, next))
    }

    pub async fn room(&self, token: &str) -> Result<Room, TalkError> {
        data(
            send(
                self.request(Method::GET, &format!("{ROOMS}/{token}")),
                Some(token),
            )
            .await?,
        )
        .await
    }

    pub async fn participants(&self, token: &str) -> Result<Vec<Participant>, TalkError> {
        let req = self.request(Method::GET, &format!("{ROOMS}/{token}/participants"));
        data(send(req, Some(token)).await?).await
    }

    /// Reads messages. Never moves the read marker nor the user status.
    pub async fn receive(
        &self,
        token: &str,
        direction: Direction,
        limit: usize,
    ) -> Result<Received, TalkError> {
        let limit = limit.clamp(1, 200).to_string();
        let mut query: Vec<(&str, String)> = vec![
            ("limit", limit),
            ("setReadMarker", "0".into()),
            ("noStatusUpdate", "1".into()),
            ("markNotificationsAsRead", "0".into()),
        ];
        match direction {
            Direction::Future { after, timeout } => {
                query.push(("lookIntoFuture", "1".into()));
                query.push(("lastKnownMessageId", after.to_string()));
                query.push(("timeout", timeout.as_secs().max(1).to_string()));
            }
            Direction::History { before } => {
                query.push(("lookIntoFuture", "0".into()));
                if let Some(before) = before {
                    query.push(("lastKnownMessageId", before.to_string()));
                }
            }
        }
        let req = self
            .request(Method::GET, &format!("{CHAT}/{token}"))
            .query(&query);
        let resp = send(req, Some(token)).await?;
        if resp.status() == StatusCode::NOT_MODIFIED {
            return Ok(Received::default());
        }
        let last_given = header_i64(&resp, "X-Chat-Last-Given");
        let messages: Vec<ChatMessage> = data(resp).await?;
        Ok(Received {
            messages,
            last_given,
        })
    }

    /// Posts a message as the account. `reference_id` (≤ 64 characters) tags it so it can be
    /// recognised later; the server does not enforce uniqueness.
    pub async fn post(
        &self,
        token: &str,
        message: &str,
        reply_to: Option<i64>,
        reference_id: Option<&str>,
        silent: bool,
    ) -> Result<ChatMessage, TalkError> {
        let mut body = serde_json::json!({ "message": message, "silent": silent });
        if let Some(parent) = reply_to {
            body["replyTo"] = parent.into();
        }
        if let Some(reference) = reference_id {
            body["referenceId"] = reference.into();
        }
        let req = self
            .request(Method::POST, &format!("{CHAT}/{token}"))
            .json(&body);
        data(send(req, Some(token)).await?).await
    }

    pub async fn react(
        &self,
        token: &str,
        message_id: i64,
        reaction: &str,
    ) -> Result<(), TalkError> {
        let req = self
            .request(Method::POST, &format!("{REACTION}/{token}/{message_id}"))
            .json(&serde_json::json!({ "reaction": reaction }));
        send(req, Some(token)).await.map(drop)
    }

    /// `spreed.config.chat.max-length`, or the documented default when the server omits it.
    pub async fn max_length(&self) -> Result<usize, TalkError> {
        let resp = send(self.request(Method::GET, CAPABILITIES), None).await?;
        let caps: serde_json::Value = data(resp).await?;
        Ok(caps
            .pointer("/capabilities/spreed/config/chat/max-length")
            .and_then(serde_json::Value::as_u64)
            .map_or(DEFAULT_MAX_LENGTH, |n| n as usize))
    }
}

pub(crate) async fn send(req: RequestBuilder, room: Option<&str>) -> Result<Response, TalkError> {
    let resp = req.send().await.map_err(|e| {
        if e.is_timeout() {
            TalkError::Timeout
        } else {
            TalkError::Network(e.to_string())
        }
    })?;
    let status = resp.status();
    if status.is_success() || status == StatusCode::NOT_MODIFIED {
        return Ok(resp);
    }
    let retry_after =
        header_i64(&resp, "Retry-After").map(|s| Duration::from_secs(s.max(0) as u64));
    Err(match status {
        StatusCode::UNAUTHORIZED => TalkError::Unauthorized,
        StatusCode::NOT_FOUND if room.is_some() => {
            TalkError::NotFound(room.unwrap_or_default().to_owned())
        }
        StatusCode::PAYLOAD_TOO_LARGE => TalkError::TooLong,
        StatusCode::TOO_MANY_REQUESTS => TalkError::RateLimited { retry_after },
        _ => {
            let body = resp.text().await.unwrap_or_default();
            TalkError::Status {
                status: status.as_u16(),
                retry_after,
                body: body.chars().take(300).collect(),
            }
        }
    })
}

async fn data<T: DeserializeOwned>(resp: Response) -> Result<T, TalkError> {
    let bytes = resp.bytes().await.map_err(|e| {
        if e.is_timeout() {
            TalkError::Timeout
        } else {
            TalkError::Network(e.to_string())
        }
    })?;
    serde_json::from_slice::<Envelope<T>>(&bytes)
        .map(|e| e.ocs.data)
        .map_err(|e| {
            let head: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
            TalkError::Decode(format!("{e} in {head:?}"))
        })
}

fn header_i64(resp: &Response, name: &str) -> Option<i64> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}
