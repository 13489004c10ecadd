//! Message identifiers (RFC 5322 §3.6.4) and the `<...>` grammar that finds them in
//! `Message-ID`, `In-Reply-To` and `References`, folded or not.

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Longest identifier kept (a header line may be 998 octets).
const MAX_ID_LEN: usize = 998;

/// A message identifier without its angle brackets, e.g. `abc.123@example.org`.
/// Displayed with brackets (`<abc.123@example.org>`) as it appears in headers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct MessageId(String);

impl MessageId {
    /// Accepts an identifier with or without its brackets: non-empty, printable ASCII without
    /// spaces or brackets inside, at most 998 bytes.
    pub fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        let inner = raw
            .strip_prefix('<')
            .and_then(|r| r.strip_suffix('>'))
            .unwrap_or(raw);
        let valid = !inner.is_empty()
            && inner.len() <= MAX_ID_LEN
            && inner
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'<' && b != b'>');
        valid.then(|| Self(inner.to_owned()))
    }

    /// A fresh, globally unique identifier on `domain`: 128 random bits and the time.
    pub fn generate(domain: &str) -> Self {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let random: u128 = rand::random();
        let domain: String = domain
            .trim()
            .chars()
            .filter(|c| c.is_ascii_graphic() && !matches!(c, '<' | '>' | '@'))
            .collect();
        let domain = if domain.is_empty() {
            "localhost".to_owned()
        } else {
            domain
        };
        Self(format!("{millis:x}.{random:032x}@{domain}"))
    }

    /// The identifier without brackets.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.0)
    }
}

impl<'de> Deserialize<'de> for MessageId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid message id {raw:?}")))
    }
}

/// Every `<...>` identifier in a header value, in order, without duplicates.
///
/// Follows the `msg-id` grammar rather than whitespace: folding whitespace (CRLF + blanks) inside
/// brackets is removed, comments in parentheses between identifiers are skipped, and text
/// outside brackets is ignored. A value with no bracket at all that is a single token (some
/// broken mailers write `Message-ID: abc@host`) is accepted as one identifier.
pub fn parse_id_list(value: &str) -> Vec<MessageId> {
    let mut ids: Vec<MessageId> = Vec::new();
    let mut seen: HashSet<MessageId> = HashSet::new();
    let mut push = |id: Option<MessageId>| {
        if let Some(id) = id
            && seen.insert(id.clone())
        {
            ids.push(id);
        }
    };
    if !value.contains('<') {
        let mut tokens = value.split_whitespace();
        if let (Some(token), None) = (tokens.next(), tokens.next()) {
            push(MessageId::parse(token));
        }
        return ids;
    }
    let mut chars = value.chars();
    let mut comment_depth = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '(' => comment_depth += 1,
            ')' => comment_depth = comment_depth.saturating_sub(1),
            '<' if comment_depth == 0 => {
                let mut inner = String::new();
                for c in chars.by_ref() {
                    if c == '>' {
                        break;
                    }
                    if !c.is_whitespace() {
                        inner.push(c);
                    }
                }
                push(MessageId::parse(&inner));
            }
            _ => {}
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(value: &str) -> Vec<String> {
        parse_id_list(value).into_iter().map(|i| i.0).collect()
    }

    #[test]
    fn parses_bracketed_lists() {
        assert_eq!(ids("<a@x> <b@y>"), ["a@x", "b@y"]);
        assert_eq!(ids("<a@x>,<b@y>"), ["a@x", "b@y"]);
        assert_eq!(ids("<a@x>\r\n\t<b@y>"), ["a@x", "b@y"]);
    }

    #[test]
    fn folding_inside_an_id_is_removed() {
        assert_eq!(
            ids("<very-long-\r\n id@example.org>"),
            ["very-long-id@example.org"]
        );
    }

    #[test]
    fn comments_and_junk_are_skipped() {
        assert_eq!(ids("(comment <no@no>) <a@x> junk <b@y>"), ["a@x", "b@y"]);
        assert_eq!(ids("<a@x> <a@x> <> < >"), ["a@x"]);
        assert_eq!(ids("<unterminated@x"), ["unterminated@x"]);
    }

    #[test]
    fn bare_single_token_is_accepted_lists_are_not() {
        assert_eq!(ids(" abc@host "), ["abc@host"]);
        assert!(ids("a@x b@y").is_empty());
        assert!(ids("").is_empty());
    }

    #[test]
    fn parse_rejects_spaces_and_non_ascii() {
        assert!(MessageId::parse("<a b@x>").is_none());
        assert!(MessageId::parse("<é@x>").is_none());
        assert!(MessageId::parse("<>").is_none());
        assert_eq!(MessageId::parse("<a@x>").unwrap().to_string(), "<a@x>");
    }

    #[test]
    fn generated_ids_are_unique_and_on_the_domain() {
        let a = MessageId::generate("gw.example.org");
        let b = MessageId::generate("gw.example.org");
        assert_ne!(a, b);
        assert!(a.as_str().ends_with("@gw.example.org"));
        assert_eq!(MessageId::parse(&a.to_string()), Some(a));
        assert!(MessageId::generate(" <bad> ").as_str().ends_with("@bad"));
        assert!(MessageId::generate("").as_str().ends_with("@localhost"));
    }
}
