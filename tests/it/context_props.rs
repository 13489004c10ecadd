//! Properties of the selection that hold for any history and settings (proptest): output in
//! conversation order, only the conversation's own messages, the reply parent present, the
//! budget respected, the newest always-recent candidates present.

use std::collections::HashSet;

use ctxgate::brain::ScriptedCompleter;
use ctxgate::config::ConversationSettings;
use ctxgate::domain::MessageId;
use ctxgate::store::Store;
use ctxgate_contract::{Audience, MessageKind, Role, SourceType};
use proptest::prelude::*;

use crate::context::{Fixture, M, m};

#[derive(Debug, Clone)]
struct Case {
    history: Vec<M>,
    settings: ConversationSettings,
    reply_to: Option<usize>,
    triage: Option<String>,
}

fn message() -> impl Strategy<Value = (bool, u8, u8, bool, String)> {
    (
        any::<bool>(),             // conversation a or b
        0u8..10,                   // role / kind / source mix
        0u8..4,                    // minutes since previous
        prop::bool::weighted(0.1), // deleted
        "[a-z ]{0,40}",
    )
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(message(), 0..60),
        1usize..30,
        0usize..6,
        0usize..8,
        prop_oneof![Just(0usize), 20usize..400],
        any::<bool>(),
        prop::option::of(0usize..60),
        prop::option::of("\\{\"relevant\": \\[[0-9, ]{0,12}\\]\\}|garbage"),
    )
        .prop_map(
            |(raw, lookback, skip, recent, budget, recall, reply_to, triage)| {
                let mut at = 0i64;
                let history = raw
                    .into_iter()
                    .enumerate()
                    .map(|(i, (in_a, mix, gap, deleted, text))| {
                        at += gap as i64;
                        let conv = if in_a { "a" } else { "b" };
                        let role = if mix % 2 == 0 {
                            Role::User
                        } else {
                            Role::Assistant
                        };
                        let mut msg = m(conv, i, role, &format!("{text} word{}", i % 7));
                        msg.at += at * 60_000;
                        msg.deleted = deleted;
                        match mix {
                            7 => msg.kind = MessageKind::Progress,
                            9 => msg.source = SourceType::Briefing,
                            _ => {}
                        }
                        // Two agents share the room; messages are addressed to one, both, or a
                        // person.
                        msg.audience = match (i * 7 + gap as usize) % 4 {
                            0 => Audience::Everyone,
                            1 => Audience::Addressed {
                                agents: vec!["a1".into()],
                                users: vec![],
                            },
                            2 => Audience::Addressed {
                                agents: vec!["a2".into()],
                                users: vec![],
                            },
                            _ => Audience::Addressed {
                                agents: vec![],
                                users: vec!["ann".into()],
                            },
                        };
                        if role == Role::Assistant {
                            msg.agent = Some(if i % 3 == 0 { "a1".into() } else { "a2".into() });
                        }
                        msg
                    })
                    .collect();
                Case {
                    history,
                    settings: ConversationSettings {
                        lookback_count: lookback,
                        skip_selection_threshold: skip,
                        always_include_recent: recent,
                        max_context_tokens: budget,
                        archive_recall: recall,
                        ..ConversationSettings::default()
                    },
                    reply_to,
                    triage,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn selection_invariants(c in case()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(check(c))?;
    }
}

async fn check(c: Case) -> Result<(), TestCaseError> {
    let mut history = c.history.clone();
    // Make sure conversation "a" exists.
    history.push(m("a", 1000, Role::User, "the last word"));
    let f = Fixture::new(&history).await;
    let a = f.conv("a").await;
    let all_a = f
        .store
        .messages_before(a, Default::default(), 10_000)
        .await
        .unwrap();
    let reply_to: Option<MessageId> = match c.reply_to {
        // Any stored message, possibly of the other conversation.
        Some(n) => match history.get(n) {
            Some(h) => f
                .store
                .find_message(f.conv(h.conv).await, &h.id)
                .await
                .unwrap()
                .map(|m| m.id),
            None => None,
        },
        None => None,
    };
    let completer = ScriptedCompleter::default();
    if let Some(t) = &c.triage {
        completer.answer(Ok(t));
    }
    let s = f
        .select(
            "a",
            "word3 word5 question",
            reply_to,
            &c.settings,
            Some(&completer),
        )
        .await;

    // Only this conversation's messages, each once, in conversation order.
    prop_assert!(s.items.iter().all(|i| i.message.conversation_id == a));
    prop_assert!(
        s.items
            .windows(2)
            .all(|w| w[0].message.id < w[1].message.id)
    );
    // The reply parent, when it is a live message of this conversation.
    if let Some(p) = reply_to {
        let parent = all_a.iter().find(|m| m.id == p);
        if let Some(parent) = parent.filter(|m| m.deleted_at.is_none()) {
            prop_assert!(s.items.iter().any(|i| i.message.id == parent.id));
        } else {
            prop_assert!(s.items.iter().all(|i| i.message.id != p));
        }
    }
    // Never a deleted message; never an ack/progress post unless it is the message replied to.
    prop_assert!(s.items.iter().all(|i| i.message.deleted_at.is_none()
        && (i.message.kind == "message" || Some(i.message.id) == reply_to)));
    // The newest always-recent candidates are present: the lookback window's messages that
    // are not excluded, plus the newest briefings added back.
    let live = |m: &&ctxgate::store::MessageRecord| m.deleted_at.is_none() && m.kind == "message";
    let background =
        |m: &&ctxgate::store::MessageRecord| m.source_type.is_some_and(|s| s.is_background());
    let mut candidates: Vec<_> = all_a
        .iter()
        .rev()
        .take(c.settings.lookback_count)
        .filter(|m| live(m) && m.role != Role::System && !background(m))
        .chain(
            all_a
                .iter()
                .rev()
                .filter(|m| live(m) && background(m) && m.role == Role::Assistant)
                .take(c.settings.previous_tasks_count),
        )
        .collect();
    candidates.sort_by_key(|m| std::cmp::Reverse(m.id));
    candidates.dedup_by_key(|m| m.id);
    let selected: HashSet<_> = s.items.iter().map(|i| i.message.id).collect();
    for newest in candidates
        .iter()
        .take(c.settings.always_include_recent.min(candidates.len()))
    {
        prop_assert!(
            selected.contains(&newest.id),
            "newest {} missing",
            newest.id
        );
    }
    // The budget holds, unless the protected messages alone exceed it (then it says so).
    if c.settings.max_context_tokens > 0 && s.tokens > c.settings.max_context_tokens {
        prop_assert!(
            s.notes.iter().any(|n| n.contains("over the budget")),
            "{:?}",
            s.notes
        );
        prop_assert!(
            s.items
                .iter()
                .all(|i| i.reason != ctxgate::context::Reason::Archive)
        );
    }
    prop_assert_eq!(s.tokens, s.items.iter().map(|i| i.tokens).sum::<usize>());

    // Audience: agent a1 never receives a message that is neither its own nor addressed to it
    // (or to everyone) — whatever the settings, triage answer or reply target.
    let completer = ScriptedCompleter::default();
    if let Some(t) = &c.triage {
        completer.answer(Ok(t));
    }
    let incoming = ctxgate::context::Incoming {
        id: None,
        text: "word3 word5 question".into(),
        at_ms: crate::context::T0,
        until_ms: None,
        reply_to,
        resume: None,
        agent: Some("a1".into()),
    };
    let s = f
        .engine
        .select(&f.store, &c.settings, a, &incoming, Some(&completer))
        .await
        .unwrap();
    for i in &s.items {
        let m = &i.message;
        prop_assert!(
            m.agent.as_deref() == Some("a1") || m.audience.includes_agent("a1"),
            "a1 got {} ({:?}, written by {:?})",
            m.channel_message_id,
            m.audience,
            m.agent
        );
        prop_assert_eq!(m.conversation_id, a);
    }
    Ok(())
}
