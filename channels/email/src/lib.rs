//! E-mail for ctxgate (see `docs/` and the e-mail channel issue): parsing and normalisation,
//! RFC 5322 threading keys, RFC 3834 loop guards, IMAP tracking and SMTP replies.
//!
//! - [`parse`]: raw bytes → [`NormalizedMail`] (never panics; errors are a [`ParseError`]);
//! - [`guards`]: whether a message may be answered ([`guards::check`] → [`SkipReason`]);
//! - [`thread`]: the conversation key and the headers of a reply;
//! - [`imap`]: fetching new mail by UID, oldest first, in bounded batches;
//! - [`smtp`]: sending threaded, `Auto-Submitted` answers.

mod address;
pub mod guards;
pub mod imap;
mod message_id;
pub mod parse;
mod security;
pub mod sink;
pub mod smtp;
pub mod thread;
pub mod tracker;

pub use address::{EmailAddress, Mailbox};
pub use guards::SkipReason;
pub use message_id::{MessageId, parse_id_list};
pub use parse::{
    Attachment, Body, BodySource, Limits, LoopHeaders, NormalizedMail, Normalizer, ParseError,
    normalize,
};
pub use security::Security;
pub use thread::{ReplyHeaders, ThreadKey};
