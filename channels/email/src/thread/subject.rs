//! Subject handling: the single-"Re:" reply subject and the base subject used to group mail that
//! has no usable message ids (RFC 5256 §2.1, simplified).

/// Reply prefixes as mail clients write them in several languages (compared case-insensitively,
/// before an optional `[n]`/`(n)` counter and the colon).
const REPLY_PREFIXES: &[&str] = &["re", "aw", "antw", "sv", "vs", "ref", "res", "odp", "r"];
/// Forward prefixes; a reply keeps them, the base subject drops them.
const FORWARD_PREFIXES: &[&str] = &["fwd", "fw", "wg", "tr", "rv", "enc"];

/// `Re: <subject>` with exactly one "Re:": leading reply prefixes (`Re:`, `RE:`, `Re[2]:`,
/// `AW:`, `SV:`, …) are removed first; forward prefixes (`Fwd:`) are kept after the "Re:".
pub fn reply_subject(subject: &str) -> String {
    let mut rest = subject.trim();
    while let Some(after) = strip_prefix(rest, REPLY_PREFIXES) {
        rest = after;
    }
    if rest.is_empty() {
        "Re:".to_owned()
    } else {
        format!("Re: {rest}")
    }
}

/// The subject with every leading reply/forward prefix and `[list]` tag removed, a trailing
/// `(fwd)` removed, whitespace collapsed and lower-cased: the same for a message and all its
/// replies and forwards.
pub fn base_subject(subject: &str) -> String {
    let mut rest = subject.trim();
    loop {
        if let Some(after) = strip_prefix(rest, REPLY_PREFIXES)
            .or_else(|| strip_prefix(rest, FORWARD_PREFIXES))
            .or_else(|| strip_blob(rest))
        {
            rest = after;
            continue;
        }
        break;
    }
    loop {
        let lower = rest.to_ascii_lowercase();
        if lower.ends_with("(fwd)") {
            rest = rest[..rest.len() - 5].trim_end();
        } else {
            break;
        }
    }
    rest.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Removes one `<prefix>[n]:` (or `(n)`), returning the trimmed rest.
fn strip_prefix<'a>(text: &'a str, prefixes: &[&str]) -> Option<&'a str> {
    let word_len = text
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let word = &text[..word_len];
    if !prefixes.iter().any(|p| p.eq_ignore_ascii_case(word)) {
        return None;
    }
    let mut rest = text[word_len..].trim_start();
    for (open, close) in [('[', ']'), ('(', ')')] {
        if let Some(inner) = rest.strip_prefix(open)
            && let Some(end) = inner.find(close)
            && inner[..end].trim().chars().all(|c| c.is_ascii_digit())
        {
            rest = inner[end + 1..].trim_start();
        }
    }
    rest.strip_prefix(':').map(str::trim_start)
}

/// Removes one leading `[tag]` when something follows it.
fn strip_blob(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('[')?;
    let end = inner.find(']')?;
    let rest = inner[end + 1..].trim_start();
    (!rest.is_empty()).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_subject_has_a_single_re() {
        let cases = [
            ("Lunch", "Re: Lunch"),
            ("Re: Lunch", "Re: Lunch"),
            ("RE: Lunch", "Re: Lunch"),
            ("re:Lunch", "Re: Lunch"),
            ("Re[2]: Lunch", "Re: Lunch"),
            ("Re: RE: re: Lunch", "Re: Lunch"),
            ("AW: Lunch", "Re: Lunch"),
            ("SV: Re (3): Lunch", "Re: Lunch"),
            ("Fwd: Lunch", "Re: Fwd: Lunch"),
            ("Re: Fwd: Re: Lunch", "Re: Fwd: Re: Lunch"),
            ("  ", "Re:"),
            ("Review: the plan", "Re: Review: the plan"),
            ("Reminder", "Re: Reminder"),
        ];
        for (input, expected) in cases {
            assert_eq!(reply_subject(input), expected, "{input:?}");
        }
    }

    #[test]
    fn base_subject_groups_replies_and_forwards() {
        let base = base_subject("Quarterly  Numbers");
        for s in [
            "Re: Quarterly Numbers",
            "RE: Fwd: quarterly numbers",
            "[team] Re[3]: Quarterly Numbers",
            "Quarterly Numbers (fwd)",
            "AW: WG: Quarterly   Numbers",
        ] {
            assert_eq!(base_subject(s), base, "{s:?}");
        }
        assert_eq!(base, "quarterly numbers");
        assert_eq!(base_subject("[only-a-tag]"), "[only-a-tag]");
    }
}
