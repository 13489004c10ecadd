//! The context engine: which prior messages of a conversation go into a task's prompt, and why.
//!
//! The pipeline follows CONTEXT.md in order — candidates (lookback, exclusions, briefings added
//! back), recency filter, reply parent, shortcut, guaranteed recent, triage of the older ones
//! (failing open), chronological assembly with actions and truncation — then ctxgate's own
//! stages: the token budget and archive recall. Every message considered gets a [`Reason`].

pub mod budget;
mod candidates;
pub mod dates;
pub mod offline;
pub mod recall;
mod related;
pub mod render;
pub mod triage;

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use chrono::{TimeZone, Utc};
use serde::Serialize;
use serde_json::json;

use crate::brain::{Completer, Turn};
use crate::config::ConversationSettings;
use crate::domain::{ConversationId, MessageId, Usage};
use crate::store::{Bound, MessageRecord, Store, StoreResult};
pub use budget::TokenCounter;

/// Why a message is, or is not, in the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Among the newest candidates (always kept), or all candidates when selection is skipped.
    Recent,
    /// An older candidate triage chose.
    Relevant,
    /// An older candidate kept because triage did not run or failed (fail open).
    FailOpen,
    /// The message being replied to.
    ReplyParent,
    /// A recent briefing or scheduled result added back.
    Briefing,
    /// A match from the archive beyond the lookback.
    Archive,
    DroppedByBudget,
    DroppedByRecency,
    DroppedByTriage,
    ExcludedBackground,
    ExcludedSystem,
    ExcludedDeleted,
    /// Acknowledgement and progress posts.
    ExcludedProgress,
    /// Addressed to other agents (see the message's audience).
    ExcludedAudience,
}

/// The message a context is built for.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// Its stored id, when stored (context then covers only earlier messages).
    pub id: Option<MessageId>,
    pub text: String,
    /// Its time (unix ms), for time expressions such as "last March".
    pub at_ms: i64,
    /// For a message not stored yet: only messages written at or before this time are context
    /// (`None`: everything stored). A stored message is bounded by its arrival instead.
    pub until_ms: Option<i64>,
    pub reply_to: Option<MessageId>,
    /// For a brain that keeps its own session: what that session was already given.
    pub resume: Option<Resume>,
    /// The agent the context is for: it sees only its own messages and those addressed to it
    /// or to everyone. `None` (people, operators) sees everything.
    pub agent: Option<String>,
}

impl Incoming {
    /// Whether the agent this context is for may see `m`.
    pub fn may_see(&self, m: &MessageRecord) -> bool {
        self.agent
            .as_deref()
            .is_none_or(|a| m.agent.as_deref() == Some(a) || m.audience.includes_agent(a))
    }
}

/// A resumed brain session holds everything up to `after`, and its own answers.
#[derive(Debug, Clone)]
pub struct Resume {
    pub after: MessageId,
    pub agent: String,
}

impl Resume {
    /// Whether the session already has `m`.
    fn has(&self, m: &MessageRecord) -> bool {
        m.id <= self.after
            || (m.role == ctxgate_contract::Role::Assistant
                && m.agent.as_deref() == Some(self.agent.as_str()))
    }
}

/// One message in the context.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub message: MessageRecord,
    pub reason: Reason,
    pub tokens: usize,
    /// The text as the brain sees it (truncated, with actions, or an archive snippet).
    pub text: String,
}

/// A message considered and left out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Left {
    pub id: MessageId,
    pub reason: Reason,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// In conversation order (the order messages arrived).
    pub items: Vec<Item>,
    pub left_out: Vec<Left>,
    pub tokens: usize,
    pub budget: Option<usize>,
    pub triage_usage: Option<Usage>,
    /// Triage was asked but failed open (timeout, error, unusable answer).
    pub triage_failed_open: bool,
    /// What happened along the way (triage failed open, budget exceeded by protected items…).
    pub notes: Vec<String>,
}

impl Selection {
    fn empty() -> Self {
        Self {
            items: Vec::new(),
            left_out: Vec::new(),
            tokens: 0,
            budget: None,
            triage_usage: None,
            triage_failed_open: false,
            notes: Vec::new(),
        }
    }

    pub fn turns(&self) -> Vec<Turn> {
        self.items
            .iter()
            .map(|i| Turn {
                role: i.message.role,
                speaker: render::speaker(&i.message),
                text: i.text.clone(),
                timestamp: Utc
                    .timestamp_millis_opt(i.message.created_at)
                    .single()
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// The explanation stored on the task and shown by the admin API.
    pub fn explain(&self) -> serde_json::Value {
        json!({
            "selected": self.items.iter().map(|i| json!({
                "id": i.message.id,
                "channel_message_id": i.message.channel_message_id,
                "role": i.message.role,
                "speaker": render::speaker(&i.message),
                "reason": i.reason,
                "tokens": i.tokens,
            })).collect::<Vec<_>>(),
            "left_out": self.left_out,
            "tokens": self.tokens,
            "budget": self.budget,
            "notes": self.notes,
        })
    }
}

pub fn turn_of(m: &MessageRecord) -> Turn {
    Turn {
        role: m.role,
        speaker: render::speaker(m),
        text: m.text.clone(),
        timestamp: Utc
            .timestamp_millis_opt(m.created_at)
            .single()
            .unwrap_or_default(),
    }
}

/// The engine; cheap to clone (the tokenizer is shared).
#[derive(Clone, Debug)]
pub struct ContextEngine {
    counter: TokenCounter,
}

/// The reference selection's outcome before budget and recall.
struct Chosen {
    kept: Vec<(MessageRecord, Reason)>,
    left: Vec<Left>,
    triage_usage: Option<Usage>,
    failed_open: bool,
    notes: Vec<String>,
}

impl ContextEngine {
    pub fn new(counter: TokenCounter) -> Self {
        Self { counter }
    }

    pub fn counter(&self) -> &TokenCounter {
        &self.counter
    }

    /// Builds the context of `incoming` in `conversation` (and only from it).
    pub async fn select(
        &self,
        store: &dyn Store,
        settings: &ConversationSettings,
        conversation: ConversationId,
        incoming: &Incoming,
        completer: Option<&dyn Completer>,
    ) -> StoreResult<Selection> {
        if !settings.enabled {
            return Ok(Selection::empty());
        }
        // A stored message bounds its context by arrival order (its id): channel clocks and
        // the gateway's clock need not agree. A message not stored yet bounds it by time.
        let bound = Bound {
            before: incoming.id,
            until_ms: incoming.until_ms.filter(|_| incoming.id.is_none()),
            with_later_answers: incoming.id.is_some(),
        };
        // 1. Candidates: the lookback window minus exclusions, plus recent briefings (both
        // read together: one round trip to the store).
        let (window, background) = store
            .lookback(
                conversation,
                bound,
                settings.lookback_count,
                settings.previous_tasks_count,
            )
            .await?;
        let oldest_in_window = window.first().map(|m| m.id);
        let mut left = Vec::new();
        let mut candidates = Vec::new();
        let new_to_session = |m: &MessageRecord| incoming.resume.as_ref().is_none_or(|r| !r.has(m));
        for m in window.into_iter().filter(|m| new_to_session(m)) {
            if !incoming.may_see(&m) {
                left.push(Left {
                    id: m.id,
                    reason: Reason::ExcludedAudience,
                });
                continue;
            }
            match candidates::exclusion(&m) {
                Some(reason) => left.push(Left { id: m.id, reason }),
                None => candidates.push(m),
            }
        }
        let mut briefings = HashSet::new();
        for b in background {
            if !new_to_session(&b) || !incoming.may_see(&b) {
                continue;
            }
            left.retain(|l| l.id != b.id);
            briefings.insert(b.id);
            candidates.push(b);
        }
        candidates.sort_by_key(|m| m.id);
        candidates.dedup_by_key(|m| m.id);
        // 2. Recency filter.
        for m in candidates::recency(&mut candidates, settings) {
            left.push(Left {
                id: m.id,
                reason: Reason::DroppedByRecency,
            });
        }
        // 3. Reply parent, from anywhere in this conversation.
        let parent = match incoming.reply_to {
            Some(id) => store.get_message(id).await?.filter(|p| {
                p.conversation_id == conversation
                    && p.deleted_at.is_none()
                    && new_to_session(p)
                    && incoming.may_see(p)
            }),
            None => None,
        };
        if let Some(p) = &parent {
            candidates.retain(|c| c.id != p.id);
            left.retain(|l| l.id != p.id);
        }
        // 4–6. Shortcut, guaranteed recent, triage. Should the selection itself fail (a bug),
        // fall back to the guaranteed recent ones only.
        let recent_only: Vec<MessageRecord> = candidates
            .iter()
            .rev()
            .take(settings.always_include_recent)
            .rev()
            .cloned()
            .collect();
        let chosen = match AssertUnwindSafe(
            self.choose(settings, candidates, &briefings, incoming, completer),
        )
        .catch_unwind()
        .await
        {
            Ok(chosen) => chosen,
            Err(_) => {
                tracing::error!("context selection failed; using the newest messages only");
                Chosen {
                    kept: recent_only
                        .into_iter()
                        .map(|m| (m, Reason::Recent))
                        .collect(),
                    left: Vec::new(),
                    triage_usage: None,
                    failed_open: false,
                    notes: vec!["selection failed; fell back to the newest messages".into()],
                }
            }
        };
        left.extend(chosen.left);
        let mut notes = chosen.notes;
        // 7. Assemble chronologically.
        let mut items: Vec<Item> = parent
            .into_iter()
            .map(|p| (p, Reason::ReplyParent))
            .chain(chosen.kept)
            .map(|(m, reason)| self.item(m, reason, settings))
            .collect();
        items.sort_by_key(|i| i.message.id);
        // Budget (ctxgate's own): keep the reply parent and the newest candidates, then the
        // ones triage chose, then — ranked by relevance to the message — the unjudged older
        // candidates and matches from the archive beyond the lookback.
        let budget = (settings.max_context_tokens > 0).then_some(settings.max_context_tokens);
        if let Some(budget) = budget {
            let recall = recall::Recall {
                store,
                counter: &self.counter,
                settings,
                conversation,
                text: &incoming.text,
                at_ms: incoming.at_ms,
                bound,
                incoming,
            };
            // A resumed session has the archive already: no recall then.
            let recall_on = settings.archive_recall && incoming.resume.is_none();
            let fitted = self
                .fit(
                    items,
                    &left,
                    oldest_in_window,
                    recall_on.then_some(&recall),
                    settings,
                    budget,
                )
                .await?;
            items = fitted.items;
            left.extend(fitted.dropped.into_iter().map(|id| Left {
                id,
                reason: Reason::DroppedByBudget,
            }));
            let used: usize = items.iter().map(|i| i.tokens).sum();
            if used > budget {
                notes.push(format!(
                    "the reply parent and newest messages alone need {used} tokens, over the budget of {budget}"
                ));
            }
        }
        Ok(Selection {
            tokens: items.iter().map(|i| i.tokens).sum(),
            items,
            left_out: left,
            budget,
            triage_usage: chosen.triage_usage,
            triage_failed_open: chosen.failed_open,
            notes,
        })
    }

    async fn choose(
        &self,
        settings: &ConversationSettings,
        candidates: Vec<MessageRecord>,
        briefings: &HashSet<MessageId>,
        incoming: &Incoming,
        completer: Option<&dyn Completer>,
    ) -> Chosen {
        let reason_for = |m: &MessageRecord, default: Reason| {
            if briefings.contains(&m.id) {
                Reason::Briefing
            } else {
                default
            }
        };
        let n = candidates.len();
        let mut out = Chosen {
            kept: Vec::new(),
            left: Vec::new(),
            triage_usage: None,
            failed_open: false,
            notes: Vec::new(),
        };
        // 4. Shortcut: include all.
        if !settings.use_selection
            || n <= settings.skip_selection_threshold
            || settings.always_include_recent >= n
        {
            out.kept = candidates
                .into_iter()
                .map(|m| {
                    let r = reason_for(&m, Reason::Recent);
                    (m, r)
                })
                .collect();
            return out;
        }
        // 5. Guaranteed recent; 6. triage of the older ones.
        let split = n - settings.always_include_recent;
        let mut older = candidates;
        let recent = older.split_off(split);
        let verdict = triage::run(
            completer,
            &older,
            &incoming.text,
            settings.context_truncation,
            settings.selection_timeout,
        )
        .await;
        match verdict {
            triage::Verdict::Chosen(ids, usage) => {
                out.triage_usage = Some(usage);
                for (i, m) in older.into_iter().enumerate() {
                    if ids.contains(&i) {
                        let r = reason_for(&m, Reason::Relevant);
                        out.kept.push((m, r));
                    } else {
                        out.left.push(Left {
                            id: m.id,
                            reason: Reason::DroppedByTriage,
                        });
                    }
                }
            }
            triage::Verdict::FailOpen(why, usage) => {
                out.triage_usage = usage;
                out.failed_open = completer.is_some();
                out.notes.push(format!("{why}; every older candidate kept"));
                out.kept.extend(older.into_iter().map(|m| {
                    let r = reason_for(&m, Reason::FailOpen);
                    (m, r)
                }));
            }
        }
        out.kept.extend(recent.into_iter().map(|m| {
            let r = reason_for(&m, Reason::Recent);
            (m, r)
        }));
        out
    }

    fn item(
        &self,
        message: MessageRecord,
        reason: Reason,
        settings: &ConversationSettings,
    ) -> Item {
        let text = render::text(&message, settings.context_truncation);
        let tokens = self.counter.turn(&render::speaker(&message), &text);
        Item {
            message,
            reason,
            tokens,
            text,
        }
    }
}

struct Fitted {
    items: Vec<Item>,
    dropped: Vec<MessageId>,
}

/// Below this many free tokens no archive message is worth rendering.
const MIN_ROOM: usize = 16;

/// A message waiting for its place in the budget.
enum Entry {
    Ready(Item),
    Archive(MessageRecord),
}

impl ContextEngine {
    /// Fills `budget` tokens: protected items first (even over budget), then triage's choices in
    /// order, then — ranked together by relevance to the message (newer first among equals) —
    /// the candidates nobody judged (triage failed open or was absent) and the archive matches,
    /// then neighbours of the recalled matches while room is left.
    async fn fit(
        &self,
        items: Vec<Item>,
        left: &[Left],
        oldest_in_window: Option<MessageId>,
        recall: Option<&recall::Recall<'_>>,
        settings: &ConversationSettings,
        budget: usize,
    ) -> StoreResult<Fitted> {
        let protected: HashSet<MessageId> = newest_recent(&items, settings.always_include_recent)
            .chain(
                items
                    .iter()
                    .filter(|i| i.reason == Reason::ReplyParent)
                    .map(|i| i.message.id),
            )
            .collect();
        let mut query = recall.map(|r| r.query()).unwrap_or_default();
        // Who speaks in the lookback: a question naming one of them is about their messages.
        let speakers: HashSet<String> = items.iter().map(|i| render::speaker(&i.message)).collect();
        query.set_speakers(speakers.iter().map(String::as_str));
        let terms = query.terms();
        let matches = match recall {
            Some(r) => r.matches(&query).await?,
            None => Vec::new(),
        };
        let score: HashMap<MessageId, f64> =
            matches.iter().map(|m| (m.message.id, m.score)).collect();
        let mut taken: HashSet<MessageId> = items
            .iter()
            .map(|i| i.message.id)
            .chain(left.iter().map(|l| l.id))
            .collect();
        let (keep, rest): (Vec<Item>, Vec<Item>) = items
            .into_iter()
            .partition(|i| protected.contains(&i.message.id));
        let (mut chosen, pool): (Vec<Item>, Vec<Item>) =
            rest.into_iter().partition(|i| i.reason == Reason::Relevant);
        // When not all of triage's choices fit, the newer ones stay.
        chosen.reverse();
        // Archive matches: beyond the lookback window only, never a message already decided on.
        // They are rendered (and their tokens counted) only when their turn to be placed comes.
        let mut entries: Vec<(f64, MessageId, Entry)> = pool
            .into_iter()
            .map(|i| {
                let s = score.get(&i.message.id).copied().unwrap_or(0.0);
                (s, i.message.id, Entry::Ready(i))
            })
            .collect();
        for m in matches {
            let beyond = oldest_in_window.is_none_or(|o| m.message.id < o);
            if beyond && taken.insert(m.message.id) {
                entries.push((m.score, m.message.id, Entry::Archive(m.message)));
            }
        }
        entries.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        let rank = |i: &Item| score.get(&i.message.id).copied().unwrap_or(0.0);

        let mut used: usize = keep.iter().map(|i| i.tokens).sum();
        let mut placed = keep;
        let mut dropped = Vec::new();
        for item in chosen {
            if used + item.tokens <= budget {
                used += item.tokens;
                placed.push(item);
            } else {
                dropped.push(item.message.id);
            }
        }
        // Archive matches are cut to snippets small enough for several of them to fit.
        let cap = snippet_cap(settings, budget.saturating_sub(used));
        let mut texts: HashSet<String> = placed.iter().map(|i| same_text(&i.message)).collect();
        for (_, _, entry) in entries {
            let item = match entry {
                Entry::Ready(item) => item,
                // Not worth rendering once the budget is as good as full.
                Entry::Archive(_) if budget.saturating_sub(used) < MIN_ROOM => continue,
                // A repetition of what is already in the context adds nothing.
                Entry::Archive(m) if texts.contains(&same_text(&m)) => continue,
                Entry::Archive(m) => match recall {
                    Some(r) => r.item(m, &terms, cap),
                    None => continue,
                },
            };
            if used + item.tokens <= budget {
                used += item.tokens;
                texts.insert(same_text(&item.message));
                placed.push(item);
            } else if item.reason != Reason::Archive {
                dropped.push(item.message.id);
            }
        }
        // Neighbouring turns of the recalled matches, best match first, while room is left.
        if let Some(recall) = recall.filter(|_| settings.archive_neighbours > 0) {
            let mut recalled: Vec<(f64, MessageId)> = placed
                .iter()
                .filter(|i| i.reason == Reason::Archive)
                .map(|i| (rank(i), i.message.id))
                .collect();
            recalled.sort_by(|a, b| b.0.total_cmp(&a.0));
            for (_, id) in recalled {
                if budget.saturating_sub(used) < MIN_ROOM {
                    break;
                }
                for n in recall.neighbours(id).await? {
                    if !taken.insert(n.id) {
                        continue;
                    }
                    let item = recall.item(n, &terms, cap);
                    if used + item.tokens <= budget {
                        used += item.tokens;
                        placed.push(item);
                    }
                }
            }
        }
        placed.sort_by_key(|i| i.message.id);
        Ok(Fitted {
            items: placed,
            dropped,
        })
    }
}

/// Archive matches are cut to snippets small enough for about this many of them to share the
/// room left after the selection: under a tight budget more distinct matches beat longer ones.
const SNIPPETS_PER_ROOM: usize = 40;

/// Snippets are never cut shorter than this many tokens (about a sentence).
const MIN_SNIPPET: usize = 24;

/// The snippet size for archive matches: `archive_snippet_tokens`, lowered so that `room` holds
/// about `SNIPPETS_PER_ROOM` matches, never below `MIN_SNIPPET` (0 = never cut).
fn snippet_cap(settings: &ConversationSettings, room: usize) -> usize {
    let max = settings.archive_snippet_tokens;
    if max == 0 {
        return 0;
    }
    max.min((room / SNIPPETS_PER_ROOM).max(MIN_SNIPPET))
}

/// A message's text reduced to its words, to spot repetitions.
fn same_text(m: &MessageRecord) -> String {
    recall::words(&m.text).collect::<Vec<_>>().join(" ")
}

/// Ids of the newest `n` candidates (the guaranteed recent ones, briefings among them).
fn newest_recent(items: &[Item], n: usize) -> impl Iterator<Item = MessageId> + '_ {
    items
        .iter()
        .rev()
        .filter(|i| matches!(i.reason, Reason::Recent | Reason::Briefing))
        .take(n)
        .map(|i| i.message.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_shrink_so_that_a_tight_budget_holds_more_matches() {
        let settings = ConversationSettings::default();
        assert_eq!(settings.archive_snippet_tokens, 200);
        // Plenty of room: the configured size.
        assert_eq!(snippet_cap(&settings, 100_000), 200);
        // 2,000 tokens of room: about 40 matches of 50 tokens.
        assert_eq!(snippet_cap(&settings, 2_000), 50);
        // Very little room: never below about a sentence.
        assert_eq!(snippet_cap(&settings, 100), MIN_SNIPPET);
        // 0 = never cut, whatever the room.
        let never = ConversationSettings {
            archive_snippet_tokens: 0,
            ..settings
        };
        assert_eq!(snippet_cap(&never, 100), 0);
    }
}
