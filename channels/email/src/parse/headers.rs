//! Header extraction: raw values, message ids, addresses, the date and the loop-guard headers.

use chrono::{DateTime, FixedOffset, NaiveDate};
use mail_parser::{Address, Header, HeaderForm, HeaderName, Message, MimeHeaders};

use super::LoopHeaders;
use crate::address::{EmailAddress, Mailbox};
use crate::message_id::{MessageId, parse_id_list};

/// The unfolded, trimmed raw value of a header (lossy UTF-8).
pub(super) fn raw_value(message: &Message<'_>, header: &Header<'_>) -> String {
    let bytes = message
        .raw_message
        .get(header.offset_start as usize..header.offset_end as usize)
        .unwrap_or_default();
    let text = String::from_utf8_lossy(bytes);
    let unfolded: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
    unfolded.trim().to_owned()
}

/// The raw value of the first header called `name` (ASCII case-insensitive).
fn first_raw(message: &Message<'_>, name: &str) -> Option<String> {
    message
        .headers()
        .iter()
        .find(|h| h.name.as_str().eq_ignore_ascii_case(name))
        .map(|h| raw_value(message, h))
}

/// A decoded unstructured text: control characters dropped, whitespace runs collapsed.
pub(super) fn clean_text(text: &str) -> String {
    let no_controls: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    no_controls.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(super) struct Ids {
    pub message_id: Option<MessageId>,
    pub in_reply_to: Vec<MessageId>,
    pub references: Vec<MessageId>,
}

/// Most identifiers kept from `References`/`In-Reply-To`: the first (the thread's root) and the
/// newest ones. Bounds what a hostile header can put in the store.
pub(super) const MAX_IDS_KEPT: usize = 100;

pub(super) fn ids(message: &Message<'_>) -> Ids {
    Ids {
        message_id: id_header(message, HeaderName::MessageId).into_iter().next(),
        in_reply_to: root_and_newest(id_header(message, HeaderName::InReplyTo)),
        references: root_and_newest(id_header(message, HeaderName::References)),
    }
}

fn root_and_newest(mut ids: Vec<MessageId>) -> Vec<MessageId> {
    if ids.len() > MAX_IDS_KEPT {
        let newest = ids.split_off(ids.len() - (MAX_IDS_KEPT - 1));
        ids.truncate(1);
        ids.extend(newest);
    }
    ids
}

/// Identifiers of the first header called `name`, parsed by the `<...>` grammar; a value
/// carrying RFC 2047 encoded words is decoded first.
fn id_header(message: &Message<'_>, name: HeaderName<'static>) -> Vec<MessageId> {
    let Some(raw) = first_raw(message, name.as_str()) else {
        return Vec::new();
    };
    if raw.contains("=?") {
        let decoded = message.header_as(name, HeaderForm::Text).into_iter().next();
        if let Some(text) = decoded.as_ref().and_then(|v| v.as_text()) {
            let ids = parse_id_list(text);
            if !ids.is_empty() {
                return ids;
            }
        }
    }
    parse_id_list(&raw)
}

/// Every mailbox of an address header (groups flattened); entries without a valid address are
/// dropped, except that a lone word is read as a bare local part.
pub(super) fn mailboxes(address: Option<&Address<'_>>) -> Vec<Mailbox> {
    let addrs: Vec<&mail_parser::Addr<'_>> = match address {
        Some(Address::List(list)) => list.iter().collect(),
        Some(Address::Group(groups)) => groups.iter().flat_map(|g| g.addresses.iter()).collect(),
        None => Vec::new(),
    };
    addrs
        .into_iter()
        .filter_map(|addr| {
            let name = addr.name.as_deref().map(clean_text);
            match addr.address.as_deref() {
                Some(address) => Some(Mailbox::new(EmailAddress::parse(address)?, name.as_deref())),
                // `From: MAILER-DAEMON` (bounces): a lone token is a bare local part.
                None => {
                    let token = name.filter(|n| !n.contains(' '))?;
                    Some(Mailbox::new(EmailAddress::parse(&token)?, None))
                }
            }
        })
        .collect()
}

/// A valid `Date` as a timestamp with its original offset.
pub(super) fn date(date: &mail_parser::DateTime) -> Option<DateTime<FixedOffset>> {
    let offset_secs = i32::from(date.tz_hour) * 3600 + i32::from(date.tz_minute) * 60;
    let offset = if date.tz_before_gmt {
        FixedOffset::west_opt(offset_secs)
    } else {
        FixedOffset::east_opt(offset_secs)
    }?;
    let naive = NaiveDate::from_ymd_opt(
        i32::from(date.year),
        u32::from(date.month),
        u32::from(date.day),
    )?
    .and_hms_opt(
        u32::from(date.hour),
        u32::from(date.minute),
        u32::from(date.second),
    )?;
    naive.and_local_timezone(offset).single()
}

/// Lower-case `type/subtype` of a part's Content-Type.
pub(super) fn content_type<'x>(part: &impl MimeHeaders<'x>) -> Option<String> {
    let ct = part.content_type()?;
    let full = match ct.subtype() {
        Some(subtype) => format!("{}/{subtype}", ct.ctype()),
        None => ct.ctype().to_owned(),
    };
    Some(full.to_ascii_lowercase())
}

pub(super) fn loop_headers(message: &Message<'_>) -> LoopHeaders {
    let mut list_headers: Vec<String> = Vec::new();
    for header in message.headers() {
        let name = header.name.as_str();
        let is_list = name
            .get(..5)
            .is_some_and(|p| p.eq_ignore_ascii_case("list-"));
        if is_list && !list_headers.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            list_headers.push(name.to_owned());
        }
    }
    LoopHeaders {
        auto_submitted: first_raw(message, "Auto-Submitted"),
        return_path: first_raw(message, "Return-Path"),
        sender: mailboxes(message.sender()).into_iter().next(),
        precedence: first_raw(message, "Precedence"),
        list_headers,
        x_auto_response_suppress: first_raw(message, "X-Auto-Response-Suppress"),
        content_type: content_type(message),
    }
}
