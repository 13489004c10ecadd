//! Headers of an answer (RFC 5322 §3.6.4): In-Reply-To, References, a fresh Message-ID, a
//! single "Re:" and the recipients.

use serde::{Deserialize, Serialize};

use super::subject::reply_subject;
use crate::address::Mailbox;
use crate::message_id::MessageId;
use crate::parse::NormalizedMail;

/// Most identifiers a `References` header gets; longer chains keep the root and the newest
/// ones (what common clients do, so headers stay short in very long threads).
pub const MAX_REFERENCES: usize = 50;

/// The threading and addressing headers of a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyHeaders {
    /// Fresh and globally unique; record it so that answers to the reply join the thread.
    pub message_id: MessageId,
    /// The parent's Message-ID (absent when the parent had none).
    pub in_reply_to: Option<MessageId>,
    /// Root first, parent last.
    pub references: Vec<MessageId>,
    pub subject: String,
    /// The parent's `Reply-To`, else its `From`.
    pub to: Vec<Mailbox>,
}

/// The headers for answering `parent`, with a fresh Message-ID on `domain`; `None` when the
/// parent names nobody to answer. Everything but the new id is a pure function of the parent.
pub fn reply_headers(parent: &NormalizedMail, domain: &str) -> Option<ReplyHeaders> {
    let to = if parent.reply_to.is_empty() {
        parent.from.iter().cloned().collect()
    } else {
        parent.reply_to.clone()
    };
    if to.is_empty() {
        return None;
    }
    Some(ReplyHeaders {
        message_id: MessageId::generate(domain),
        in_reply_to: parent.message_id.clone(),
        references: references(parent),
        subject: reply_subject(parent.subject.as_deref().unwrap_or_default()),
        to,
    })
}

/// The parent's References (or its In-Reply-To when it holds a single id and References is
/// absent) followed by the parent's Message-ID, capped at [`MAX_REFERENCES`].
pub fn references(parent: &NormalizedMail) -> Vec<MessageId> {
    let mut refs = if !parent.references.is_empty() {
        parent.references.clone()
    } else if parent.in_reply_to.len() == 1 {
        parent.in_reply_to.clone()
    } else {
        Vec::new()
    };
    if let Some(id) = &parent.message_id {
        refs.retain(|r| r != id);
        refs.push(id.clone());
    }
    if refs.len() > MAX_REFERENCES {
        let newest = refs.split_off(refs.len() - (MAX_REFERENCES - 1));
        refs.truncate(1);
        refs.extend(newest);
    }
    refs
}
