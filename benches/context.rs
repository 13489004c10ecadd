//! Context selection speed (criterion), plus p50/p99 printed from a separate timed pass:
//! - the reference selection over a lookback of 25 with no triage;
//! - archive recall over a 10,000- and a 100,000-message conversation.
//!
//! Run: `cargo bench --bench context`

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use criterion::{Criterion, criterion_group, criterion_main};
use ctxgate::config::{ConversationSettings, StoreSettings, Tokenizer};
use ctxgate::context::{ContextEngine, Incoming, TokenCounter};
use ctxgate::domain::ConversationId;
use ctxgate::store::Store;
use ctxgate::store::sqlite::SqliteStore;
use ctxgate_contract::*;
use hdrhistogram::Histogram;

/// Message text with a Zipf-like vocabulary of 5,000 words (`t0` most common), so a word's
/// rank sets how many messages contain it, as in real conversation.
fn text(i: usize) -> String {
    let mut x = (i as u64).wrapping_mul(2654435761).wrapping_add(1);
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 11) as f64) / ((1u64 << 53) as f64)
    };
    let n = 8 + (next() * 30.0) as usize;
    (0..n)
        .map(|_| {
            // Inverse CDF of a Zipf(1) over 5,000 ranks: rank = 5000^u - 1.
            let rank = (5000f64.powf(next()) - 1.0) as usize;
            format!("t{rank}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

async fn seeded(dir: &std::path::Path, n: usize) -> (SqliteStore, ConversationId) {
    let store = SqliteStore::connect(&StoreSettings {
        url: format!("sqlite://{}", dir.join(format!("bench-{n}.db")).display()),
        ..StoreSettings::default()
    })
    .await
    .unwrap();
    store.migrate().await.unwrap();
    let t0 = 1_735_689_600_000i64;
    for chunk in (0..n).collect::<Vec<_>>().chunks(5000) {
        let events: Vec<InboundEvent> = chunk
            .iter()
            .map(|&i| InboundEvent {
                channel: "bench".into(),
                conversation: "long".into(),
                kind: EventKind::Posted(InboundMessage {
                    kind: MessageKind::Message,
                    channel_message_id: i.to_string(),
                    sender_id: if i % 2 == 0 {
                        "ann".into()
                    } else {
                        "bot".into()
                    },
                    sender_name: None,
                    sender_kind: SenderKind::User,
                    role: if i % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    text: text(i),
                    timestamp: Utc.timestamp_millis_opt(t0 + i as i64 * 60_000).unwrap(),
                    reply_to: None,
                    source_type: SourceType::Import,
                    trigger: false,
                    agent: None,
                    audience: Audience::Everyone,
                    meta: serde_json::Value::Null,
                }),
                cursor: None,
            })
            .collect();
        store.ingest_batch(&events, t0).await.unwrap();
    }
    let conv = store
        .find_conversation("bench", "long")
        .await
        .unwrap()
        .unwrap()
        .id;
    (store, conv)
}

fn incoming() -> Incoming {
    Incoming {
        id: None,
        // Words of middling rarity (ranks 40, 300 and 1,200), plus stopwords.
        text: "what did we say about t40 and the t300 for the t1200?".into(),
        at_ms: i64::MAX / 2,
        until_ms: None,
        reply_to: None,
        resume: None,
        agent: None,
    }
}

fn percentiles(label: &str, rt: &tokio::runtime::Runtime, f: impl Fn() -> Duration) {
    let mut h = Histogram::<u64>::new(3).unwrap();
    let _ = rt;
    for _ in 0..500 {
        h.record(f().as_micros() as u64).unwrap();
    }
    println!(
        "{label}: p50 {} us, p99 {} us, max {} us (500 runs)",
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.max()
    );
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = ContextEngine::new(TokenCounter::new(Tokenizer::Cl100kBase).unwrap());
    let reference = ConversationSettings {
        max_context_tokens: 0,
        ..ConversationSettings::default()
    };
    let recall = ConversationSettings {
        max_context_tokens: 2000,
        ..ConversationSettings::default()
    };
    for (n, settings, label) in [
        (1_000usize, &reference, "selection, lookback 25, no triage"),
        (
            10_000,
            &recall,
            "archive recall, 10,000 messages, 2,000 tokens",
        ),
        (
            100_000,
            &recall,
            "archive recall, 100,000 messages, 2,000 tokens",
        ),
    ] {
        let (store, conv) = rt.block_on(seeded(dir.path(), n));
        let once = || {
            let started = Instant::now();
            let s = rt
                .block_on(engine.select(&store, settings, conv, &incoming(), None))
                .unwrap();
            assert!(!s.items.is_empty());
            started.elapsed()
        };
        percentiles(label, &rt, once);
        c.bench_function(label, |b| {
            b.to_async(&rt).iter(|| async {
                engine
                    .select(&store, settings, conv, &incoming(), None)
                    .await
                    .unwrap()
            })
        });
    }
}

criterion_group! {
    name = context;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(5));
    targets = benches
}
criterion_main!(context);
