//! `ctxgate context select`: the daemon's selection run offline over a JSONL history, on an
//! in-memory store, for benchmarks and operators (see CONTEXT.md for the formats).

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, bail};
use chrono::DateTime;
use ctxgate_contract::{
    Audience, EventKind, InboundEvent, InboundMessage, MessageKind, Role, SenderKind, SourceType,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ContextEngine, Incoming, TokenCounter};
use crate::config::{Settings, StoreSettings};
use crate::store::sqlite::SqliteStore;
use crate::store::{Bound, Store};

const CHANNEL: &str = "history";
const BATCH: usize = 5000;

/// An id given as a string or a number; echoed back as given.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Id {
    Text(String),
    Number(serde_json::Number),
}

impl Id {
    fn key(&self) -> String {
        match self {
            Id::Text(s) => s.clone(),
            Id::Number(n) => n.to_string(),
        }
    }
}

#[derive(Debug, Deserialize)]
struct HistoryLine {
    id: Id,
    conversation: Id,
    sender: String,
    role: String,
    text: String,
    timestamp: String,
    #[serde(default)]
    reply_to: Option<Id>,
    #[serde(default)]
    source_type: Option<String>,
}

#[derive(Debug, Deserialize)]
struct QueryLine {
    id: Id,
    conversation: Id,
    text: String,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    reply_to: Option<Id>,
}

fn time(s: &str) -> anyhow::Result<DateTime<chrono::Utc>> {
    Ok(DateTime::parse_from_rfc3339(s)
        .with_context(|| format!("timestamp {s:?} is not RFC 3339"))?
        .to_utc())
}

fn event(line: HistoryLine) -> anyhow::Result<InboundEvent> {
    let role = match line.role.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => bail!("role must be \"user\" or \"assistant\", not {other:?}"),
    };
    let source_type = match line.source_type.as_deref() {
        None => SourceType::Import,
        Some(s) => SourceType::parse(s).with_context(|| format!("unknown source_type {s:?}"))?,
    };
    Ok(InboundEvent {
        channel: CHANNEL.to_owned(),
        conversation: line.conversation.key(),
        kind: EventKind::Posted(InboundMessage {
            kind: MessageKind::Message,
            channel_message_id: line.id.key(),
            sender_id: line.sender,
            sender_name: None,
            sender_kind: if role == Role::Assistant {
                SenderKind::SelfBot
            } else {
                SenderKind::User
            },
            role,
            text: line.text,
            timestamp: time(&line.timestamp)?,
            reply_to: line.reply_to.map(|r| r.key()),
            source_type,
            trigger: false,
            agent: None,
            audience: Audience::Everyone,
            meta: Value::Null,
        }),
        cursor: None,
    })
}

/// Runs the selection for every query, writing one JSON line per query to `out`.
pub async fn run(
    settings: &Settings,
    history: &Path,
    queries: &Path,
    budget_tokens: Option<usize>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let store = SqliteStore::connect(&StoreSettings {
        url: "sqlite::memory:".to_owned(),
        ..settings.store.clone()
    })
    .await?;
    store.migrate().await?;
    let numeric_ids = load_history(&store, history).await?;
    let mut conversation = settings.conversation.clone();
    if let Some(b) = budget_tokens {
        conversation.max_context_tokens = b;
    }
    let engine = ContextEngine::new(TokenCounter::new(conversation.tokenizer)?);
    // Triage runs only when the default brain (or the one selection_model names) has a fast
    // completer; the built-in echo brain has none, so nothing leaves the machine.
    let brains = crate::brain::build_all(settings)?;
    let completer =
        crate::brain::triage_completer(&brains, &conversation.selection_model, "default");
    let file = std::fs::File::open(queries)
        .with_context(|| format!("cannot open {}", queries.display()))?;
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let q: QueryLine = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}", queries.display(), n + 1))?;
        let until_ms = match &q.timestamp {
            Some(t) => Some(
                time(t)
                    .with_context(|| format!("{} line {}", queries.display(), n + 1))?
                    .timestamp_millis(),
            ),
            None => None,
        };
        let started = Instant::now();
        let conv = store
            .find_conversation(CHANNEL, &q.conversation.key())
            .await?;
        let selected = match conv {
            None => Vec::new(),
            Some(c) => {
                let reply_to = match &q.reply_to {
                    Some(r) => store.find_message(c.id, &r.key()).await?.map(|m| m.id),
                    None => None,
                };
                // Without a timestamp the query comes right after the conversation's last message.
                let at_ms = match until_ms {
                    Some(t) => t,
                    None => store
                        .messages_before(c.id, Bound::all(), 1)
                        .await?
                        .first()
                        .map_or(0, |m| m.created_at),
                };
                let incoming = Incoming {
                    id: None,
                    text: q.text.clone(),
                    at_ms,
                    until_ms,
                    reply_to,
                    resume: None,
                    agent: None,
                };
                engine
                    .select(&store, &conversation, c.id, &incoming, completer.as_deref())
                    .await?
                    .items
            }
        };
        let elapsed = started.elapsed().as_micros() as u64;
        let total: usize = selected.iter().map(|i| i.tokens).sum();
        let selected: Vec<Value> = selected
            .iter()
            .map(|i| {
                let key = &i.message.channel_message_id;
                let id = numeric_ids.get(key).cloned().unwrap_or_else(|| json!(key));
                json!({"id": id, "reason": i.reason, "tokens": i.tokens})
            })
            .collect();
        let id = match &q.id {
            Id::Text(s) => json!(s),
            Id::Number(n) => json!(n),
        };
        writeln!(
            out,
            "{}",
            json!({"query": id, "selected": selected, "tokens": total, "elapsed_us": elapsed})
        )?;
    }
    store.close().await;
    Ok(())
}

/// Loads the history in batches; returns the ids that were given as numbers.
async fn load_history(store: &SqliteStore, path: &Path) -> anyhow::Result<HashMap<String, Value>> {
    Ok(import(store, path, CHANNEL, false).await?.numeric_ids)
}

/// What an import read.
pub struct Imported {
    pub messages: usize,
    numeric_ids: HashMap<String, Value>,
}

/// Imports a JSONL history (the `context select` schema) into `channel`'s conversations, in
/// batches of one transaction each. Idempotent: a message id already stored in its
/// conversation is left as it is. With `progress`, a progress bar on stderr (when a terminal).
pub async fn import(
    store: &dyn Store,
    path: &Path,
    channel: &str,
    progress: bool,
) -> anyhow::Result<Imported> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let bar = if progress {
        let bar = indicatif::ProgressBar::new(file.metadata().map(|m| m.len()).unwrap_or(0));
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {bytes}/{total_bytes} [{bar:40}] {per_sec} eta {eta} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut numeric = HashMap::new();
    let mut batch = Vec::with_capacity(BATCH);
    let mut count = 0usize;
    let started = Instant::now();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        bar.inc(line.len() as u64 + 1);
        if line.trim().is_empty() {
            continue;
        }
        let parsed: HistoryLine = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}", path.display(), n + 1))?;
        if let Id::Number(num) = &parsed.id {
            numeric.insert(num.to_string(), json!(num));
        }
        let mut event =
            event(parsed).with_context(|| format!("{} line {}", path.display(), n + 1))?;
        event.channel = channel.to_owned();
        batch.push(event);
        if batch.len() == BATCH {
            store
                .ingest_batch(&batch, chrono::Utc::now().timestamp_millis())
                .await?;
            count += batch.len();
            batch.clear();
            bar.set_message(format!("{count} messages"));
        }
    }
    count += batch.len();
    store
        .ingest_batch(&batch, chrono::Utc::now().timestamp_millis())
        .await?;
    bar.finish_and_clear();
    eprintln!(
        "read {count} messages from {} in {:.1} s",
        path.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(Imported {
        messages: count,
        numeric_ids: numeric,
    })
}
