//! Archive recall: ranks the conversation's messages beyond the lookback for relevance to the
//! incoming message (full-text BM25 from the store's index, no LLM), re-scores the matches with
//! what the words alone miss (the time the message asks about, who it names), brings each
//! match's neighbouring turns along, and fills the remaining token budget.

use std::collections::HashSet;

use super::budget::TokenCounter;
use super::{Item, Reason, dates, render};
use crate::config::ConversationSettings;
use crate::domain::{ConversationId, MessageId};
use crate::store::{Bound, MessageRecord, Store, StoreResult};

const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "tell",
    "remember",
    "know",
    "said",
    "say",
    "told",
    "think",
    "please",
    "thanks",
    "hi",
    "hello",
    "ok",
    "okay",
    "also",
    "get",
    "got",
    "let",
    "like",
    "make",
    "want",
    "need",
    "one",
    "much",
    "many",
    "way",
    "thing",
    "things",
    "something",
    "anything",
    "really",
    "well",
    "yes",
    "yeah",
    "last",
    "ago",
];

/// Most query terms used (the longest, i.e. the most specific, win).
const MAX_TERMS: usize = 24;

/// The words of `text` worth searching for, lowercased and without stopwords.
pub fn terms(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 2 && !STOPWORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .collect();
    if out.len() > MAX_TERMS {
        out.sort_by_key(|w| std::cmp::Reverse(w.chars().count()));
        out.truncate(MAX_TERMS);
    }
    out
}

/// An FTS5 query matching any of the terms (each quoted, so no operator can be injected).
pub fn fts_query(terms: &[String]) -> Option<String> {
    (!terms.is_empty()).then(|| {
        terms
            .iter()
            .map(|t| format!("\"{}\"", t.replace('"', "")))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

pub struct Recall<'a> {
    pub store: &'a dyn Store,
    pub counter: &'a TokenCounter,
    pub settings: &'a ConversationSettings,
    pub conversation: ConversationId,
    /// The incoming message's text and time (unix ms).
    pub text: &'a str,
    pub at_ms: i64,
    /// The part of the conversation that may be recalled.
    pub bound: Bound,
    /// Whose context this is (audience filtering).
    pub incoming: &'a super::Incoming,
}

/// A scored full-text match.
pub struct Match {
    pub score: f64,
    pub message: MessageRecord,
}

impl Recall<'_> {
    /// The query's search terms.
    pub fn terms(&self) -> Vec<String> {
        terms(self.text)
    }

    /// Full-text matches in the conversation, best first: BM25 from the store's index, doubled
    /// for messages from the time the text asks about, raised when the text names the speaker.
    pub async fn matches(&self, terms: &[String]) -> StoreResult<Vec<Match>> {
        let Some(query) = fts_query(terms) else {
            return Ok(Vec::new());
        };
        let hits = self
            .store
            .archive_search(
                self.conversation,
                &query,
                self.bound,
                self.settings.archive_candidates,
            )
            .await?;
        let window = dates::window(self.text, self.at_ms);
        let lower_text = self.text.to_lowercase();
        let mut scored: Vec<Match> = hits
            .into_iter()
            .filter(|h| eligible(&h.message) && self.incoming.may_see(&h.message))
            .map(|h| {
                let m = h.message;
                let mut score = h.score;
                if let Some((from, to)) = window
                    && (from..to).contains(&m.created_at)
                {
                    score *= 2.0;
                }
                let speaker = render::speaker(&m).to_lowercase();
                if speaker.len() >= 3 && lower_text.contains(&speaker) {
                    score *= 1.2;
                }
                Match { score, message: m }
            })
            .collect();
        scored.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(scored)
    }

    /// The turns around `id` that may join it (eligible, within the recall bound).
    pub async fn neighbours(&self, id: MessageId) -> StoreResult<Vec<MessageRecord>> {
        let near = self
            .store
            .neighbours(self.conversation, id, self.settings.archive_neighbours)
            .await?;
        Ok(near
            .into_iter()
            .filter(|n| {
                eligible(n)
                    && self.incoming.may_see(n)
                    && self.bound.before.is_none_or(|b| n.id < b)
                    && self.bound.until_ms.is_none_or(|u| n.created_at <= u)
            })
            .collect())
    }

    /// An archive message as a context item, cut to a snippet around the match when long.
    pub fn item(&self, m: MessageRecord, terms: &[String]) -> Item {
        let speaker = render::speaker(&m);
        let full = render::text(&m, self.settings.context_truncation);
        let max = self.settings.archive_snippet_tokens;
        let mut text = full;
        let mut tokens = self.counter.turn(&speaker, &text);
        if max > 0 && tokens > max + budget_slack(max) {
            text = snippet(&text, terms, max * 4);
            tokens = self.counter.turn(&speaker, &text);
        }
        Item {
            message: m,
            reason: Reason::Archive,
            tokens,
            text,
        }
    }
}

fn budget_slack(max: usize) -> usize {
    max / 4
}

/// Archive recall never brings back what the interactive selection excludes.
fn eligible(m: &MessageRecord) -> bool {
    super::candidates::exclusion(m).is_none()
}

/// About `chars` characters of `text` around the first occurrence of a term, cut at word
/// boundaries and marked with `…`.
pub fn snippet(text: &str, terms: &[String], chars: usize) -> String {
    // Search a lowercase copy char by char, so positions are char positions in `text` even
    // where lowercasing changes lengths.
    let lower: Vec<String> = text.chars().map(|c| c.to_lowercase().collect()).collect();
    let hit = terms
        .iter()
        .filter_map(|t| {
            let wanted: Vec<char> = t.chars().collect();
            (0..lower.len()).find(|&i| {
                let mut have = lower[i..].iter().flat_map(|s| s.chars());
                wanted.iter().all(|c| have.next() == Some(*c))
            })
        })
        .min()
        .unwrap_or(0);
    let total = lower.len();
    let start = hit.saturating_sub(chars / 3).min(total);
    let end = (start + chars).min(total);
    let mut s: String = text
        .chars()
        .skip(start)
        .take(end.saturating_sub(start))
        .collect();
    if start > 0 {
        if let Some(sp) = s.find(' ') {
            s = s[sp + 1..].to_owned();
        }
        s.insert(0, '…');
    }
    if end < total {
        if let Some(sp) = s.rfind(' ') {
            s.truncate(sp);
        }
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_drop_stopwords_and_dedupe() {
        assert_eq!(
            terms("What did we decide about the Berlin trip? The trip!"),
            vec!["decide", "berlin", "trip"]
        );
        assert_eq!(fts_query(&terms("the of and")), None);
        assert_eq!(
            fts_query(&["a\"b".to_owned(), "c".to_owned()]).unwrap(),
            "\"ab\" OR \"c\""
        );
    }

    #[test]
    fn snippet_centres_on_the_match() {
        let text = format!(
            "{} the password is swordfish {}",
            "filler ".repeat(100),
            "tail ".repeat(100)
        );
        let s = snippet(&text, &["swordfish".to_owned()], 80);
        assert!(s.contains("swordfish"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'));
        assert!(s.chars().count() <= 82);
    }

    #[test]
    fn snippet_survives_case_mappings_that_change_length() {
        let text = format!(
            "{}İİİ the key is here {}",
            "İ ".repeat(300),
            "x ".repeat(300)
        );
        let s = snippet(&text, &["key".to_owned()], 40);
        assert!(s.contains("key"), "{s}");
    }
}
