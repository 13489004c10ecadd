use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Something a channel saw in one conversation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InboundEvent {
    /// The channel instance, e.g. `webhook:default` or `talk:main`.
    pub channel: String,
    /// The conversation's id on that channel (room token, thread root, webhook conversation).
    pub conversation: String,
    pub kind: EventKind,
    /// Committed in the same transaction as the event, so a crash never loses or repeats it.
    pub cursor: Option<CursorUpdate>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// A new message. When `trigger` is set, intake also creates a task that answers it.
    Posted(InboundMessage),
    /// An earlier message's text changed.
    Edited {
        channel_message_id: String,
        text: String,
        at: DateTime<Utc>,
    },
    /// An earlier message was deleted.
    Deleted {
        channel_message_id: String,
        at: DateTime<Utc>,
    },
    /// Nothing to store, only a cursor to advance (e.g. a poll that saw only system messages).
    CursorOnly,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InboundMessage {
    /// The message's id on the channel; the dedup key of its task. Unique per conversation.
    pub channel_message_id: String,
    pub sender_id: String,
    pub sender_name: Option<String>,
    pub sender_kind: SenderKind,
    pub role: Role,
    /// Ordinary message, or the gateway's own acknowledgement/progress post.
    #[serde(default)]
    pub kind: MessageKind,
    pub text: String,
    pub timestamp: DateTime<Utc>,
    /// The channel message id this message replies to.
    pub reply_to: Option<String>,
    pub source_type: SourceType,
    /// Whether the message asks the assistant for an answer.
    pub trigger: bool,
    /// Which agent should answer a trigger (`None` = the channel's default agent).
    pub agent: Option<String>,
    pub audience: Audience,
    /// Channel-specific data kept with the message and handed back to the sink with the answer.
    #[serde(default)]
    pub meta: serde_json::Value,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SenderKind {
    User,
    Guest,
    Bot,
    /// The gateway itself (its own posts seen again by a poller).
    SelfBot,
    System,
}

/// Acknowledgement and progress posts are kept in history but never shown as context.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    #[default]
    Message,
    Ack,
    Progress,
}

impl MessageKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Message => "message",
            MessageKind::Ack => "ack",
            MessageKind::Progress => "progress",
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    System,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "system" => Some(Role::System),
            _ => None,
        }
    }
}

/// Where a message or task came from. Background kinds (briefing, scheduled, heartbeat, subtask)
/// are kept out of interactive context.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum SourceType {
    Talk,
    Email,
    Webhook,
    Briefing,
    Scheduled,
    Heartbeat,
    Subtask,
    Admin,
    /// Imported history (`ctxgate context select`, history imports).
    Import,
}

impl SourceType {
    pub const ALL: [SourceType; 9] = [
        SourceType::Talk,
        SourceType::Email,
        SourceType::Webhook,
        SourceType::Briefing,
        SourceType::Scheduled,
        SourceType::Heartbeat,
        SourceType::Subtask,
        SourceType::Admin,
        SourceType::Import,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SourceType::Talk => "talk",
            SourceType::Email => "email",
            SourceType::Webhook => "webhook",
            SourceType::Briefing => "briefing",
            SourceType::Scheduled => "scheduled",
            SourceType::Heartbeat => "heartbeat",
            SourceType::Subtask => "subtask",
            SourceType::Admin => "admin",
            SourceType::Import => "import",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Output of these kinds stays out of interactive context (see CONTEXT.md).
    pub fn is_background(self) -> bool {
        matches!(
            self,
            SourceType::Briefing
                | SourceType::Scheduled
                | SourceType::Heartbeat
                | SourceType::Subtask
        )
    }
}

/// Who a stored message is meant for. Agents see only messages addressed to them or to everyone;
/// people in the conversation see all.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Audience {
    #[default]
    Everyone,
    Addressed {
        #[serde(default)]
        agents: Vec<String>,
        #[serde(default)]
        users: Vec<String>,
    },
}

impl Audience {
    /// Whether `agent` may see a message with this audience (its own messages aside).
    pub fn includes_agent(&self, agent: &str) -> bool {
        match self {
            Audience::Everyone => true,
            Audience::Addressed { agents, .. } => agents.iter().any(|a| a == agent),
        }
    }
}

/// A channel's position, committed together with the events it produced.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CursorUpdate {
    /// What the cursor tracks within the channel (a room token, a mailbox name).
    pub scope: String,
    pub value: String,
}

/// What intake did with an event.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct IntakeReceipt {
    /// The gateway's conversation id.
    pub conversation_id: i64,
    /// The stored message, when the event carried one.
    pub message_id: Option<i64>,
    /// The task answering a trigger (also returned when the event was a duplicate).
    pub task_id: Option<i64>,
    /// True when the same event had been taken before and nothing new was stored.
    pub duplicate: bool,
}
