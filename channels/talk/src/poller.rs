//! The room-list driven poller.
//!
//! One request lists the rooms active since the last look (`GET /api/v4/room?modifiedSince=…`,
//! `docs/conversation.md`), so idle rooms cost nothing; a full list every few minutes notices
//! rooms the account left. Only rooms with recent activity are long-polled (`GET /chat/{token}`
//! with `lookIntoFuture=1`, `docs/chat.md`); a room that stays quiet for `active_window` drops
//! back to the room list. Every message is handed to intake with the room's cursor
//! (`lastKnownMessageId`), so the message, its task and the cursor commit together.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use ctxgate_contract::{
    AgentHandle, Audience, CursorUpdate, EventKind, InboundEvent, InboundMessage, Intake,
    IntakeError, MessageKind, Role, SenderKind, SourceType, addressed_agents,
};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::client::{Direction, TalkClient, TalkError};
use crate::render::render;
use crate::wire::{ChatMessage, Parent, Room, actor, room_type};

/// The prefix of the `referenceId` the gateway tags its own posts with.
pub const REFERENCE_PREFIX: &str = "ctxgate:";
/// Cursor scope holding when the account was first watched (room tokens are `[a-z0-9]`).
const SINCE_SCOPE: &str = "#since";

#[derive(Debug, Clone)]
pub struct PollerConfig {
    /// The channel instance, `talk:<account>`.
    pub channel: String,
    /// Rooms to watch; empty = every room the account is in.
    pub rooms: Vec<String>,
    /// Users whose messages may trigger an answer; empty = anyone in a watched room.
    pub allowed_users: Vec<String>,
    pub room_list_interval: Duration,
    pub full_refresh_interval: Duration,
    pub active_window: Duration,
    pub long_poll_timeout: Duration,
    /// Messages read into history on first sight of a room (`talk_context_limit`).
    pub backfill: usize,
    /// Recent messages remembered per room (`talk_cache_max_per_conversation`).
    pub cache_max: usize,
    pub max_backoff: Duration,
    /// First sights of rooms read in parallel at most.
    pub backfill_concurrency: usize,
    /// The agents answering on this account: `@name` in a message addresses them (in group
    /// rooms it asks them for an answer as a mention of the account would).
    pub agents: Vec<AgentHandle>,
}

/// What the poller reports for the admin API and metrics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PollerStatus {
    pub rooms_known: usize,
    pub rooms_polling: usize,
    pub last_room_list_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    /// Until when the room list is backing off.
    pub backoff_until: Option<DateTime<Utc>>,
    pub rooms: Vec<RoomStatus>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RoomStatus {
    pub token: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: u8,
    pub polling: bool,
    pub left: bool,
    pub cursor: Option<i64>,
    pub cached: usize,
    pub last_poll_at: Option<DateTime<Utc>>,
    /// Seconds between a message's timestamp and the moment the poller handed it to intake.
    pub last_lag_secs: Option<f64>,
    pub last_error: Option<String>,
}

/// One remembered message of a room.
#[derive(Debug, Clone)]
struct Cached {
    id: i64,
    actor_type: String,
    actor_id: String,
}

#[derive(Debug, Default)]
struct RoomState {
    room: Option<Room>,
    polling: bool,
    left: bool,
    /// Set when the room list saw activity while the room's poll was ending.
    wake: bool,
    cursor: Option<i64>,
    /// Newest message timestamp the poller saw (unix seconds).
    last_message_at: i64,
    cache: VecDeque<Cached>,
    last_poll_at: Option<DateTime<Utc>>,
    last_lag_secs: Option<f64>,
    last_error: Option<String>,
}

struct Shared {
    config: PollerConfig,
    client: TalkClient,
    intake: Arc<dyn Intake>,
    rooms: Mutex<HashMap<String, RoomState>>,
    status: Mutex<PollerStatus>,
    backfills: Semaphore,
    cancel: CancellationToken,
    /// Unix seconds from which messages in a first-seen room are new (not history).
    since: Mutex<i64>,
}

/// Watches one Talk account.
#[derive(Clone)]
pub struct Poller {
    shared: Arc<Shared>,
}

impl Poller {
    pub fn new(
        config: PollerConfig,
        client: TalkClient,
        intake: Arc<dyn Intake>,
        cancel: CancellationToken,
    ) -> Self {
        let backfills = Semaphore::new(config.backfill_concurrency.max(1));
        Self {
            shared: Arc::new(Shared {
                config,
                client,
                intake,
                rooms: Mutex::new(HashMap::new()),
                status: Mutex::new(PollerStatus::default()),
                backfills,
                cancel,
                since: Mutex::new(0),
            }),
        }
    }

    /// A poller for the same account with empty state, stopping when `cancel` is cancelled:
    /// for an instance that takes the account over (it reads the cursors back from intake).
    pub fn renew(&self, cancel: CancellationToken) -> Self {
        let s = &self.shared;
        Self::new(s.config.clone(), s.client.clone(), s.intake.clone(), cancel)
    }

    pub fn status(&self) -> PollerStatus {
        let mut status = self.shared.status.lock().expect("status lock").clone();
        let rooms = self.shared.rooms.lock().expect("rooms lock");
        status.rooms_known = rooms.values().filter(|r| !r.left).count();
        status.rooms_polling = rooms.values().filter(|r| r.polling).count();
        let mut list: Vec<RoomStatus> = rooms
            .iter()
            .map(|(token, r)| RoomStatus {
                token: token.clone(),
                name: r
                    .room
                    .as_ref()
                    .map(|r| r.display_name.clone())
                    .unwrap_or_default(),
                kind: r.room.as_ref().map_or(0, |r| r.kind),
                polling: r.polling,
                left: r.left,
                cursor: r.cursor,
                cached: r.cache.len(),
                last_poll_at: r.last_poll_at,
                last_lag_secs: r.last_lag_secs,
                last_error: r.last_error.clone(),
            })
            .collect();
        list.sort_by(|a, b| a.token.cmp(&b.token));
        status.rooms = list;
        status
    }

    /// Runs until cancelled.
    pub async fn run(self) {
        let s = &self.shared;
        if let Err(e) = self.load_since().await {
            tracing::error!(channel = %s.config.channel, error = %e, "cannot read the Talk cursor");
        }
        let mut modified_since: Option<i64> = None;
        let mut last_full: Option<tokio::time::Instant> = None;
        let mut failures = 0u32;
        loop {
            let full = modified_since.is_none()
                || last_full.is_none_or(|t| t.elapsed() >= s.config.full_refresh_interval);
            let wait = match s
                .client
                .rooms(if full { None } else { modified_since })
                .await
            {
                Ok((rooms, next)) => {
                    failures = 0;
                    let newest = rooms.iter().map(|r| r.last_activity).max();
                    modified_since = next.or(newest).or(modified_since).or(Some(0));
                    if full {
                        last_full = Some(tokio::time::Instant::now());
                    }
                    self.take_room_list(rooms, full);
                    let mut status = s.status.lock().expect("status lock");
                    status.last_room_list_at = Some(Utc::now());
                    status.backoff_until = None;
                    s.config.room_list_interval
                }
                Err(e) => {
                    failures += 1;
                    let wait = backoff(failures, &e, s.config.max_backoff);
                    tracing::warn!(channel = %s.config.channel, error = %e, retry_in = ?wait,
                        "cannot list Talk rooms");
                    let mut status = s.status.lock().expect("status lock");
                    status.last_error = Some(e.to_string());
                    status.last_error_at = Some(Utc::now());
                    status.backoff_until = Some(Utc::now() + wait);
                    wait.max(s.config.room_list_interval)
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = s.cancel.cancelled() => break,
            }
        }
    }

    async fn load_since(&self) -> Result<(), IntakeError> {
        let s = &self.shared;
        let since = match s.intake.cursor(&s.config.channel, SINCE_SCOPE).await? {
            Some(v) => v.parse().unwrap_or(0),
            None => {
                let now = Utc::now().timestamp();
                s.intake
                    .submit(InboundEvent {
                        channel: s.config.channel.clone(),
                        conversation: SINCE_SCOPE.to_owned(),
                        kind: EventKind::CursorOnly,
                        cursor: Some(CursorUpdate {
                            scope: SINCE_SCOPE.to_owned(),
                            value: now.to_string(),
                        }),
                    })
                    .await?;
                now
            }
        };
        *s.since.lock().expect("since lock") = since;
        Ok(())
    }

    fn take_room_list(&self, rooms: Vec<Room>, full: bool) {
        let s = &self.shared;
        let now = Utc::now().timestamp();
        let active_since = now - s.config.active_window.as_secs() as i64;
        let mut to_start = Vec::new();
        {
            let mut map = s.rooms.lock().expect("rooms lock");
            if full {
                for (token, state) in map.iter_mut() {
                    if !state.left && !rooms.iter().any(|r| &r.token == token) {
                        tracing::info!(channel = %s.config.channel, room = %token,
                            "no longer in the room list: stopped watching it, history kept");
                        state.left = true;
                    }
                }
            }
            for room in rooms {
                if !s.config.rooms.is_empty() && !s.config.rooms.contains(&room.token) {
                    continue;
                }
                if room.kind == room_type::CHANGELOG {
                    continue;
                }
                let state = map.entry(room.token.clone()).or_default();
                let first_sight = state.room.is_none() || state.left;
                // `lastActivity` has a one-second resolution: a message in the same second as
                // the last known activity does not make it newer, but its id passes the cursor.
                let unread = room
                    .last_message_id()
                    .zip(state.cursor)
                    .is_some_and(|(id, cursor)| id > cursor);
                let newer = unread
                    || state
                        .room
                        .as_ref()
                        .is_none_or(|known| room.last_activity > known.last_activity);
                let active = room.last_activity >= active_since;
                state.left = false;
                let token = room.token.clone();
                state.room = Some(room);
                if state.polling {
                    if newer {
                        state.wake = true;
                    }
                } else if first_sight || (newer && active) || (newer && !full) {
                    state.polling = true;
                    to_start.push(token);
                }
            }
        }
        for token in to_start {
            let poller = self.clone();
            tokio::spawn(async move { poller.watch_room(token).await });
        }
    }

    /// Catches up on one room, then long-polls it while it stays active.
    async fn watch_room(self, token: String) {
        let s = &self.shared;
        let result = self.watch_room_inner(&token).await;
        let mut map = s.rooms.lock().expect("rooms lock");
        if let Some(state) = map.get_mut(&token) {
            state.polling = false;
            match result {
                Ok(()) => {}
                Err(TalkError::NotFound(_)) => {
                    tracing::info!(channel = %s.config.channel, room = %token,
                        "removed from the room: stopped watching it, history kept");
                    state.left = true;
                }
                Err(e) => state.last_error = Some(e.to_string()),
            }
        }
    }

    async fn watch_room_inner(&self, token: &str) -> Result<(), TalkError> {
        let s = &self.shared;
        let mut cursor = match self.stored_cursor(token).await {
            Some(c) => c,
            None => self.first_sight(token).await?,
        };
        let mut failures = 0u32;
        loop {
            if s.cancel.is_cancelled() {
                return Ok(());
            }
            // Nothing known to be pending and quiet for the active window: the room list will
            // say when it wakes up.
            let (pending, last_activity) = self.room_activity(token, cursor);
            let quiet =
                Utc::now().timestamp() - last_activity >= s.config.active_window.as_secs() as i64;
            if !pending && quiet && !self.take_wake(token) {
                return Ok(());
            }
            let direction = Direction::Future {
                after: cursor,
                timeout: s.config.long_poll_timeout,
            };
            let received = tokio::select! {
                r = s.client.receive(token, direction, 100) => r,
                _ = s.cancel.cancelled() => return Ok(()),
            };
            self.note_room(token, |st| st.last_poll_at = Some(Utc::now()));
            match received {
                Ok(r) => {
                    failures = 0;
                    self.note_room(token, |st| st.last_error = None);
                    if let Some(newest) = r.messages.iter().map(|m| m.timestamp).max() {
                        self.note_room(token, |st| {
                            st.last_message_at = st.last_message_at.max(newest);
                        });
                    }
                    let since = *s.since.lock().expect("since lock");
                    for m in r.messages {
                        if m.id <= cursor {
                            continue;
                        }
                        cursor = self.take_message(token, &m, m.timestamp > since).await?;
                    }
                    if let Some(given) = r.last_given.filter(|g| *g > cursor) {
                        cursor = self.commit_cursor(token, given).await?;
                    }
                }
                Err(e @ (TalkError::NotFound(_) | TalkError::Unauthorized))
                    if !e.is_transient() =>
                {
                    if matches!(e, TalkError::NotFound(_)) {
                        return Err(e);
                    }
                    failures += 1;
                    self.wait_after_error(token, failures, &e).await;
                }
                Err(e) => {
                    failures += 1;
                    self.wait_after_error(token, failures, &e).await;
                }
            }
        }
    }

    async fn wait_after_error(&self, token: &str, failures: u32, e: &TalkError) {
        let s = &self.shared;
        let wait = backoff(failures, e, s.config.max_backoff);
        tracing::warn!(channel = %s.config.channel, room = %token, error = %e, retry_in = ?wait,
            "cannot read the Talk room");
        self.note_room(token, |st| st.last_error = Some(e.to_string()));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = s.cancel.cancelled() => {}
        }
    }

    /// Whether the room list announced a message newer than `cursor`, and the time of the newest
    /// message this process took from the room in a poll (unix seconds; 0 = none yet). Only
    /// messages seen by this process keep a room long-polled, so a restart next to a thousand
    /// recently active rooms does not open a thousand long polls.
    fn room_activity(&self, token: &str, cursor: i64) -> (bool, i64) {
        let map = self.shared.rooms.lock().expect("rooms lock");
        let Some(state) = map.get(token) else {
            return (false, 0);
        };
        let pending = state
            .room
            .as_ref()
            .and_then(Room::last_message_id)
            .is_some_and(|id| id > cursor);
        (pending, state.last_message_at)
    }

    fn take_wake(&self, token: &str) -> bool {
        let mut map = self.shared.rooms.lock().expect("rooms lock");
        map.get_mut(token)
            .map(|st| std::mem::take(&mut st.wake))
            .unwrap_or(false)
    }

    fn note_room(&self, token: &str, f: impl FnOnce(&mut RoomState)) {
        let mut map = self.shared.rooms.lock().expect("rooms lock");
        if let Some(state) = map.get_mut(token) {
            f(state);
        }
    }

    async fn stored_cursor(&self, token: &str) -> Option<i64> {
        let s = &self.shared;
        if let Some(c) = s
            .rooms
            .lock()
            .expect("rooms lock")
            .get(token)
            .and_then(|st| st.cursor)
        {
            return Some(c);
        }
        loop {
            match s.intake.cursor(&s.config.channel, token).await {
                Ok(c) => {
                    let c = c.and_then(|v| v.parse().ok());
                    self.note_room(token, |st| st.cursor = c);
                    return c;
                }
                Err(e) => {
                    tracing::error!(room = %token, error = %e, "cannot read the room's cursor");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = s.cancel.cancelled() => return None,
                    }
                }
            }
        }
    }

    /// First sight of a room: its recent history enters the store for context. Messages from
    /// before the account was first watched (or from that very second) are never answered; newer
    /// ones (a room created while the gateway was down) are.
    async fn first_sight(&self, token: &str) -> Result<i64, TalkError> {
        let s = &self.shared;
        let _permit = s.backfills.acquire().await.expect("semaphore open");
        let history = s
            .client
            .receive(
                token,
                Direction::History { before: None },
                s.config.backfill.max(1),
            )
            .await?;
        let since = *s.since.lock().expect("since lock");
        let mut messages = history.messages;
        messages.sort_by_key(|m| m.id);
        let skip = messages.len().saturating_sub(s.config.backfill);
        let mut cursor = 0;
        for m in messages.into_iter().skip(skip) {
            cursor = self.take_message(token, &m, m.timestamp > since).await?;
        }
        if cursor == 0 {
            cursor = self.commit_cursor(token, 0).await?;
        }
        tracing::info!(channel = %s.config.channel, room = %token, cursor, "watching a new room");
        Ok(cursor)
    }

    async fn commit_cursor(&self, token: &str, value: i64) -> Result<i64, TalkError> {
        let event = InboundEvent {
            channel: self.shared.config.channel.clone(),
            conversation: token.to_owned(),
            kind: EventKind::CursorOnly,
            cursor: Some(CursorUpdate {
                scope: token.to_owned(),
                value: value.to_string(),
            }),
        };
        self.submit(token, event).await?;
        self.note_room(token, |st| st.cursor = Some(value));
        Ok(value)
    }

    /// Hands one message to intake with the room's cursor; returns the new cursor.
    async fn take_message(
        &self,
        token: &str,
        m: &ChatMessage,
        may_trigger: bool,
    ) -> Result<i64, TalkError> {
        let s = &self.shared;
        let bot_user = s.client.user();
        let (room, deleted_parent_was_bot) = {
            let map = s.rooms.lock().expect("rooms lock");
            let state = map.get(token);
            // A deleted parent no longer names its author: the cache remembers it.
            let from_bot = match (&m.parent, state) {
                (Some(Parent::Deleted { id, .. }), Some(st)) => st
                    .cache
                    .iter()
                    .any(|c| c.id == *id && c.actor_type == actor::USERS && c.actor_id == bot_user),
                _ => false,
            };
            (state.and_then(|st| st.room.clone()), from_bot)
        };
        let room_kind = room.as_ref().map_or(room_type::GROUP, |r| r.kind);
        let read_only = room.as_ref().is_some_and(|r| r.read_only);
        let kind = classify(
            m,
            &Context {
                bot_user,
                room_kind,
                read_only,
                may_trigger,
                allowed_users: &s.config.allowed_users,
                deleted_parent_was_bot,
                agents: &s.config.agents,
            },
        );
        let event = InboundEvent {
            channel: s.config.channel.clone(),
            conversation: token.to_owned(),
            kind,
            cursor: Some(CursorUpdate {
                scope: token.to_owned(),
                value: m.id.to_string(),
            }),
        };
        self.submit(token, event).await?;
        let lag = (Utc::now().timestamp_millis() - m.timestamp * 1000) as f64 / 1000.0;
        let cache_max = s.config.cache_max.max(1);
        self.note_room(token, |st| {
            st.cursor = Some(m.id);
            st.last_lag_secs = Some(lag.max(0.0));
            if !m.is_system() {
                st.cache.push_back(Cached {
                    id: m.id,
                    actor_type: m.actor_type.clone(),
                    actor_id: m.actor_id.clone(),
                });
                while st.cache.len() > cache_max {
                    st.cache.pop_front();
                }
            }
        });
        Ok(m.id)
    }

    /// Submits until intake takes it; the cursor does not move past an event intake refused.
    async fn submit(&self, token: &str, event: InboundEvent) -> Result<(), TalkError> {
        let s = &self.shared;
        let mut failures = 0u32;
        loop {
            match s.intake.submit(event.clone()).await {
                Ok(_) => return Ok(()),
                Err(IntakeError::Invalid(why)) => {
                    tracing::error!(room = %token, error = %why, "intake refused a Talk event");
                    let skipped = InboundEvent {
                        kind: EventKind::CursorOnly,
                        ..event.clone()
                    };
                    if s.intake.submit(skipped).await.is_ok() {
                        return Ok(());
                    }
                }
                Err(IntakeError::ShuttingDown) => {
                    return Err(TalkError::Network("the gateway is shutting down".into()));
                }
                Err(IntakeError::Unavailable(why)) => {
                    tracing::error!(room = %token, error = %why, "cannot store a Talk message");
                }
            }
            failures += 1;
            let wait =
                Duration::from_millis(200 * 2u64.pow(failures.min(8))).min(s.config.max_backoff);
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = s.cancel.cancelled() => {
                    return Err(TalkError::Network("the gateway is shutting down".into()));
                }
            }
        }
    }
}

fn backoff(failures: u32, e: &TalkError, max: Duration) -> Duration {
    let exp =
        Duration::from_secs(1).saturating_mul(2u32.saturating_pow(failures.saturating_sub(1)));
    exp.max(e.retry_after().unwrap_or_default()).min(max)
}

struct Context<'a> {
    bot_user: &'a str,
    room_kind: u8,
    read_only: bool,
    may_trigger: bool,
    allowed_users: &'a [String],
    /// The message replies to a deleted message the bot had written.
    deleted_parent_was_bot: bool,
    agents: &'a [AgentHandle],
}

/// Turns one Talk message into what intake stores: edits and deletions update the original,
/// other system messages only move the cursor, the gateway's own tagged posts are already in
/// history, everything else is stored, and [`is_trigger`] decides whether it asks for an answer.
fn classify(m: &ChatMessage, cx: &Context<'_>) -> EventKind {
    let at = timestamp(m.timestamp);
    if m.is_system() {
        return match (m.system_message.as_str(), &m.parent) {
            ("message_edited", Some(Parent::Message(original))) => EventKind::Edited {
                channel_message_id: original.id.to_string(),
                text: render(&original.message, &original.message_parameters).text,
                at,
            },
            ("message_deleted", Some(parent)) => EventKind::Deleted {
                channel_message_id: parent.id().to_string(),
                at,
            },
            _ => EventKind::CursorOnly,
        };
    }
    let own = m.actor_type == actor::USERS && m.actor_id == cx.bot_user;
    if own
        && m.reference_id
            .as_deref()
            .is_some_and(|r| r.starts_with(REFERENCE_PREFIX))
    {
        return EventKind::CursorOnly;
    }
    if m.message_type == "comment_deleted" {
        return EventKind::CursorOnly;
    }
    let rendered = render(&m.message, &m.message_parameters);
    let sender_kind = if own {
        SenderKind::SelfBot
    } else {
        match m.actor_type.as_str() {
            actor::USERS | actor::FEDERATED_USERS => SenderKind::User,
            actor::GUESTS => SenderKind::Guest,
            actor::BOTS | actor::BRIDGED => SenderKind::Bot,
            _ => SenderKind::User,
        }
    };
    let addressed = addressed_agents(&rendered.text, cx.agents);
    let (trigger, skipped) = if own || sender_kind == SenderKind::Bot || !cx.may_trigger {
        (false, None)
    } else {
        let asks = match cx.room_kind {
            room_type::ONE_TO_ONE => true,
            room_type::GROUP | room_type::PUBLIC => {
                rendered.mentioned_users.iter().any(|u| u == cx.bot_user)
                    || replies_to_bot(m, cx)
                    || !addressed.is_empty()
            }
            _ => false,
        } && !cx.read_only;
        let allowed = cx.allowed_users.is_empty()
            || (m.actor_type == actor::USERS && cx.allowed_users.contains(&m.actor_id));
        match (asks, allowed) {
            (true, true) => (true, None),
            (true, false) => (false, Some("sender_not_allowed")),
            (false, _) => (false, None),
        }
    };
    let mut meta = serde_json::json!({
        "room_type": cx.room_kind,
        "actor_type": m.actor_type,
    });
    if let Some(reason) = skipped {
        meta["skipped"] = reason.into();
    }
    EventKind::Posted(InboundMessage {
        channel_message_id: m.id.to_string(),
        sender_id: m.actor_id.clone(),
        sender_name: Some(m.actor_display_name.clone()).filter(|n| !n.is_empty()),
        sender_kind,
        role: if own { Role::Assistant } else { Role::User },
        kind: MessageKind::Message,
        text: rendered.text,
        timestamp: at,
        reply_to: m.parent_id().map(|p| p.to_string()),
        source_type: SourceType::Talk,
        trigger,
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
    })
}

fn replies_to_bot(m: &ChatMessage, cx: &Context<'_>) -> bool {
    match &m.parent {
        Some(Parent::Message(p)) => p.actor_type == actor::USERS && p.actor_id == cx.bot_user,
        Some(Parent::Deleted { .. }) => cx.deleted_parent_was_bot,
        None => false,
    }
}

fn timestamp(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).single().unwrap_or_else(Utc::now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(json: serde_json::Value) -> ChatMessage {
        serde_json::from_value(json).unwrap()
    }

    fn cx(room_kind: u8) -> Context<'static> {
        Context {
            bot_user: "bot",
            room_kind,
            read_only: false,
            may_trigger: true,
            allowed_users: &[],
            deleted_parent_was_bot: false,
            agents: &[],
        }
    }

    fn posted(kind: EventKind) -> InboundMessage {
        match kind {
            EventKind::Posted(m) => m,
            other => panic!("expected a post, got {other:?}"),
        }
    }

    fn user_message(text: &str, params: serde_json::Value) -> ChatMessage {
        msg(serde_json::json!({
            "id": 10, "token": "room1", "actorType": "users", "actorId": "alice",
            "actorDisplayName": "Alice", "timestamp": 1_700_000_000, "message": text,
            "messageParameters": params, "systemMessage": "", "messageType": "comment"
        }))
    }

    #[test]
    fn one_to_one_messages_trigger_group_messages_need_a_mention() {
        let plain = user_message("hello", serde_json::json!([]));
        assert!(posted(classify(&plain, &cx(room_type::ONE_TO_ONE))).trigger);
        let group = posted(classify(&plain, &cx(room_type::GROUP)));
        assert!(!group.trigger);
        assert_eq!(group.text, "hello");
        let mention = user_message(
            "{mention-user1} help",
            serde_json::json!({"mention-user1": {"type": "user", "id": "bot", "name": "Assistant"}}),
        );
        let m = posted(classify(&mention, &cx(room_type::GROUP)));
        assert!(m.trigger);
        assert_eq!(m.text, "@Assistant help");
        let all = user_message(
            "{mention-call1} hi",
            serde_json::json!({"mention-call1": {"type": "call", "id": "room1", "name": "Team"}}),
        );
        assert!(!posted(classify(&all, &cx(room_type::GROUP))).trigger);
    }

    #[test]
    fn own_tagged_posts_and_system_messages_are_not_stored() {
        let own = msg(serde_json::json!({
            "id": 11, "actorType": "users", "actorId": "bot", "timestamp": 1, "message": "answer",
            "messageParameters": [], "referenceId": "ctxgate:task:4:result"
        }));
        assert_eq!(
            classify(&own, &cx(room_type::ONE_TO_ONE)),
            EventKind::CursorOnly
        );
        let untagged = msg(serde_json::json!({
            "id": 12, "actorType": "users", "actorId": "bot", "timestamp": 1, "message": "manual",
            "messageParameters": []
        }));
        let m = posted(classify(&untagged, &cx(room_type::ONE_TO_ONE)));
        assert_eq!(
            (m.role, m.sender_kind, m.trigger),
            (Role::Assistant, SenderKind::SelfBot, false)
        );
        let joined = msg(serde_json::json!({
            "id": 13, "actorType": "users", "actorId": "admin", "timestamp": 1,
            "message": "{actor} added {user}", "messageParameters": [],
            "systemMessage": "user_added", "messageType": "system"
        }));
        assert_eq!(
            classify(&joined, &cx(room_type::GROUP)),
            EventKind::CursorOnly
        );
    }

    #[test]
    fn edits_and_deletions_update_the_original() {
        let edited = msg(serde_json::json!({
            "id": 20, "actorType": "users", "actorId": "alice", "timestamp": 5,
            "message": "You edited a message", "messageParameters": [],
            "systemMessage": "message_edited", "messageType": "system",
            "parent": {"id": 10, "actorType": "users", "actorId": "alice", "timestamp": 1,
                       "message": "new text", "messageParameters": []}
        }));
        assert!(matches!(
            classify(&edited, &cx(room_type::GROUP)),
            EventKind::Edited { channel_message_id, text, .. } if channel_message_id == "10" && text == "new text"
        ));
        let deleted = msg(serde_json::json!({
            "id": 21, "actorType": "users", "actorId": "alice", "timestamp": 5,
            "message": "You deleted a message", "messageParameters": [],
            "systemMessage": "message_deleted", "messageType": "system",
            "parent": {"id": 10, "deleted": true}
        }));
        assert!(matches!(
            classify(&deleted, &cx(room_type::GROUP)),
            EventKind::Deleted { channel_message_id, .. } if channel_message_id == "10"
        ));
    }

    #[test]
    fn replies_to_the_bot_trigger_and_policy_is_recorded() {
        let reply = msg(serde_json::json!({
            "id": 30, "actorType": "users", "actorId": "alice", "timestamp": 5,
            "message": "and the second?", "messageParameters": [],
            "parent": {"id": 29, "actorType": "users", "actorId": "bot", "timestamp": 4,
                       "message": "two items", "messageParameters": []}
        }));
        let m = posted(classify(&reply, &cx(room_type::GROUP)));
        assert!(m.trigger);
        assert_eq!(m.reply_to.as_deref(), Some("29"));
        let allowed = vec!["bob".to_owned()];
        let mut c = cx(room_type::GROUP);
        c.allowed_users = &allowed;
        let m = posted(classify(&reply, &c));
        assert!(!m.trigger);
        assert_eq!(m.meta["skipped"], "sender_not_allowed");
        let mut old = cx(room_type::ONE_TO_ONE);
        old.may_trigger = false;
        assert!(!posted(classify(&reply, &old)).trigger);
    }

    #[test]
    fn other_bots_never_trigger() {
        let other = msg(serde_json::json!({
            "id": 40, "actorType": "bots", "actorId": "bot-weather", "timestamp": 5,
            "message": "sunny", "messageParameters": []
        }));
        let m = posted(classify(&other, &cx(room_type::ONE_TO_ONE)));
        assert_eq!((m.sender_kind, m.trigger), (SenderKind::Bot, false));
    }
}
