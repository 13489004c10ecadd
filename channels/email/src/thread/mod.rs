//! Threads as conversations: the thread key of a message, subject normalisation, and the
//! headers of a reply. All pure functions of a [`NormalizedMail`].

mod reply;
mod subject;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::message_id::MessageId;
use crate::parse::NormalizedMail;

pub use reply::{MAX_REFERENCES, ReplyHeaders, references, reply_headers};
pub use subject::{base_subject, reply_subject};

/// What a message's conversation is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ThreadKey {
    /// The thread's root: the first `References` id, else the first `In-Reply-To` id, else the
    /// message's own id.
    Root { id: MessageId },
    /// Mail without any usable id: the [`base_subject`] and the sorted, lower-cased addresses of
    /// From, To and Cc.
    Subject {
        subject: String,
        participants: Vec<String>,
    },
}

impl fmt::Display for ThreadKey {
    /// A stable string form for storage: `id:<root@id>` or `subject:<base>|<a@x,b@y>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadKey::Root { id } => write!(f, "id:{id}"),
            ThreadKey::Subject {
                subject,
                participants,
            } => {
                write!(f, "subject:{subject}|{}", participants.join(","))
            }
        }
    }
}

/// The thread key of `mail` (see [`ThreadKey`]).
pub fn thread_key(mail: &NormalizedMail) -> ThreadKey {
    let root = mail
        .references
        .first()
        .or_else(|| mail.in_reply_to.first())
        .or(mail.message_id.as_ref());
    if let Some(id) = root {
        return ThreadKey::Root { id: id.clone() };
    }
    let mut participants: Vec<String> = mail
        .from
        .iter()
        .chain(&mail.to)
        .chain(&mail.cc)
        .map(|m| m.address.as_str().to_lowercase())
        .collect();
    participants.sort();
    participants.dedup();
    ThreadKey::Subject {
        subject: base_subject(mail.subject.as_deref().unwrap_or_default()),
        participants,
    }
}

/// Every id that links `mail` to a known thread, oldest first: its References, its In-Reply-To
/// and its own Message-ID, each once. The store looks these up among the ids it has seen and
/// the ids the gateway sent, so that a reply whose References were trimmed still finds its
/// conversation.
pub fn related_ids(mail: &NormalizedMail) -> Vec<MessageId> {
    let mut ids: Vec<MessageId> = Vec::new();
    for id in mail
        .references
        .iter()
        .chain(&mail.in_reply_to)
        .chain(&mail.message_id)
    {
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    ids
}
