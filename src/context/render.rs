//! How a stored message appears in the prompt: speaker, text (assistant answers truncated to
//! `context_truncation`), and the bot's actions as a short `[Actions: …]` line.

use ctxgate_contract::Role;

use crate::domain::Action;
use crate::store::MessageRecord;

/// At most this many actions are listed; the rest are counted.
pub const MAX_ACTIONS: usize = 15;

pub fn speaker(m: &MessageRecord) -> String {
    m.sender_name.clone().unwrap_or_else(|| m.sender_id.clone())
}

pub fn actions_line(actions: &[Action]) -> Option<String> {
    if actions.is_empty() {
        return None;
    }
    let shown: Vec<String> = actions
        .iter()
        .take(MAX_ACTIONS)
        .map(|a| match &a.detail {
            Some(d) => format!("{} ({d})", a.name),
            None => a.name.clone(),
        })
        .collect();
    let mut line = format!("[Actions: {}", shown.join(", "));
    if actions.len() > MAX_ACTIONS {
        line.push_str(&format!(", +{} more", actions.len() - MAX_ACTIONS));
    }
    line.push(']');
    Some(line)
}

/// Cuts `text` to `max` characters (0 = no limit), marking the cut.
pub fn truncate(text: &str, max: usize) -> String {
    if max == 0 || text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

/// The text of a message as the brain sees it.
pub fn text(m: &MessageRecord, truncation: usize) -> String {
    let mut body = if m.role == Role::Assistant {
        truncate(&m.text, truncation)
    } else {
        m.text.clone()
    };
    if m.role == Role::Assistant
        && let Some(line) = actions_line(&m.actions)
    {
        body.push('\n');
        body.push_str(&line);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_capped_at_fifteen() {
        let actions: Vec<Action> = (0..18)
            .map(|i| Action {
                name: format!("a{i}"),
                detail: None,
            })
            .collect();
        let line = actions_line(&actions).unwrap();
        assert!(line.starts_with("[Actions: a0, a1,"));
        assert!(line.contains("a14, +3 more]"), "{line}");
        assert!(!line.contains("a15"));
        assert_eq!(actions_line(&actions[..2]).unwrap(), "[Actions: a0, a1]");
        assert_eq!(actions_line(&[]), None);
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate("héllo wörld", 5), "héllo…");
        assert_eq!(truncate("short", 5), "short");
        assert_eq!(truncate("anything", 0), "anything");
    }
}
