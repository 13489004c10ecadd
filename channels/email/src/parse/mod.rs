//! Raw RFC 5322 bytes → [`NormalizedMail`]: the decoded headers a conversation needs, one text
//! body without quoted history or signature, attachment metadata, and the headers the loop
//! guards read.
//!
//! Parsing never panics: every input ends as a `NormalizedMail` or a [`ParseError`] whose
//! [`code`](ParseError::code) is recorded as the rejection reason.

mod attachments;
mod body;
mod headers;
mod strip;

use chrono::{DateTime, FixedOffset};
use mail_parser::{Message, MessageParser};
use serde::{Deserialize, Serialize};

use crate::address::Mailbox;
use crate::message_id::MessageId;

/// Caps applied while normalising; the defaults suit a chat assistant's context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Larger raw messages are rejected before parsing ([`ParseError::TooLarge`]).
    pub max_message_bytes: usize,
    /// The stored body text is cut at this many bytes and ends with a truncation marker.
    pub max_body_bytes: usize,
    /// HTML beyond this many bytes is not converted (the body is then marked truncated).
    pub max_html_bytes: usize,
    /// At most this many attachments are described; the rest are only counted.
    pub max_attachments: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_bytes: 32 * 1024 * 1024,
            max_body_bytes: 64 * 1024,
            max_html_bytes: 2 * 1024 * 1024,
            max_attachments: 32,
        }
    }
}

/// Why a message could not be normalised. The decision is always the same: record the message
/// as rejected with [`ParseError::code`] and move on (retrying cannot help).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the message is empty")]
    Empty,
    #[error("the message has {size} bytes, more than the limit of {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("no RFC 5322 header field was found")]
    NoHeaders,
    #[error("the MIME parser failed on this input")]
    ParserFailed,
}

impl ParseError {
    /// A stable snake_case name for records and the admin API.
    pub fn code(&self) -> &'static str {
        match self {
            ParseError::Empty => "empty",
            ParseError::TooLarge { .. } => "too_large",
            ParseError::NoHeaders => "no_headers",
            ParseError::ParserFailed => "parser_failed",
        }
    }
}

/// One received message, decoded and trimmed to what a conversation needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalizedMail {
    pub message_id: Option<MessageId>,
    /// Identifiers of the parent message(s), usually one.
    pub in_reply_to: Vec<MessageId>,
    /// The thread's ancestry, root first (at most 100: the root and the newest 99).
    pub references: Vec<MessageId>,
    /// The first author (a `From` with several addresses keeps the first).
    pub from: Option<Mailbox>,
    pub reply_to: Vec<Mailbox>,
    pub to: Vec<Mailbox>,
    pub cc: Vec<Mailbox>,
    /// Decoded subject (encoded words and folding resolved).
    pub subject: Option<String>,
    /// The `Date` header, if it parses.
    pub date: Option<DateTime<FixedOffset>>,
    pub body: Body,
    /// Described attachments (metadata only, never content), at most `Limits::max_attachments`.
    pub attachments: Vec<Attachment>,
    /// Attachments beyond the cap, counted but not described.
    pub attachments_omitted: usize,
    /// Whether some MIME part was malformed and recovered as text on a best-effort basis.
    pub broken_mime: bool,
    /// The raw header values the loop guards read.
    pub loop_headers: LoopHeaders,
}

/// The text a conversation keeps from the message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Body {
    /// Plain text with `\n` line ends: quoted history and signature removed, capped.
    pub text: String,
    pub source: BodySource,
    /// Quoted lines, attributions or a forwarded-history block were removed.
    pub quote_stripped: bool,
    /// A signature block was removed.
    pub signature_stripped: bool,
    /// The text was cut at `Limits::max_body_bytes` (a marker line says how much is missing).
    pub truncated: bool,
}

/// Where [`Body::text`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BodySource {
    /// `text/plain` part(s).
    Plain,
    /// `text/html` converted to text (no usable plain part).
    Html,
    /// The message has no text at all.
    None,
}

/// What is known about one attachment; its content is never kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The file name without any directory part, if the sender gave one.
    pub name: Option<String>,
    /// Lower-case `type/subtype`.
    pub content_type: String,
    /// Decoded size in bytes.
    pub size: usize,
}

/// Header values the RFC 3834 loop guards need, kept raw (unfolded, trimmed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopHeaders {
    pub auto_submitted: Option<String>,
    /// `Return-Path` as written, e.g. `<>` for a bounce.
    pub return_path: Option<String>,
    pub sender: Option<Mailbox>,
    pub precedence: Option<String>,
    /// Names of the `List-*` headers present (canonical spelling, e.g. `List-ID`).
    pub list_headers: Vec<String>,
    pub x_auto_response_suppress: Option<String>,
    /// Lower-case `type/subtype` of the top-level part, e.g. `multipart/report`.
    pub content_type: Option<String>,
}

/// Turns raw messages into [`NormalizedMail`]. Build once, use for every message.
#[derive(Debug, Clone)]
pub struct Normalizer {
    parser: MessageParser,
    limits: Limits,
}

impl Default for Normalizer {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Normalizer {
    pub fn new(limits: Limits) -> Self {
        // Only what is read gets a structured parse; everything else stays raw (cheap), and the
        // message ids are parsed here by the `<...>` grammar from the raw values.
        let parser = MessageParser::new()
            .with_mime_headers()
            .with_date_headers()
            .with_address_headers()
            .header_text(mail_parser::HeaderName::Subject)
            .default_header_raw();
        Self { parser, limits }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Normalises one raw message. Never panics.
    pub fn normalize(&self, raw: &[u8]) -> Result<NormalizedMail, ParseError> {
        if raw.iter().all(u8::is_ascii_whitespace) {
            return Err(ParseError::Empty);
        }
        if raw.len() > self.limits.max_message_bytes {
            return Err(ParseError::TooLarge {
                size: raw.len(),
                limit: self.limits.max_message_bytes,
            });
        }
        // mail-parser is fuzzed but does index arithmetic on hostile input; a bug there must
        // reject one message, not take the process down.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.normalize_unguarded(raw)
        }))
        .unwrap_or(Err(ParseError::ParserFailed))
    }

    fn normalize_unguarded(&self, raw: &[u8]) -> Result<NormalizedMail, ParseError> {
        let message = self.parser.parse(raw).ok_or(ParseError::NoHeaders)?;
        if !message.headers().iter().any(|h| !h.name.is_other()) {
            return Err(ParseError::NoHeaders);
        }
        Ok(self.build(&message))
    }

    fn build(&self, message: &Message<'_>) -> NormalizedMail {
        let ids = headers::ids(message);
        let subject = message
            .subject()
            .map(headers::clean_text)
            .filter(|s| !s.is_empty());
        let text = body::extract(message, &self.limits);
        let body = body::finish(text, subject.as_deref(), self.limits.max_body_bytes);
        let (attachments, attachments_omitted) =
            attachments::collect(message, self.limits.max_attachments);
        NormalizedMail {
            message_id: ids.message_id,
            in_reply_to: ids.in_reply_to,
            references: ids.references,
            from: headers::mailboxes(message.from()).into_iter().next(),
            reply_to: headers::mailboxes(message.reply_to()),
            to: headers::mailboxes(message.to()),
            cc: headers::mailboxes(message.cc()),
            subject,
            date: message.date().and_then(headers::date),
            body,
            attachments,
            attachments_omitted,
            broken_mime: message.parts.iter().any(|p| p.is_encoding_problem),
            loop_headers: headers::loop_headers(message),
        }
    }
}

/// Normalises with the default [`Limits`]; see [`Normalizer`] to reuse one parser.
pub fn normalize(raw: &[u8]) -> Result<NormalizedMail, ParseError> {
    Normalizer::default().normalize(raw)
}
