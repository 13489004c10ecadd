//! The context engine against a real SQLite store: every setting of the reference selection,
//! fail-open triage, the budget, archive recall, and isolation between conversations.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{TimeZone, Utc};
use ctxgate::brain::{BrainError, Completer, ScriptedCompleter};
use ctxgate::config::{ConversationSettings, StoreSettings, Tokenizer};
use ctxgate::context::{ContextEngine, Incoming, Reason, Selection, TokenCounter};
use ctxgate::domain::{ConversationId, MessageId, Usage};
use ctxgate::store::sqlite::SqliteStore;
use ctxgate::store::{Bound, MessageRecord, Store};
use ctxgate_contract::{
    Audience, EventKind, InboundEvent, InboundMessage, MessageKind, Role, SenderKind, SourceType,
};
use serde_json::Value;

pub const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const MINUTE: i64 = 60_000;

/// One message of a test history.
#[derive(Clone, Debug)]
pub struct M {
    pub conv: &'static str,
    pub id: String,
    pub role: Role,
    pub text: String,
    pub at: i64,
    pub kind: MessageKind,
    pub source: SourceType,
    pub reply_to: Option<String>,
    pub deleted: bool,
    pub audience: Audience,
    /// For assistant messages: the agent that wrote it.
    pub agent: Option<String>,
}

pub fn m(conv: &'static str, n: usize, role: Role, text: &str) -> M {
    M {
        conv,
        id: format!("{conv}-{n}"),
        role,
        text: text.to_owned(),
        at: T0 + n as i64 * MINUTE,
        kind: MessageKind::Message,
        source: SourceType::Webhook,
        reply_to: None,
        deleted: false,
        audience: Audience::Everyone,
        agent: None,
    }
}

/// A history of `n` alternating user/assistant messages in `conv`.
pub fn chat(conv: &'static str, n: usize) -> Vec<M> {
    (0..n)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            m(conv, i, role, &format!("{conv} message number {i}"))
        })
        .collect()
}

pub struct Fixture {
    pub store: SqliteStore,
    pub engine: ContextEngine,
}

impl Fixture {
    pub async fn new(history: &[M]) -> Fixture {
        let store = SqliteStore::connect(&StoreSettings {
            url: "sqlite::memory:".into(),
            ..StoreSettings::default()
        })
        .await
        .unwrap();
        store.migrate().await.unwrap();
        let mut events = Vec::new();
        for h in history {
            events.push(InboundEvent {
                channel: "test".into(),
                conversation: h.conv.into(),
                kind: EventKind::Posted(InboundMessage {
                    kind: h.kind,
                    channel_message_id: h.id.clone(),
                    sender_id: if h.role == Role::User {
                        "ann".into()
                    } else {
                        "bot".into()
                    },
                    sender_name: None,
                    sender_kind: SenderKind::User,
                    role: h.role,
                    text: h.text.clone(),
                    timestamp: Utc.timestamp_millis_opt(h.at).unwrap(),
                    reply_to: h.reply_to.clone(),
                    source_type: h.source,
                    trigger: false,
                    agent: h.agent.clone(),
                    audience: h.audience.clone(),
                    meta: Value::Null,
                }),
                cursor: None,
            });
            if h.deleted {
                events.push(InboundEvent {
                    channel: "test".into(),
                    conversation: h.conv.into(),
                    kind: EventKind::Deleted {
                        channel_message_id: h.id.clone(),
                        at: Utc.timestamp_millis_opt(h.at).unwrap(),
                    },
                    cursor: None,
                });
            }
        }
        store.ingest_batch(&events, T0).await.unwrap();
        let engine = ContextEngine::new(TokenCounter::new(Tokenizer::Cl100kBase).unwrap());
        Fixture { store, engine }
    }

    pub async fn conv(&self, name: &str) -> ConversationId {
        self.store
            .find_conversation("test", name)
            .await
            .unwrap()
            .unwrap()
            .id
    }

    pub async fn msg(&self, conv: &str, id: &str) -> MessageRecord {
        let c = self.conv(conv).await;
        self.store.find_message(c, id).await.unwrap().unwrap()
    }

    /// Selects for a new message in `conv` after everything stored.
    pub async fn select(
        &self,
        conv: &str,
        text: &str,
        reply_to: Option<MessageId>,
        settings: &ConversationSettings,
        completer: Option<&dyn Completer>,
    ) -> Selection {
        let c = self.conv(conv).await;
        let incoming = Incoming {
            id: None,
            text: text.into(),
            at_ms: T0,
            until_ms: None,
            reply_to,
            resume: None,
            agent: None,
        };
        self.engine
            .select(&self.store, settings, c, &incoming, completer)
            .await
            .unwrap()
    }
}

fn ids(s: &Selection) -> Vec<String> {
    s.items
        .iter()
        .map(|i| i.message.channel_message_id.clone())
        .collect()
}

fn reasons(s: &Selection) -> Vec<(String, Reason)> {
    s.items
        .iter()
        .map(|i| (i.message.channel_message_id.clone(), i.reason))
        .collect()
}

fn left(s: &Selection, reason: Reason) -> usize {
    s.left_out.iter().filter(|l| l.reason == reason).count()
}

/// The reference defaults without ctxgate's budget and recall.
pub fn reference() -> ConversationSettings {
    ConversationSettings {
        max_context_tokens: 0,
        ..ConversationSettings::default()
    }
}

fn names(conv: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{conv}-{i}")).collect()
}

#[tokio::test]
async fn without_a_completer_the_lookback_is_kept_whole_and_in_order() {
    let f = Fixture::new(&chat("a", 40)).await;
    let s = f.select("a", "next", None, &reference(), None).await;
    assert_eq!(ids(&s), names("a", 15..40));
    // The newest 5 are recent; the 20 older ones were kept because triage could not run.
    assert!(s.items[20..].iter().all(|i| i.reason == Reason::Recent));
    assert!(s.items[..20].iter().all(|i| i.reason == Reason::FailOpen));
    assert!(s.notes.iter().any(|n| n.contains("no completer")));
}

#[tokio::test]
async fn exclusions_and_briefings_added_back() {
    let mut h = chat("a", 12);
    h[2].deleted = true;
    h[3].kind = MessageKind::Ack;
    h[4].role = Role::System;
    for (i, n) in [5usize, 6, 7, 8, 9].iter().enumerate() {
        h[*n].role = Role::Assistant;
        h[*n].source = if i % 2 == 0 {
            SourceType::Briefing
        } else {
            SourceType::Scheduled
        };
    }
    let f = Fixture::new(&h).await;
    let settings = ConversationSettings {
        use_selection: false,
        ..reference()
    };
    let s = f
        .select(
            "a",
            "tell me more about the second item",
            None,
            &settings,
            None,
        )
        .await;
    assert_eq!(
        reasons(&s),
        vec![
            ("a-0".into(), Reason::Recent),
            ("a-1".into(), Reason::Recent),
            ("a-7".into(), Reason::Briefing),
            ("a-8".into(), Reason::Briefing),
            ("a-9".into(), Reason::Briefing),
            ("a-10".into(), Reason::Recent),
            ("a-11".into(), Reason::Recent),
        ]
    );
    assert_eq!(left(&s, Reason::ExcludedDeleted), 1);
    assert_eq!(left(&s, Reason::ExcludedProgress), 1);
    assert_eq!(left(&s, Reason::ExcludedSystem), 1);
    assert_eq!(
        left(&s, Reason::ExcludedBackground),
        2,
        "only the newest 3 results come back"
    );
}

#[tokio::test]
async fn recency_window_is_measured_from_the_newest_candidate_with_a_floor() {
    // 20 messages one hour apart, the last one a week ago: "now" does not matter.
    let h: Vec<M> = (0..20)
        .map(|i| M {
            at: T0 + i as i64 * 3_600_000,
            ..m("a", i, Role::User, "x")
        })
        .collect();
    let f = Fixture::new(&h).await;
    let settings = ConversationSettings {
        context_recency_hours: 3,
        context_min_messages: 4,
        use_selection: false,
        ..reference()
    };
    let s = f.select("a", "q", None, &settings, None).await;
    // Within 3 h of the newest (hours 16..19) = 4 messages, the floor is also 4.
    assert_eq!(ids(&s), names("a", 16..20));
    assert_eq!(left(&s, Reason::DroppedByRecency), 16);

    let settings = ConversationSettings {
        context_min_messages: 8,
        ..settings
    };
    let s = f.select("a", "q", None, &settings, None).await;
    assert_eq!(ids(&s), names("a", 12..20), "the floor keeps 8");

    // Not more candidates than the floor: no filtering at all.
    let settings = ConversationSettings {
        context_min_messages: 25,
        ..settings
    };
    assert_eq!(
        f.select("a", "q", None, &settings, None).await.items.len(),
        20
    );
}

#[tokio::test]
async fn the_reply_parent_is_kept_even_far_outside_the_lookback_but_never_from_another_conversation()
 {
    let mut h = chat("a", 60);
    h.extend(chat("b", 5));
    let f = Fixture::new(&h).await;
    let parent = f.msg("a", "a-3").await;
    let s = f
        .select("a", "about that", Some(parent.id), &reference(), None)
        .await;
    assert_eq!(s.items[0].message.channel_message_id, "a-3");
    assert_eq!(s.items[0].reason, Reason::ReplyParent);
    assert_eq!(s.items.len(), 26);

    let foreign = f.msg("b", "b-1").await;
    let s = f
        .select("a", "about that", Some(foreign.id), &reference(), None)
        .await;
    assert!(
        s.items
            .iter()
            .all(|i| i.message.conversation_id == parent.conversation_id)
    );
    assert_eq!(s.items.len(), 25);
}

#[tokio::test]
async fn shortcut_cases_include_everything_without_triage() {
    let completer = Arc::new(ScriptedCompleter::default());
    let f = Fixture::new(&chat("a", 10)).await;
    // Few candidates.
    let few = Fixture::new(&chat("a", 3)).await;
    let s = few
        .select("a", "q", None, &reference(), Some(completer.as_ref()))
        .await;
    assert_eq!(s.items.len(), 3);
    // Selection off.
    let off = ConversationSettings {
        use_selection: false,
        ..reference()
    };
    assert_eq!(
        f.select("a", "q", None, &off, Some(completer.as_ref()))
            .await
            .items
            .len(),
        10
    );
    // always_include_recent covers all candidates.
    let wide = ConversationSettings {
        always_include_recent: 10,
        ..reference()
    };
    assert_eq!(
        f.select("a", "q", None, &wide, Some(completer.as_ref()))
            .await
            .items
            .len(),
        10
    );
    assert!(
        completer.prompts().is_empty(),
        "no triage call in a shortcut"
    );
}

#[tokio::test]
async fn triage_keeps_the_chosen_older_ones_and_records_usage() {
    let completer = Arc::new(ScriptedCompleter::default());
    completer.answer(Ok("```json\n{\"relevant\": [2, 4, 99]}\n```"));
    let f = Fixture::new(&chat("a", 10)).await;
    let s = f
        .select(
            "a",
            "what was message two?",
            None,
            &reference(),
            Some(completer.as_ref()),
        )
        .await;
    // Older = a-0..a-4 (numbered 1..5); chosen 2 and 4 = a-1, a-3; 99 is ignored.
    assert_eq!(
        reasons(&s),
        vec![
            ("a-1".into(), Reason::Relevant),
            ("a-3".into(), Reason::Relevant),
            ("a-5".into(), Reason::Recent),
            ("a-6".into(), Reason::Recent),
            ("a-7".into(), Reason::Recent),
            ("a-8".into(), Reason::Recent),
            ("a-9".into(), Reason::Recent),
        ]
    );
    assert_eq!(left(&s, Reason::DroppedByTriage), 3);
    assert_eq!(
        s.triage_usage,
        Some(Usage {
            prompt_tokens: 100,
            completion_tokens: 7
        })
    );
    let prompt = &completer.prompts()[0];
    assert!(
        prompt.contains("[1] 2026-01-01 00:00 ann: a message number 0"),
        "{prompt}"
    );
    assert!(prompt.contains("[5] "));
    assert!(!prompt.contains("[6] "), "recent ones are not triaged");
    assert!(prompt.contains("New message: what was message two?"));
}

struct Hang;

#[async_trait]
impl Completer for Hang {
    async fn complete(&self, _: &str) -> Result<(String, Usage), BrainError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn triage_fails_open_on_timeout_error_and_garbage() {
    let f = Fixture::new(&chat("a", 10)).await;
    let quick = ConversationSettings {
        selection_timeout: Duration::from_millis(50),
        ..reference()
    };
    let s = f.select("a", "q", None, &quick, Some(&Hang)).await;
    assert_eq!(s.items.len(), 10);
    assert!(s.notes[0].contains("timed out"), "{:?}", s.notes);

    let completer = ScriptedCompleter::default();
    completer.answer(Err(BrainError::Transient {
        message: "503".into(),
        retry_after: None,
    }));
    completer.answer(Ok("I think messages two and four."));
    completer.answer(Ok("{\"relevant\": []}"));
    let s = f
        .select("a", "q", None, &reference(), Some(&completer))
        .await;
    assert_eq!(s.items.len(), 10);
    assert!(s.notes[0].contains("503"));
    let s = f
        .select("a", "q", None, &reference(), Some(&completer))
        .await;
    assert_eq!(s.items.len(), 10);
    assert!(s.items[..5].iter().all(|i| i.reason == Reason::FailOpen));
    assert_eq!(
        s.triage_usage.map(|u| u.completion_tokens),
        Some(7),
        "usage of a useless answer still counts"
    );
    // A usable empty answer is not a failure: only the recent ones stay.
    let s = f
        .select("a", "q", None, &reference(), Some(&completer))
        .await;
    assert_eq!(ids(&s), names("a", 5..10));
}

#[tokio::test]
async fn assistant_text_is_truncated_to_context_truncation() {
    let f = Fixture::new(&chat("a", 4)).await;
    let settings = ConversationSettings {
        context_truncation: 6,
        ..reference()
    };
    let s = f.select("a", "q", None, &settings, None).await;
    let texts: Vec<&str> = s.items.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "a message number 0",
            "a mess…",
            "a message number 2",
            "a mess…"
        ]
    );
}

#[tokio::test]
async fn the_budget_drops_older_first_and_never_the_parent_or_the_newest() {
    let f = Fixture::new(&chat("a", 30)).await;
    let parent = f.msg("a", "a-0").await;
    let one = f.engine.counter().turn("ann", "a message number 10");
    let settings = ConversationSettings {
        max_context_tokens: one * 8,
        archive_recall: false,
        ..reference()
    };
    let s = f.select("a", "q", Some(parent.id), &settings, None).await;
    assert!(s.tokens <= one * 8, "{} > {}", s.tokens, one * 8);
    let got = ids(&s);
    assert_eq!(got[0], "a-0", "reply parent kept");
    assert!(got.ends_with(&names("a", 25..30)), "newest kept: {got:?}");
    // What went were the oldest fail-open ones.
    assert!(left(&s, Reason::DroppedByBudget) >= 17);
    assert!(!got.contains(&"a-5".to_owned()));

    // A budget smaller than the protected messages keeps them anyway and says so.
    let tiny = ConversationSettings {
        max_context_tokens: 5,
        ..settings
    };
    let s = f.select("a", "q", Some(parent.id), &tiny, None).await;
    assert_eq!(s.items.len(), 6);
    assert!(s.notes.iter().any(|n| n.contains("over the budget")));
}

#[tokio::test]
async fn archive_recall_finds_old_facts_in_this_conversation_only() {
    let mut h = chat("a", 300);
    h[10].text = "By the way, the wifi password at the cabin is swordfish42.".into();
    h[11].text = "Noted, I will remember the cabin wifi password.".into();
    h[200].text = "We should repaint the cabin next summer.".into();
    let mut other = chat("b", 20);
    other[3].text = "The wifi password at my office is hunter2.".into();
    h.extend(other);
    let f = Fixture::new(&h).await;
    let settings = ConversationSettings {
        max_context_tokens: 2000,
        ..reference()
    };
    let s = f
        .select(
            "a",
            "What was the wifi password for the cabin?",
            None,
            &settings,
            None,
        )
        .await;
    let got = reasons(&s);
    assert!(got.contains(&("a-10".into(), Reason::Archive)), "{got:?}");
    assert!(
        got.contains(&("a-11".into(), Reason::Archive)),
        "neighbour comes along"
    );
    assert!(s.tokens <= 2000);
    let a = f.conv("a").await;
    assert!(s.items.iter().all(|i| i.message.conversation_id == a));
    // Recall reaches only beyond the lookback and never repeats a candidate.
    let mut seen = std::collections::HashSet::new();
    assert!(s.items.iter().all(|i| seen.insert(i.message.id)));
    // Chronological.
    assert!(
        s.items
            .windows(2)
            .all(|w| w[0].message.id < w[1].message.id)
    );
}

#[tokio::test]
async fn archive_recall_finds_what_was_said_in_other_words() {
    // The question shares no word with the fact: "bicycle" is "bike", "employer" is "employ".
    let mut h = chat("a", 300);
    h[10].text = "Finally picked up my new bike today, a blue Trek with mudguards.".into();
    h[40].text = "They employ me as a night nurse at St Mary's now.".into();
    let f = Fixture::new(&h).await;
    let on = ConversationSettings {
        max_context_tokens: 2000,
        ..reference()
    };
    let question = "Which bicycle did I choose in the end, and who is my employer?";
    let s = f.select("a", question, None, &on, None).await;
    let got = reasons(&s);
    assert!(got.contains(&("a-10".into(), Reason::Archive)), "{got:?}");
    assert!(got.contains(&("a-40".into(), Reason::Archive)), "{got:?}");
    // Without related words the same question finds neither.
    let off = ConversationSettings {
        archive_related_words: false,
        ..on
    };
    let s = f.select("a", question, None, &off, None).await;
    let got = ids(&s);
    assert!(
        !got.contains(&"a-10".to_owned()) && !got.contains(&"a-40".to_owned()),
        "{got:?}"
    );
}

#[tokio::test]
async fn a_name_in_the_question_brings_no_words_related_to_what_it_spells() {
    // "John" is a name here, not WordNet's "john" (a toilet): the bathroom turn stays out.
    let mut h = chat("a", 300);
    h[10].text = "The bathroom tiles finally got replaced today.".into();
    let f = Fixture::new(&h).await;
    let settings = ConversationSettings {
        max_context_tokens: 2000,
        ..reference()
    };
    let s = f
        .select(
            "a",
            "Where did my colleague John move to?",
            None,
            &settings,
            None,
        )
        .await;
    assert!(!ids(&s).contains(&"a-10".to_owned()), "{:?}", reasons(&s));
    // The same word, not capitalised, is the common noun.
    let s = f
        .select(
            "a",
            "where did my colleague's john go?",
            None,
            &settings,
            None,
        )
        .await;
    assert!(ids(&s).contains(&"a-10".to_owned()), "{:?}", reasons(&s));
}

#[tokio::test]
async fn the_stored_message_bounds_the_context_by_arrival() {
    let f = Fixture::new(&chat("a", 10)).await;
    let a = f.conv("a").await;
    let fifth = f.msg("a", "a-5").await;
    let incoming = Incoming {
        id: Some(fifth.id),
        text: "q".into(),
        at_ms: 0,
        until_ms: Some(0),
        reply_to: None,
        resume: None,
        agent: None,
    };
    let s = f
        .engine
        .select(&f.store, &reference(), a, &incoming, None)
        .await
        .unwrap();
    assert_eq!(ids(&s), names("a", 0..5));
    let all = f.store.messages_before(a, Bound::all(), 100).await.unwrap();
    assert_eq!(all.len(), 10);
}

struct Panics;

#[async_trait]
impl Completer for Panics {
    async fn complete(&self, _: &str) -> Result<(String, Usage), BrainError> {
        panic!("a bug inside selection")
    }
}

#[tokio::test]
async fn a_fault_inside_selection_falls_back_to_the_guaranteed_recent() {
    let f = Fixture::new(&chat("a", 12)).await;
    let s = f.select("a", "q", None, &reference(), Some(&Panics)).await;
    assert_eq!(ids(&s), names("a", 7..12));
    assert!(s.items.iter().all(|i| i.reason == Reason::Recent));
    assert!(s.notes[0].contains("fell back"));
}

#[tokio::test]
async fn the_archive_index_follows_edits_and_deletions() {
    let mut h = chat("a", 100);
    h[10].text = "our boat is called Nautilus".into();
    h[20].text = "the Nautilus needs new sails".into();
    let f = Fixture::new(&h).await;
    let budget = ConversationSettings {
        max_context_tokens: 500,
        ..reference()
    };
    let found = |s: &Selection| {
        s.items
            .iter()
            .filter(|i| i.reason == Reason::Archive)
            .map(|i| i.text.clone())
            .collect::<Vec<_>>()
    };
    let s = f.select("a", "Nautilus?", None, &budget, None).await;
    assert!(
        found(&s).contains(&"our boat is called Nautilus".to_owned()),
        "{:?}",
        found(&s)
    );
    // Edit one (already indexed) and delete the other.
    let at = Utc.timestamp_millis_opt(T0).unwrap();
    for kind in [
        EventKind::Edited {
            channel_message_id: "a-10".into(),
            text: "our boat is called Orca".into(),
            at,
        },
        EventKind::Deleted {
            channel_message_id: "a-20".into(),
            at,
        },
    ] {
        let event = InboundEvent {
            channel: "test".into(),
            conversation: "a".into(),
            kind,
            cursor: None,
        };
        f.store.ingest(&event, None, T0).await.unwrap();
    }
    let s = f.select("a", "Nautilus?", None, &budget, None).await;
    assert!(
        found(&s).iter().all(|t| !t.contains("Nautilus")),
        "{:?}",
        found(&s)
    );
    let s = f.select("a", "Orca?", None, &budget, None).await;
    assert!(found(&s).contains(&"our boat is called Orca".to_owned()));
}

/// The tokens `f` counts for message `n` of a `chat` history in `conv`.
fn cost(f: &Fixture, h: &[M], n: usize) -> usize {
    let speaker = if h[n].role == Role::User {
        "ann"
    } else {
        "bot"
    };
    f.engine.counter().turn(speaker, &h[n].text)
}

#[tokio::test]
async fn under_a_tight_budget_unjudged_lookback_messages_compete_with_the_archive_on_relevance() {
    // 60 messages: the lookback is a-35..a-59, the guaranteed recent a-55..a-59; the fact that
    // answers the question is far back in the archive, and one older lookback message is on
    // the subject too. No completer, so the other lookback messages are kept only by failing
    // open: under a tight budget they must not win by recency alone.
    let mut h = chat("a", 60);
    h[10].text = "The spare key to the garden shed is under the blue flowerpot.".into();
    h[40].text = "Did anyone see where the shed key went?".into();
    let f = Fixture::new(&h).await;
    let parent = f.msg("a", "a-37").await;
    let protected: usize = (55..60).map(|n| cost(&f, &h, n)).sum::<usize>() + cost(&f, &h, 37);
    // Room for the two relevant messages and a little more, far from all 19 unjudged ones.
    let budget = protected + cost(&f, &h, 10) + cost(&f, &h, 40) + 2 * cost(&f, &h, 50);
    let all_lookback: usize = (35..60).map(|n| cost(&f, &h, n)).sum();
    assert!(
        budget < all_lookback,
        "the test needs a budget the lookback overflows"
    );
    let settings = ConversationSettings {
        max_context_tokens: budget,
        archive_neighbours: 0,
        ..reference()
    };
    let s = f
        .select(
            "a",
            "Where is the spare key for the shed?",
            Some(parent.id),
            &settings,
            None,
        )
        .await;
    let got = reasons(&s);
    assert!(s.tokens <= budget, "{} > {budget}", s.tokens);
    assert!(got.contains(&("a-10".into(), Reason::Archive)), "{got:?}");
    assert!(got.contains(&("a-40".into(), Reason::FailOpen)), "{got:?}");
    assert!(
        got.contains(&("a-37".into(), Reason::ReplyParent)),
        "{got:?}"
    );
    for n in 55..60 {
        assert!(got.contains(&(format!("a-{n}"), Reason::Recent)), "{got:?}");
    }
    // The unjudged messages off the subject gave way, and say so.
    let off_subject_kept = got.iter().filter(|(_, r)| *r == Reason::FailOpen).count();
    assert!(off_subject_kept <= 3, "{got:?}");
    assert!(left(&s, Reason::DroppedByBudget) >= 15, "{:?}", s.left_out);
    assert!(
        s.left_out
            .iter()
            .filter(|l| l.reason == Reason::DroppedByBudget)
            .all(|l| l.id != parent.id),
        "the reply parent is never dropped"
    );
}

#[tokio::test]
async fn the_guaranteed_recent_and_the_reply_parent_stay_even_when_the_archive_matches_better() {
    let mut h = chat("a", 60);
    for n in [3, 6, 9, 12] {
        h[n].text = format!("The shed key is under the flowerpot, note {n}.");
    }
    let f = Fixture::new(&h).await;
    let parent = f.msg("a", "a-20").await;
    // Less than the protected messages need: they are kept anyway, and nothing else is.
    let settings = ConversationSettings {
        max_context_tokens: cost(&f, &h, 59),
        ..reference()
    };
    let s = f
        .select(
            "a",
            "Where is the shed key?",
            Some(parent.id),
            &settings,
            None,
        )
        .await;
    assert_eq!(
        reasons(&s),
        std::iter::once(("a-20".to_owned(), Reason::ReplyParent))
            .chain((55..60).map(|n| (format!("a-{n}"), Reason::Recent)))
            .collect::<Vec<_>>()
    );
    assert!(s.notes.iter().any(|n| n.contains("over the budget")));
}

#[tokio::test]
async fn when_everything_fits_the_reference_selection_is_unchanged() {
    let mut h = chat("a", 60);
    h[4].text = "The spare key to the garden shed is under the blue flowerpot.".into();
    let f = Fixture::new(&h).await;
    let question = "Where is the spare key for the shed?";
    let plain = f.select("a", question, None, &reference(), None).await;
    let roomy = ConversationSettings {
        max_context_tokens: 100_000,
        ..reference()
    };
    let s = f.select("a", question, None, &roomy, None).await;
    let kept: Vec<(String, Reason)> = reasons(&s)
        .into_iter()
        .filter(|(_, r)| *r != Reason::Archive)
        .collect();
    assert_eq!(
        kept,
        reasons(&plain),
        "every lookback message, same reasons"
    );
    assert_eq!(left(&s, Reason::DroppedByBudget), 0);
    // Archive recall only adds, from beyond the lookback.
    assert!(reasons(&s).contains(&("a-4".into(), Reason::Archive)));
}

#[tokio::test]
async fn triage_choices_come_before_archive_matches() {
    // Triage (a working completer) chose a-1 and a-3 among the older candidates; an archive
    // match cannot displace them, however relevant, and what the triage left out stays out.
    let completer = Arc::new(ScriptedCompleter::default());
    completer.answer(Ok("{\"relevant\": [2, 4]}"));
    let mut h = chat("a", 40);
    h[2].text = "The spare key to the garden shed is under the blue flowerpot.".into();
    let f = Fixture::new(&h).await;
    let chosen = cost(&f, &h, 16) + cost(&f, &h, 18);
    let recent: usize = (35..40).map(|n| cost(&f, &h, n)).sum();
    let settings = ConversationSettings {
        max_context_tokens: recent + chosen + 2,
        ..reference()
    };
    let s = f
        .select(
            "a",
            "Where is the spare key for the shed?",
            None,
            &settings,
            Some(completer.as_ref()),
        )
        .await;
    let got = reasons(&s);
    assert!(got.contains(&("a-16".into(), Reason::Relevant)), "{got:?}");
    assert!(got.contains(&("a-18".into(), Reason::Relevant)), "{got:?}");
    assert!(!got.iter().any(|(id, _)| id == "a-2"), "{got:?}");
    assert_eq!(left(&s, Reason::DroppedByTriage), 18);
}

#[tokio::test]
async fn a_time_the_message_names_recalls_that_period_without_a_shared_word() {
    // One message a day for 100 days up to "now"; 50 days ago something happened that the
    // question names only by its time.
    let now = T0 + 100 * 86_400_000;
    let mut h: Vec<M> = (0..100)
        .map(|i| M {
            at: T0 + i as i64 * 86_400_000,
            ..m("a", i, Role::User, &format!("daily note {i}"))
        })
        .collect();
    h[50].text = "Went kayaking on the lake with Sam, soaked but happy.".into();
    let f = Fixture::new(&h).await;
    let settings = ConversationSettings {
        max_context_tokens: 600,
        archive_neighbours: 0,
        ..reference()
    };
    let select = |text: &'static str| {
        let f = &f;
        let settings = &settings;
        async move {
            let incoming = Incoming {
                id: None,
                text: text.into(),
                at_ms: now,
                until_ms: None,
                reply_to: None,
                resume: None,
                agent: None,
            };
            let c = f.conv("a").await;
            f.engine
                .select(&f.store, settings, c, &incoming, None)
                .await
                .unwrap()
        }
    };
    let s = select("What was I up to seven weeks ago?").await;
    let got = reasons(&s);
    assert!(got.contains(&("a-50".into(), Reason::Archive)), "{got:?}");
    // Only messages of that period were recalled (49 days ago, give or take a week).
    for (id, r) in &got {
        if *r == Reason::Archive {
            let n: i64 = id.trim_start_matches("a-").parse().unwrap();
            assert!((100 - n - 49).abs() <= 7, "{id} is not from then");
        }
    }
    // Without a time, nothing from the archive: no word is shared.
    let s = select("What was I up to?").await;
    assert!(
        s.items.iter().all(|i| i.reason != Reason::Archive),
        "{:?}",
        reasons(&s)
    );
}
