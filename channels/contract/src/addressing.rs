//! Which agents a message addresses: `@id` or `@Name` in its text. Shared by the channels that
//! read mentions (Talk) and the core, so every channel recognises agents the same way.

use serde::{Deserialize, Serialize};

/// An agent as channels see it: its id and the names it is addressed by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentHandle {
    pub id: String,
    /// `@name` addresses the agent (case-insensitively); the id is one of them.
    pub names: Vec<String>,
}

/// The agents addressed in `text`: `@name` for one of their names, compared case-insensitively,
/// not inside a longer word or an address (`x@planner.org`, `@plannerX` are no mentions). In
/// order of first mention, each once.
pub fn addressed_agents(text: &str, agents: &[AgentHandle]) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut found: Vec<(usize, String)> = agents
        .iter()
        .filter_map(|a| {
            a.names
                .iter()
                .filter_map(|n| find_mention(&lower, &n.to_lowercase()))
                .min()
                .map(|at| (at, a.id.clone()))
        })
        .collect();
    found.sort();
    found.dedup_by(|a, b| a.1 == b.1);
    found.into_iter().map(|(_, id)| id).collect()
}

fn find_mention(text: &str, name: &str) -> Option<usize> {
    if name.is_empty() {
        return None;
    }
    let needle = format!("@{name}");
    let mut from = 0;
    while let Some(pos) = text[from..].find(&needle) {
        let start = from + pos;
        let end = start + needle.len();
        let before_ok = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && !matches!(c, '.' | '_' | '-' | '+'));
        let mut after = text[end..].chars();
        let after_ok = match after.next() {
            None => true,
            // `@planner.` ends a sentence; `@planner.org` is a domain.
            Some('.') => after.next().is_none_or(|c| !c.is_alphanumeric()),
            Some(c) => !c.is_alphanumeric() && !matches!(c, '_' | '-' | '@'),
        };
        if before_ok && after_ok {
            return Some(start);
        }
        from = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: &str, names: &[&str]) -> AgentHandle {
        AgentHandle {
            id: id.into(),
            names: names.iter().map(|n| n.to_string()).collect(),
        }
    }

    #[test]
    fn mentions_by_id_or_name_in_order_not_inside_words_or_addresses() {
        let agents = [
            agent("reviewer", &["reviewer", "Review Bot"]),
            agent("planner", &["planner"]),
        ];
        assert_eq!(
            addressed_agents("@planner and @Reviewer, please", &agents),
            ["planner", "reviewer"]
        );
        assert_eq!(
            addressed_agents("hey @review bot: look", &agents),
            ["reviewer"]
        );
        assert!(addressed_agents("mail x@planner.org or @plannerX", &agents).is_empty());
        assert_eq!(addressed_agents("thanks @planner.", &agents), ["planner"]);
        assert_eq!(
            addressed_agents("@planner @planner again", &agents),
            ["planner"]
        );
        assert!(addressed_agents("no mention of planner", &agents).is_empty());
    }
}
