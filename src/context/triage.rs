//! Triage of the older candidates by a fast completer. Fails open: a timeout, an error or an
//! unusable answer keeps every older candidate.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{TimeZone, Utc};

use super::render;
use crate::brain::Completer;
use crate::domain::Usage;
use crate::store::MessageRecord;

/// What triage decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Indices (0-based into the older candidates) the completer chose.
    Chosen(BTreeSet<usize>, Usage),
    /// Keep everything; why.
    FailOpen(String, Option<Usage>),
}

pub fn prompt(older: &[MessageRecord], incoming: &str, truncation: usize) -> String {
    let mut p = String::from(
        "You decide which earlier messages of a conversation are needed to answer a new \
         message. Earlier messages, numbered:\n\n",
    );
    for (i, m) in older.iter().enumerate() {
        let when = Utc
            .timestamp_millis_opt(m.created_at)
            .single()
            .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default();
        let text = render::text(m, truncation).replace('\n', " ");
        p.push_str(&format!(
            "[{}] {when} {}: {text}\n",
            i + 1,
            render::speaker(m)
        ));
    }
    p.push_str(&format!(
        "\nNew message: {incoming}\n\nAnswer only with a JSON object {{\"relevant\": [numbers]}} \
         listing the numbers of the earlier messages relevant to the new message (an empty \
         list if none are).\n"
    ));
    p
}

pub async fn run(
    completer: Option<&dyn Completer>,
    older: &[MessageRecord],
    incoming: &str,
    truncation: usize,
    timeout: Duration,
) -> Verdict {
    let Some(completer) = completer else {
        return Verdict::FailOpen("no completer for triage".into(), None);
    };
    let prompt = prompt(older, incoming, truncation);
    match tokio::time::timeout(timeout, completer.complete(&prompt)).await {
        Err(_) => Verdict::FailOpen(format!("triage timed out after {timeout:?}"), None),
        Ok(Err(e)) => Verdict::FailOpen(format!("triage failed: {e}"), None),
        Ok(Ok((answer, usage))) => match parse(&answer, older.len()) {
            Some(ids) => Verdict::Chosen(ids, usage),
            None => Verdict::FailOpen(
                "triage answer had no usable JSON object".into(),
                Some(usage),
            ),
        },
    }
}

/// Reads `{"relevant": [1, "3"]}` from an answer that may wrap it in a code fence or prose.
/// Numbers are 1-based; those out of range are ignored. `None` when no object is found.
pub fn parse(answer: &str, count: usize) -> Option<BTreeSet<usize>> {
    let value = json_object(answer)?;
    let list = ["relevant", "ids", "selected", "messages"]
        .iter()
        .find_map(|k| value.get(*k))?
        .as_array()?;
    let ids = list
        .iter()
        .filter_map(|v| match v {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        })
        .filter(|&n| n >= 1 && (n as usize) <= count)
        .map(|n| n as usize - 1)
        .collect();
    Some(ids)
}

/// The first JSON object embedded in `text` that parses.
fn json_object(text: &str) -> Option<serde_json::Value> {
    let mut start = 0;
    while let Some(open) = text[start..].find('{') {
        let from = start + open;
        let mut depth = 0usize;
        let mut in_str = false;
        let mut escaped = false;
        for (i, c) in text[from..].char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if in_str => escaped = true,
                '"' => in_str = !in_str,
                '{' if !in_str => depth += 1,
                '}' if !in_str => {
                    depth -= 1;
                    if depth == 0 {
                        if let Ok(v) = serde_json::from_str(&text[from..=from + i]) {
                            return Some(v);
                        }
                        break;
                    }
                }
                _ => {}
            }
        }
        start = from + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[usize]) -> Option<BTreeSet<usize>> {
        Some(v.iter().copied().collect())
    }

    #[test]
    fn plain_fenced_and_embedded_answers() {
        assert_eq!(parse(r#"{"relevant": [1, 3]}"#, 5), set(&[0, 2]));
        assert_eq!(parse("```json\n{\"relevant\": [2]}\n```", 5), set(&[1]));
        assert_eq!(
            parse(r#"Sure! Here: {"relevant": ["4", 5]} hope it helps"#, 5),
            set(&[3, 4])
        );
        assert_eq!(parse(r#"{"ids": []}"#, 5), set(&[]));
    }

    #[test]
    fn out_of_range_ids_are_ignored_and_garbage_is_none() {
        assert_eq!(parse(r#"{"relevant": [0, 2, 9, -1, "x"]}"#, 3), set(&[1]));
        assert_eq!(parse("no json here", 3), None);
        assert_eq!(parse(r#"{"other": [1]}"#, 3), None);
        assert_eq!(parse(r#"{"relevant": "1,2"}"#, 3), None);
        assert_eq!(parse(r#"{broken {"relevant": [1]}"#, 3), set(&[0]));
        assert_eq!(
            parse(r#"{"note": "a } brace", "relevant": [3]}"#, 3),
            set(&[2])
        );
    }
}
