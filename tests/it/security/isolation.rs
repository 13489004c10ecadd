//! Conversation isolation, as a property: random interleavings of messages from many
//! conversations — several senders, the same conversation names and channel message ids on
//! different channels, replies pointing at message ids of other conversations — go through the
//! real intake into a real SQLite store while the real worker answers tasks in between. Every
//! brain request (the context exactly as the worker builds it) holds only messages of the task's
//! own conversation.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ctxgate::intake::IntakeService;
use ctxgate::worker::RunOnce;
use ctxgate_contract::{
    Audience, EventKind, InboundEvent, InboundMessage, Intake, MessageKind, Role, SenderKind,
    SourceType,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::helpers::spawn_app;

const CHANNELS: [&str; 3] = ["webhook:default", "talk:main", "email:main"];
const CONVERSATIONS: [&str; 3] = ["c0", "c1", "shared"];
const SENDERS: [&str; 4] = ["ann", "bob", "cy", "dee"];
const WORDS: [&str; 6] = ["boat", "Nautilus", "lunch", "order", "42", "when"];

#[derive(Debug, Clone)]
struct Step {
    channel: usize,
    conversation: usize,
    sender: usize,
    /// Channel message ids come from a small pool, so they repeat across conversations and
    /// channels (and sometimes within one, which intake deduplicates).
    id: usize,
    reply_to: Option<usize>,
    trigger: bool,
    words: (usize, usize),
    /// Worker turns taken right after this message.
    work: usize,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..CHANNELS.len(),
        0..CONVERSATIONS.len(),
        0..SENDERS.len(),
        0usize..8,
        prop::option::weighted(0.4, 0usize..8),
        prop::bool::weighted(0.6),
        (0..WORDS.len(), 0..WORDS.len()),
        0usize..3,
    )
        .prop_map(
            |(channel, conversation, sender, id, reply_to, trigger, words, work)| Step {
                channel,
                conversation,
                sender,
                id,
                reply_to,
                trigger,
                words,
                work,
            },
        )
}

/// `[channel|conversation|n]`: where a text came from, readable in any context turn (answers
/// quote the message: `re: <text>`).
fn marker(channel: &str, conversation: &str, n: usize) -> String {
    format!("[{channel}|{conversation}|{n}]")
}

/// The (channel, conversation) of every marker in `text`.
fn origins(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        let parts: Vec<&str> = after[..close].split('|').collect();
        if let [channel, conversation, n] = parts[..]
            && n.parse::<usize>().is_ok()
        {
            out.push((channel.to_owned(), conversation.to_owned()));
        }
        rest = &after[close + 1..];
    }
    out
}

/// Context turns checked over all cases (so the property is not vacuously true).
static CONTEXT_TURNS: AtomicUsize = AtomicUsize::new(0);

async fn check(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let app = spawn_app().await;
    let intake = IntakeService::new(app.deps.clone());
    let worker = app.worker("isolation");
    for (n, s) in steps.iter().enumerate() {
        let (channel, conversation) = (CHANNELS[s.channel], CONVERSATIONS[s.conversation]);
        let text = format!(
            "{} {} {}",
            marker(channel, conversation, n),
            WORDS[s.words.0],
            WORDS[s.words.1]
        );
        let event = InboundEvent {
            channel: channel.to_owned(),
            conversation: conversation.to_owned(),
            kind: EventKind::Posted(InboundMessage {
                channel_message_id: format!("m{}", s.id),
                sender_id: SENDERS[s.sender].to_owned(),
                sender_name: None,
                sender_kind: SenderKind::User,
                role: Role::User,
                kind: MessageKind::Message,
                text,
                timestamp: chrono::DateTime::from_timestamp_millis(
                    crate::helpers::START_MS + n as i64 * 1_000,
                )
                .unwrap(),
                reply_to: s.reply_to.map(|r| format!("m{r}")),
                source_type: SourceType::Webhook,
                trigger: s.trigger,
                agent: None,
                audience: Audience::Everyone,
                meta: serde_json::Value::Null,
            }),
            cursor: None,
        };
        intake.submit(event).await.expect("intake takes the event");
        for _ in 0..s.work {
            worker.run_once().await.expect("the store answers");
        }
    }
    // Drain the rest.
    while worker.run_once().await.expect("the store answers") != RunOnce::Empty {}

    // Which conversation each gateway conversation id is.
    let mut conversations: BTreeMap<i64, (String, String)> = BTreeMap::new();
    for channel in CHANNELS {
        for name in CONVERSATIONS {
            if let Some(c) = app
                .deps
                .store
                .find_conversation(channel, name)
                .await
                .expect("the store answers")
            {
                conversations.insert(c.id.0, (channel.to_owned(), name.to_owned()));
            }
        }
    }
    let requests = app.brain.requests();
    let triggers = steps.iter().filter(|s| s.trigger).count();
    prop_assert!(
        triggers == 0 || !requests.is_empty(),
        "no task was answered"
    );
    for request in &requests {
        let own = conversations
            .get(&request.conversation_id)
            .cloned()
            .expect("the request's conversation exists");
        prop_assert_eq!(
            origins(&request.message.text),
            vec![own.clone()],
            "the trigger {:?} is not of its task's conversation",
            request.message.text
        );
        for turn in &request.context {
            let from = origins(&turn.text);
            prop_assert!(
                !from.is_empty(),
                "a context turn without origin: {:?}",
                turn.text
            );
            for origin in from {
                prop_assert_eq!(
                    &origin,
                    &own,
                    "task {} of {:?} was shown {:?}",
                    request.task_id,
                    own,
                    turn.text
                );
            }
            CONTEXT_TURNS.fetch_add(1, Ordering::Relaxed);
        }
    }
    app.deps.shutdown.cancel();
    Ok(())
}

#[test]
fn the_context_of_a_task_holds_only_its_own_conversation() {
    let mut runner = TestRunner::new(Config {
        cases: 16,
        failure_persistence: None,
        ..Config::default()
    });
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
    );
    let result = runner.run(&prop::collection::vec(step(), 5..60), |steps| {
        rt.block_on(check(steps))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let turns = CONTEXT_TURNS.load(Ordering::Relaxed);
    eprintln!("isolation: {turns} context turns checked");
    assert!(turns > 200, "only {turns} context turns were checked");
}
