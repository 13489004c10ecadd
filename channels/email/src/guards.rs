//! "Never answer" checks (RFC 3834 and the heuristics in EMAIL.md): robots, lists, bounces and
//! the gateway itself get no reply. A skipped message is recorded with [`SkipReason::code`].

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::address::{EmailAddress, Mailbox};
use crate::parse::NormalizedMail;

/// Why a message gets no answer. The snake_case names are stable (records, admin API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// `From`, `Sender` or `Return-Path` is one of the gateway's own addresses.
    OwnAddress,
    /// Neither `Reply-To` nor `From` holds an address (with a domain) to answer.
    NoSender,
    /// `Auto-Submitted` is present and not `no` (RFC 3834 §5).
    AutoSubmitted,
    /// `Return-Path: <>`: a bounce or other message with a null return path.
    NullReturnPath,
    /// The sender's local part is `MAILER-DAEMON`, `postmaster`, `owner-*`, `*-request`,
    /// `noreply` or `no-reply`.
    RobotSender,
    /// `Precedence: bulk`, `list` or `junk`.
    BulkPrecedence,
    /// A `List-Id` or other `List-*` header.
    MailingList,
    /// A delivery or disposition report (`multipart/report`).
    DeliveryReport,
    /// `X-Auto-Response-Suppress` contains `All` or `AutoReply`.
    AutoResponseSuppressed,
}

impl SkipReason {
    /// The stable snake_case name.
    pub fn code(self) -> &'static str {
        match self {
            SkipReason::OwnAddress => "own_address",
            SkipReason::NoSender => "no_sender",
            SkipReason::AutoSubmitted => "auto_submitted",
            SkipReason::NullReturnPath => "null_return_path",
            SkipReason::RobotSender => "robot_sender",
            SkipReason::BulkPrecedence => "bulk_precedence",
            SkipReason::MailingList => "mailing_list",
            SkipReason::DeliveryReport => "delivery_report",
            SkipReason::AutoResponseSuppressed => "auto_response_suppressed",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The first reason not to answer `mail`, or `None` when an answer is allowed. `own` holds the
/// gateway's own addresses (checked first: a loop is the worst outcome).
pub fn check(mail: &NormalizedMail, own: &[EmailAddress]) -> Option<SkipReason> {
    let headers = &mail.loop_headers;
    let return_path = headers.return_path.as_deref().map(return_path);
    let envelope_sender = match &return_path {
        Some(ReturnPath::Address(address)) => Some(address),
        _ => None,
    };
    let senders: Vec<&EmailAddress> = mail
        .from
        .iter()
        .chain(headers.sender.iter())
        .map(|m: &Mailbox| &m.address)
        .chain(envelope_sender)
        .collect();

    if senders.iter().any(|s| own.iter().any(|o| o.same_as(s))) {
        return Some(SkipReason::OwnAddress);
    }
    if headers
        .auto_submitted
        .as_deref()
        .is_some_and(|v| first_token(v) != "no")
    {
        return Some(SkipReason::AutoSubmitted);
    }
    if return_path == Some(ReturnPath::Null) {
        return Some(SkipReason::NullReturnPath);
    }
    if senders.iter().any(|s| is_robot_local_part(s.local_part())) {
        return Some(SkipReason::RobotSender);
    }
    if headers
        .precedence
        .as_deref()
        .is_some_and(|v| matches!(first_token(v).as_str(), "bulk" | "list" | "junk"))
    {
        return Some(SkipReason::BulkPrecedence);
    }
    if !headers.list_headers.is_empty() {
        return Some(SkipReason::MailingList);
    }
    if headers.content_type.as_deref() == Some("multipart/report") {
        return Some(SkipReason::DeliveryReport);
    }
    if headers
        .x_auto_response_suppress
        .as_deref()
        .is_some_and(suppresses_auto_reply)
    {
        return Some(SkipReason::AutoResponseSuppressed);
    }
    let answerable = mail
        .reply_to
        .iter()
        .chain(&mail.from)
        .any(|m| m.address.domain().is_some());
    if !answerable {
        return Some(SkipReason::NoSender);
    }
    None
}

/// The first token of a header value, lower-case, without comments or parameters:
/// `Auto-Replied (vacation); x=y` → `auto-replied`.
fn first_token(value: &str) -> String {
    value
        .split(|c: char| c == ';' || c == '(' || c.is_whitespace())
        .find(|t| !t.is_empty())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

#[derive(Debug, PartialEq, Eq)]
enum ReturnPath {
    /// `<>`
    Null,
    Address(EmailAddress),
    Invalid,
}

fn return_path(value: &str) -> ReturnPath {
    let without_comments: String = {
        let mut depth = 0usize;
        value
            .chars()
            .filter(|&c| {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth = depth.saturating_sub(1);
                        return false;
                    }
                    _ => {}
                }
                depth == 0
            })
            .collect()
    };
    let inner = without_comments
        .trim()
        .trim_start_matches('<')
        .trim_end_matches('>')
        .trim();
    if inner.is_empty() {
        return ReturnPath::Null;
    }
    EmailAddress::parse(inner).map_or(ReturnPath::Invalid, ReturnPath::Address)
}

fn is_robot_local_part(local: &str) -> bool {
    let local = local.to_ascii_lowercase();
    matches!(
        local.as_str(),
        "mailer-daemon" | "postmaster" | "noreply" | "no-reply"
    ) || local.starts_with("owner-")
        || local.ends_with("-request")
}

fn suppresses_auto_reply(value: &str) -> bool {
    value
        .split(',')
        .map(str::trim)
        .any(|v| v.eq_ignore_ascii_case("all") || v.eq_ignore_ascii_case("autoreply"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_token_ignores_comments_and_params() {
        assert_eq!(first_token(" Auto-Replied (vacation)"), "auto-replied");
        assert_eq!(first_token("no;x=1"), "no");
        assert_eq!(first_token(""), "");
    }

    #[test]
    fn return_paths() {
        assert_eq!(return_path("<>"), ReturnPath::Null);
        assert_eq!(return_path(" < > (bounce)"), ReturnPath::Null);
        assert_eq!(
            return_path("<a@b.c>"),
            ReturnPath::Address(EmailAddress::parse("a@b.c").unwrap())
        );
        assert_eq!(return_path("<a b>"), ReturnPath::Invalid);
    }

    #[test]
    fn robot_local_parts() {
        for l in [
            "MAILER-DAEMON",
            "postmaster",
            "owner-list",
            "list-request",
            "NoReply",
            "no-reply",
        ] {
            assert!(is_robot_local_part(l), "{l}");
        }
        for l in ["alice", "reply", "owner", "requests", "noreplyx"] {
            assert!(!is_robot_local_part(l), "{l}");
        }
    }

    #[test]
    fn suppress_values() {
        assert!(suppresses_auto_reply("All"));
        assert!(suppresses_auto_reply("DR, OOF, AutoReply"));
        assert!(!suppresses_auto_reply("DR, RN, NRN"));
    }

    #[test]
    fn codes_match_serde_names() {
        for reason in [
            SkipReason::OwnAddress,
            SkipReason::NoSender,
            SkipReason::AutoSubmitted,
            SkipReason::NullReturnPath,
            SkipReason::RobotSender,
            SkipReason::BulkPrecedence,
            SkipReason::MailingList,
            SkipReason::DeliveryReport,
            SkipReason::AutoResponseSuppressed,
        ] {
            let json = serde_json::to_string(&reason).unwrap();
            assert_eq!(json, format!("\"{}\"", reason.code()));
        }
    }
}
