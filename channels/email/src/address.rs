//! E-mail addresses as parsed at the edge: [`EmailAddress`] and [`Mailbox`] (address + name).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Longest address accepted (RFC 5321 §4.5.3.1.3: a path is at most 256 octets).
const MAX_ADDRESS_LEN: usize = 320;

/// An e-mail address (`local@domain`, or a bare local part such as `MAILER-DAEMON`, which
/// bounces use). Kept as written; [`EmailAddress::same_as`] compares ignoring ASCII case, which
/// is how every real mail system treats addresses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct EmailAddress(String);

impl EmailAddress {
    /// Accepts a trimmed address with no whitespace, angle brackets or control characters, at
    /// most 320 bytes long, and with at most one non-empty local part before an `@`.
    pub fn parse(raw: &str) -> Option<Self> {
        let address = raw.trim();
        let valid = !address.is_empty()
            && address.len() <= MAX_ADDRESS_LEN
            && !address
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>'))
            && !address.starts_with('@')
            && !address.ends_with('@');
        valid.then(|| Self(address.to_owned()))
    }

    /// The address as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The part before the last `@` (the whole address when there is none).
    pub fn local_part(&self) -> &str {
        self.0.rsplit_once('@').map_or(&self.0, |(local, _)| local)
    }

    /// The part after the last `@`, if any.
    pub fn domain(&self) -> Option<&str> {
        self.0.rsplit_once('@').map(|(_, domain)| domain)
    }

    /// Whether both name the same mailbox (ASCII case-insensitive).
    pub fn same_as(&self, other: &EmailAddress) -> bool {
        self.0.eq_ignore_ascii_case(&other.0)
    }
}

impl fmt::Display for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for EmailAddress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid e-mail address {raw:?}")))
    }
}

/// An address with its display name, as in `From: Alice <alice@example.org>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mailbox {
    pub address: EmailAddress,
    /// The decoded display name, if one was given and is not empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Mailbox {
    /// A mailbox from an address and an optional display name (blank names are dropped).
    pub fn new(address: EmailAddress, name: Option<&str>) -> Self {
        let name = name
            .map(|n| {
                let n = n.trim();
                let unquoted = n.strip_prefix('"').and_then(|n| n.strip_suffix('"'));
                unquoted.unwrap_or(n).trim()
            })
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
        Self { address, name }
    }
}

impl fmt::Display for Mailbox {
    /// `Name <address>` (name quoted when needed), or the bare address.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) if name.chars().all(|c| c.is_alphanumeric() || c == ' ') => {
                write!(f, "{name} <{}>", self.address)
            }
            Some(name) => {
                let escaped = name.replace('\\', "\\\\").replace('"', "\\\"");
                write!(f, "\"{escaped}\" <{}>", self.address)
            }
            None => write!(f, "{}", self.address),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_splits_addresses() {
        let a = EmailAddress::parse("  Alice@Example.ORG ").unwrap();
        assert_eq!(a.as_str(), "Alice@Example.ORG");
        assert_eq!(a.local_part(), "Alice");
        assert_eq!(a.domain(), Some("Example.ORG"));
        assert!(a.same_as(&EmailAddress::parse("alice@example.org").unwrap()));
        let daemon = EmailAddress::parse("MAILER-DAEMON").unwrap();
        assert_eq!(daemon.local_part(), "MAILER-DAEMON");
        assert_eq!(daemon.domain(), None);
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "  ", "a b@c", "<a@b>", "@b", "a@", "a\u{7}@b"] {
            assert!(EmailAddress::parse(bad).is_none(), "{bad:?} accepted");
        }
        assert!(EmailAddress::parse(&"a".repeat(400)).is_none());
    }

    #[test]
    fn displays_mailboxes() {
        let a = EmailAddress::parse("a@b.c").unwrap();
        assert_eq!(
            Mailbox::new(a.clone(), Some("Ann Lee")).to_string(),
            "Ann Lee <a@b.c>"
        );
        assert_eq!(
            Mailbox::new(a.clone(), Some("Lee, \"Ann\"")).to_string(),
            "\"Lee, \\\"Ann\\\"\" <a@b.c>"
        );
        assert_eq!(Mailbox::new(a.clone(), Some("  ")).to_string(), "a@b.c");
        assert_eq!(
            Mailbox::new(a, Some("\"Ann\"")).name.as_deref(),
            Some("Ann")
        );
    }

    #[test]
    fn deserialize_validates() {
        assert!(serde_json::from_str::<EmailAddress>("\"x@y\"").is_ok());
        assert!(serde_json::from_str::<EmailAddress>("\"x y\"").is_err());
    }
}
