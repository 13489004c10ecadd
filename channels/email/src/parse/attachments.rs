//! Attachment metadata (name, type, size); content is never kept or written anywhere.

use mail_parser::{Message, MessagePart, MimeHeaders, PartType};

use super::{Attachment, headers};

/// Longest file name kept, in characters.
const MAX_NAME_CHARS: usize = 255;

/// Up to `max` attachments described, plus the number left out.
pub(super) fn collect(message: &Message<'_>, max: usize) -> (Vec<Attachment>, usize) {
    let mut described = Vec::new();
    let mut omitted = 0usize;
    for &id in &message.attachments {
        if message.text_body.contains(&id) || message.html_body.contains(&id) {
            continue;
        }
        let Some(part) = message.parts.get(id as usize) else {
            continue;
        };
        if described.len() < max {
            described.push(describe(part));
        } else {
            omitted += 1;
        }
    }
    (described, omitted)
}

fn describe(part: &MessagePart<'_>) -> Attachment {
    let fallback_type = match &part.body {
        PartType::Text(_) => "text/plain",
        PartType::Html(_) => "text/html",
        PartType::Message(_) => "message/rfc822",
        _ => "application/octet-stream",
    };
    Attachment {
        name: part.attachment_name().and_then(safe_file_name),
        content_type: headers::content_type(part).unwrap_or_else(|| fallback_type.to_owned()),
        size: part.contents().len(),
    }
}

/// The last path component of a sender-given name, without control characters, at most 255
/// characters; `None` when nothing is left. Directory parts never survive, so the name cannot
/// point anywhere if someone ever uses it in a path.
pub(super) fn safe_file_name(name: &str) -> Option<String> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let clean: String = base
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_NAME_CHARS)
        .collect();
    let clean = clean.trim();
    (!clean.is_empty() && clean != "." && clean != "..").then(|| clean.to_owned())
}

#[cfg(test)]
mod tests {
    use super::safe_file_name;

    #[test]
    fn file_names_lose_directories_and_controls() {
        assert_eq!(
            safe_file_name("../../etc/passwd").as_deref(),
            Some("passwd")
        );
        assert_eq!(
            safe_file_name("C:\\temp\\report.pdf").as_deref(),
            Some("report.pdf")
        );
        assert_eq!(safe_file_name("a\u{0}b\n.txt").as_deref(), Some("ab.txt"));
        assert_eq!(safe_file_name("dir/"), None);
        assert_eq!(safe_file_name(".."), None);
        assert_eq!(safe_file_name(&"x".repeat(300)).map(|n| n.len()), Some(255));
    }
}
