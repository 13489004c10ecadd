//! Archive recall: ranks the conversation's messages for relevance to the incoming message,
//! offline and with no LLM. Full-text BM25 from the store's index, with the question's own words
//! weighing more than the chat around it, other forms of its words and words meaning the same
//! (WordNet synonyms, see `related`) less; re-scored with what
//! the words alone miss (the time the message asks about, who it names, who wrote the match);
//! messages from the time asked about compete even without a shared word. The same scores rank
//! the lookback candidates nobody judged against the archive (see `fit` in the parent module).
//! Long matches are cut to snippets around the words they share with the message.

use std::collections::{HashMap, HashSet};

use super::budget::TokenCounter;
use super::{Item, Reason, dates, related, render};
use crate::config::ConversationSettings;
use crate::domain::{ConversationId, MessageId};
use crate::store::{Bound, MessageRecord, Store, StoreResult};
use ctxgate_contract::Role;

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
    // What is left of contractions once the apostrophe splits them ("we've", "didn't").
    "re",
    "ve",
    "ll",
    "don",
    "didn",
    "doesn",
    "isn",
    "wasn",
    "aren",
    "weren",
    "haven",
    "hasn",
    "hadn",
    "won",
    "wouldn",
    "couldn",
    "shouldn",
];

/// Most query terms used (the longest, i.e. the most specific, win).
const MAX_TERMS: usize = 24;

/// What the words around a question ("Quick one before my meeting: …") weigh against the
/// question's own words.
const CONTEXT_WEIGHT: f64 = 0.3;

/// Other forms of the query's words (the first `PREFIX_LEN` letters of a word's stem:
/// "allergy" also finds "allergic") count with this weight, beside the index's own stemming.
const PREFIX_WEIGHT: f64 = 0.3;
const PREFIX_LEN: usize = 6;

/// Words related to the question's words in meaning or form (WordNet synonyms of their usual
/// senses, derived forms) count with this weight; at most `RELATED_LIMIT` of them.
const RELATED_WEIGHT: f64 = 0.5;
const RELATED_LIMIT: usize = 48;

/// Matches from the time the message asks about count this many times.
const TIME_BOOST: f64 = 2.0;

/// Messages from the time the message asks about that match none of its words still compete,
/// at this share of the best match's score ("what did I do last weekend?"); at most
/// `TIME_FILL_LIMIT` of them, the latest of the period.
const TIME_FILL: f64 = 0.4;
const TIME_FILL_LIMIT: usize = 60;

/// Matches from a speaker the message names count this many times.
const SPEAKER_BOOST: f64 = 1.2;

/// What people wrote weighs this many times what the bot answered: facts about a person are
/// stated by that person, and the bot's answers restate them at more length.
const USER_WEIGHT: f64 = 1.2;

/// The words of `text` (runs of letters and digits), lowercased.
pub(super) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// The words of `text` worth searching for, lowercased and without stopwords.
pub fn terms(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out: Vec<String> = words(text)
        .filter(|w| w.chars().count() >= 2 && !STOPWORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .collect();
    if out.len() > MAX_TERMS {
        out.sort_by_key(|w| std::cmp::Reverse(w.chars().count()));
        out.truncate(MAX_TERMS);
    }
    out
}

/// A light English stemmer (plurals, -ing, -ed, -ly, a final e, doubled consonants), to tell
/// which words of a message are query words (snippets) and to find other forms of a query word
/// (prefix search). Both sides of a comparison go through this one.
pub fn stem(word: &str) -> String {
    let w = word.to_lowercase();
    let n = w.chars().count();
    // `suffix` off the end, if at least `keep` characters remain.
    let strip = |suffix: &str, keep: usize| -> Option<String> {
        (w.ends_with(suffix) && n >= suffix.chars().count() + keep)
            .then(|| w[..w.len() - suffix.len()].to_owned())
    };
    let mut s = if let Some(s) = strip("ies", 2) {
        s + "y"
    } else if let Some(s) = strip("sses", 1) {
        s + "ss"
    } else if let Some(s) = strip("ing", 3)
        .or_else(|| strip("ed", 3))
        .or_else(|| strip("ly", 3))
    {
        s
    } else if let Some(s) = ["ches", "shes", "xes", "zes"]
        .iter()
        .find_map(|suffix| strip(suffix, 2).map(|s| s + &suffix[..suffix.len() - 2]))
    {
        s
    } else if !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        strip("s", 2).unwrap_or_else(|| w.clone())
    } else {
        w.clone()
    };
    if s.chars().count() > 3 && s.ends_with('e') {
        s.pop();
    }
    let b = s.as_bytes();
    if b.len() > 3
        && b[b.len() - 1] == b[b.len() - 2]
        && b[b.len() - 1].is_ascii_alphabetic()
        && !matches!(b[b.len() - 1], b'l' | b's' | b'z')
    {
        s.pop();
    }
    s
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

/// An FTS5 query matching any word that starts like one of the terms' stems (ASCII words of at
/// least `PREFIX_LEN` letters only: shorter prefixes match too much).
pub fn prefix_query(terms: &[String]) -> Option<String> {
    let mut seen = HashSet::new();
    let prefixes: Vec<String> = terms
        .iter()
        .map(|t| stem(t))
        .filter(|s| s.len() >= PREFIX_LEN && s.chars().all(|c| c.is_ascii_alphabetic()))
        .map(|s| s[..PREFIX_LEN].to_owned())
        .filter(|p| seen.insert(p.clone()))
        .map(|p| format!("\"{p}\" *"))
        .collect();
    (!prefixes.is_empty()).then(|| prefixes.join(" OR "))
}

/// An FTS5 query matching words related to the terms (see [`related`]) that are not forms of
/// the terms themselves.
pub fn related_query(terms: &[String]) -> Option<String> {
    let own: HashSet<String> = terms.iter().map(|t| stem(t)).collect();
    let mut seen = HashSet::new();
    let words: Vec<String> = terms
        .iter()
        .flat_map(|t| related::related(t))
        .filter(|w| !STOPWORDS.contains(w) && !own.contains(&stem(w)))
        .filter(|w| seen.insert(stem(w)))
        .take(RELATED_LIMIT)
        .map(str::to_owned)
        .collect();
    fts_query(&words)
}

/// The words of `text` (lowercased) that start with a capital letter other than at the start of
/// a sentence.
fn proper_nouns(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut sentence_start = true;
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            if !sentence_start && word.chars().next().is_some_and(char::is_uppercase) {
                out.insert(word.to_lowercase());
            }
            word.clear();
            sentence_start = false;
        }
        if matches!(c, '.' | '!' | '?' | ':' | ';' | '\n' | '"' | '(') {
            sentence_start = true;
        }
    }
    out
}

/// The incoming message, analysed for the search.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// The words of what the message asks (its questions; all of it when it asks nothing).
    pub focus: Vec<String>,
    /// The words around the question, weighted lower.
    pub context: Vec<String>,
    /// Every word of the message, lowercased (names of speakers are looked up here).
    words: HashSet<String>,
    /// The time the message asks about, if it names one.
    pub window: Option<(i64, i64)>,
    /// Query words that name someone who speaks in the conversation ("What did Caroline
    /// research?"): they tell whose messages matter more than what the message is about, so
    /// they are searched at the lower weight of the words around a question.
    pub names: Vec<String>,
    /// Words written capitalised inside a sentence ("my friend Rose"): names, not the common
    /// words they spell, so no related words are searched for them.
    proper: HashSet<String>,
}

impl Query {
    pub fn new(text: &str, at_ms: i64) -> Self {
        let all = terms(text);
        // Sentences (a colon ends the preamble of a question too); those ending in '?' are
        // what is asked.
        let mut questions = String::new();
        let mut sentence = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            sentence.push(c);
            let end = match c {
                '.' | '!' | '?' | '\n' => true,
                ':' | ';' => chars.peek().is_none_or(|n| n.is_whitespace()),
                _ => false,
            };
            if end {
                if c == '?' {
                    questions.push_str(&sentence);
                    questions.push(' ');
                }
                sentence.clear();
            }
        }
        let asked = terms(&questions);
        let (focus, context) = if asked.is_empty() || asked.len() == all.len() {
            (all, Vec::new())
        } else {
            let context = all.iter().filter(|t| !asked.contains(t)).cloned().collect();
            (asked, context)
        };
        Self {
            focus,
            context,
            words: words(text).collect(),
            window: dates::window(text, at_ms),
            names: Vec::new(),
            proper: proper_nouns(text),
        }
    }

    /// Moves the query words that are part of a speaker's name (3 letters or more) from the
    /// asked words to `names`.
    pub fn set_speakers<'a>(&mut self, speakers: impl IntoIterator<Item = &'a str>) {
        let parts: HashSet<String> = speakers
            .into_iter()
            .flat_map(words)
            .filter(|w| w.chars().count() >= 3)
            .collect();
        let (names, focus): (Vec<String>, Vec<String>) =
            self.focus.drain(..).partition(|t| parts.contains(t));
        self.focus = focus;
        self.names = names;
    }

    /// The asked words that are not names, whose related words are worth searching for.
    fn common_focus(&self) -> Vec<String> {
        self.focus
            .iter()
            .filter(|t| !self.proper.contains(*t))
            .cloned()
            .collect()
    }

    /// Every search term, the asked ones first.
    pub fn terms(&self) -> Vec<String> {
        self.focus.iter().chain(&self.context).cloned().collect()
    }

    /// Whether the message names `speaker` (every word of the name, as whole words).
    fn names(&self, speaker: &str) -> bool {
        let parts: Vec<String> = words(speaker).collect();
        parts.iter().map(|p| p.chars().count()).sum::<usize>() >= 3
            && parts.iter().all(|p| self.words.contains(p))
    }
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

/// A scored match.
pub struct Match {
    pub score: f64,
    pub message: MessageRecord,
}

/// Best first; the newer first among equals.
fn by_score(matches: &mut [Match]) {
    matches.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.message.id.cmp(&a.message.id))
    });
}

impl Recall<'_> {
    /// The incoming message analysed for the search.
    pub fn query(&self) -> Query {
        Query::new(self.text, self.at_ms)
    }

    /// Adds `weight` times the full-text score of each hit of `fts` to `hits`.
    async fn search(
        &self,
        fts: Option<String>,
        weight: f64,
        hits: &mut HashMap<MessageId, (f64, MessageRecord)>,
    ) -> StoreResult<()> {
        let Some(fts) = fts else {
            return Ok(());
        };
        let found = self
            .store
            .archive_search(
                self.conversation,
                &fts,
                self.bound,
                self.settings.archive_candidates,
            )
            .await?;
        for h in found {
            if eligible(&h.message) && self.incoming.may_see(&h.message) {
                hits.entry(h.message.id)
                    .and_modify(|e| e.0 += weight * h.score)
                    .or_insert((weight * h.score, h.message));
            }
        }
        Ok(())
    }

    /// Matches in the conversation, best first. The score is BM25 from the store's index: the
    /// question's words in full, the words around it, other forms of the words and words
    /// related to the question's in meaning at a lower weight. It is raised for messages from
    /// the time the message asks about, from a speaker it names, and for what people (not the
    /// bot) wrote. Messages from the time asked about that share no word with it join at a
    /// share of the best score.
    pub async fn matches(&self, query: &Query) -> StoreResult<Vec<Match>> {
        let mut hits = HashMap::new();
        self.search(fts_query(&query.focus), 1.0, &mut hits).await?;
        self.search(fts_query(&query.context), CONTEXT_WEIGHT, &mut hits)
            .await?;
        self.search(fts_query(&query.names), CONTEXT_WEIGHT, &mut hits)
            .await?;
        if !hits.is_empty() {
            self.search(prefix_query(&query.terms()), PREFIX_WEIGHT, &mut hits)
                .await?;
        }
        if self.settings.archive_related_words {
            self.search(
                related_query(&query.common_focus()),
                RELATED_WEIGHT,
                &mut hits,
            )
            .await?;
        }
        let mut scored: Vec<Match> = hits
            .into_values()
            .map(|(s, m)| Match {
                score: s * self.weight(query, &m),
                message: m,
            })
            .collect();
        by_score(&mut scored);
        if let Some((from, to)) = query.window {
            let best = scored.first().map_or(1.0, |m| m.score);
            let have: HashSet<MessageId> = scored.iter().map(|m| m.message.id).collect();
            let period = Bound {
                before: self.bound.before,
                until_ms: Some(self.bound.until_ms.map_or(to - 1, |u| u.min(to - 1))),
                with_later_answers: false,
            };
            for m in self
                .store
                .messages_before(self.conversation, period, TIME_FILL_LIMIT)
                .await?
            {
                if m.created_at >= from
                    && !have.contains(&m.id)
                    && eligible(&m)
                    && self.incoming.may_see(&m)
                {
                    let score = TIME_FILL * best * self.weight(&Query::default(), &m);
                    scored.push(Match { score, message: m });
                }
            }
            by_score(&mut scored);
        }
        Ok(scored)
    }

    /// What multiplies a match's full-text score.
    fn weight(&self, query: &Query, m: &MessageRecord) -> f64 {
        let mut w = 1.0;
        if let Some((from, to)) = query.window
            && (from..to).contains(&m.created_at)
        {
            w *= TIME_BOOST;
        }
        if query.names(&render::speaker(m)) {
            w *= SPEAKER_BOOST;
        }
        if m.role == Role::User {
            w *= USER_WEIGHT;
        }
        w
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

    /// An archive message as a context item, cut to a snippet of about `max` tokens around the
    /// matched words when it is longer (0 = never cut).
    pub fn item(&self, m: MessageRecord, terms: &[String], max: usize) -> Item {
        let speaker = render::speaker(&m);
        let full = render::text(&m, self.settings.context_truncation);
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

/// About `chars` characters of `text` where most of the query's words are (the earliest such
/// place among equals; the start when none is there), cut at word boundaries and marked with `…`.
pub fn snippet(text: &str, terms: &[String], chars: usize) -> String {
    let letters: Vec<char> = text.chars().collect();
    let total = letters.len();
    // Char positions of the words that have the stem of a term.
    let wanted: HashSet<String> = terms.iter().map(|t| stem(t)).collect();
    let mut hits = Vec::new();
    let mut i = 0;
    while i < total {
        if letters[i].is_alphanumeric() {
            let start = i;
            while i < total && letters[i].is_alphanumeric() {
                i += 1;
            }
            let word: String = letters[start..i].iter().collect();
            if wanted.contains(&stem(&word)) {
                hits.push(start);
            }
        } else {
            i += 1;
        }
    }
    // Each hit could open a window a third of the way in; take the one covering most hits.
    let lead = chars / 3;
    let start = hits
        .iter()
        .map(|&h| {
            let from = h.saturating_sub(lead);
            let n = hits
                .iter()
                .filter(|&&x| x >= from && x < from + chars)
                .count();
            (n, std::cmp::Reverse(from))
        })
        .max()
        .map_or(0, |(_, std::cmp::Reverse(from))| from)
        .min(total);
    let end = (start + chars).min(total);
    let mut s: String = letters[start..end].iter().collect();
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

    #[test]
    fn contractions_leave_no_terms_behind() {
        assert_eq!(
            terms("We've said we'd go, didn't we? They're sure it won't rain"),
            vec!["go", "sure", "rain"]
        );
    }

    #[test]
    fn the_stemmer_joins_word_forms() {
        for (a, b) in [
            ("trips", "trip"),
            ("cycling", "cycle"),
            ("cycled", "cycles"),
            ("hobbies", "hobby"),
            ("running", "run"),
            ("churches", "church"),
            ("moved", "move"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} / {b}");
        }
        // Words that only look inflected keep their ending.
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("glass"), "glass");
        assert_ne!(stem("sing"), stem("s"));
    }

    #[test]
    fn a_question_outweighs_the_chat_around_it() {
        let q = Query::new(
            "Quick question before my meeting: which countries have I visited?",
            0,
        );
        assert_eq!(q.focus, vec!["countries", "visited"]);
        assert_eq!(q.context, vec!["quick", "question", "meeting"]);
        let q = Query::new("Which countries have I visited? A friend asked.", 0);
        assert_eq!(q.focus, vec!["countries", "visited"]);
        assert_eq!(q.context, vec!["friend", "asked"]);
        // No question, or nothing but the question: every word counts fully.
        let q = Query::new("Note the meeting moved to Friday.", 0);
        assert_eq!(q.focus, vec!["note", "meeting", "moved", "friday"]);
        assert!(q.context.is_empty());
        let q = Query::new("At 10:30 what was the room?", 0);
        assert_eq!(q.focus, vec!["10", "30", "room"]);
        assert!(q.context.is_empty(), "a colon inside a time ends nothing");
    }

    #[test]
    fn related_words_leave_out_the_terms_own_forms_and_stopwords() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let q = related_query(&words(&["bicycle", "bike"])).unwrap();
        // "bike" is searched for itself; "bicycles" would be a form of "bicycle".
        assert!(!q.contains("\"bike\"") && !q.contains("\"bicycle\""), "{q}");
        assert!(q.contains("\"pedal\""), "{q}");
        // Words with too many senses to tell ("take", "time") bring nothing.
        assert_eq!(related_query(&words(&["take", "time"])), None);
        assert_eq!(related_query(&[]), None);
    }

    #[test]
    fn a_speakers_name_is_searched_at_the_lower_weight() {
        let mut q = Query::new("When did Caroline go to the support group?", 0);
        q.set_speakers(["Caroline Lee", "Melanie", "al"]);
        assert_eq!(q.names, vec!["caroline"]);
        assert_eq!(q.focus, vec!["go", "support", "group"]);
        assert_eq!(
            q.terms(),
            vec!["go", "support", "group"],
            "names leave snippets alone"
        );
        // Nobody of that name speaks: it stays a word like any other.
        let mut q = Query::new("Where does Rose live?", 0);
        q.set_speakers(["Melanie"]);
        assert_eq!(q.focus, vec!["rose", "live"]);
        assert!(q.names.is_empty());
    }

    #[test]
    fn capitalised_words_inside_a_sentence_are_names() {
        let q = Query::new(
            "Where did John move? Ask Rose: she knows. Bob's car, too.",
            0,
        );
        let mut got: Vec<&String> = q.proper.iter().collect();
        got.sort();
        // "Where", "Ask" and "Bob" open sentences; a colon ends one too.
        assert_eq!(got, vec!["john", "rose"]);
    }

    #[test]
    fn speakers_are_named_by_whole_words_only() {
        let q = Query::new("What did Ann Lee say about the annual plan?", 0);
        assert!(q.names("Ann Lee"));
        assert!(q.names("ann"));
        assert!(!q.names("Anna"));
        assert!(!q.names("al"), "too short to tell");
        assert!(!Query::new("the annual plan", 0).names("ann"));
    }

    #[test]
    fn prefix_queries_only_for_long_plain_words() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            prefix_query(&words(&[
                "allergy",
                "car",
                "allergies",
                "café",
                "ab\"cdefg"
            ])),
            Some("\"allerg\" *".to_owned())
        );
        assert_eq!(prefix_query(&words(&["car", "bike"])), None);
    }

    #[test]
    fn snippet_goes_where_most_of_the_words_are() {
        let text = format!(
            "the key word appears once here {} then key and door and shed together {}",
            "filler ".repeat(60),
            "tail ".repeat(60)
        );
        let terms = ["key", "door", "shed"].map(String::from);
        let s = snippet(&text, &terms, 80);
        assert!(s.contains("key and door and shed"), "{s}");
        // Word forms count: "sheds" is a match for "shed".
        let s = snippet(
            &format!("{} two sheds {}", "x ".repeat(100), "y ".repeat(100)),
            &terms,
            40,
        );
        assert!(s.contains("sheds"), "{s}");
        // No match: the start.
        assert!(snippet(&"z ".repeat(100), &terms, 20).starts_with("z z"));
    }
}
