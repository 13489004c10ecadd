//! Token counting with a real tokenizer, and fitting a selection into a budget.

use std::sync::Arc;

use tiktoken_rs::CoreBPE;

use super::{Item, Reason};
use crate::config::Tokenizer;

/// Tokens a chat turn costs beyond its text (role and separators), as in OpenAI's chat format.
pub const TURN_OVERHEAD: usize = 4;

#[derive(Clone)]
pub struct TokenCounter {
    bpe: Arc<CoreBPE>,
}

impl TokenCounter {
    pub fn new(kind: Tokenizer) -> anyhow::Result<Self> {
        let bpe = match kind {
            Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base()?,
            Tokenizer::O200kBase => tiktoken_rs::o200k_base()?,
        };
        Ok(Self { bpe: Arc::new(bpe) })
    }

    pub fn count(&self, text: &str) -> usize {
        self.bpe.encode_ordinary(text).len()
    }

    /// What one rendered turn costs in the prompt.
    pub fn turn(&self, speaker: &str, text: &str) -> usize {
        self.count(speaker) + self.count(text) + TURN_OVERHEAD
    }
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCounter")
    }
}

/// Drop order when over budget, lowest priority first: archive matches (already ranked),
/// then older candidates kept by triage or fail-open, then briefings, then recent ones (oldest
/// first). Protected items (reply parent, the newest always-recent) are never dropped.
fn drop_rank(reason: Reason) -> u8 {
    match reason {
        Reason::Archive => 0,
        Reason::FailOpen | Reason::Relevant => 1,
        Reason::Briefing => 2,
        Reason::Recent => 3,
        _ => 4,
    }
}

/// Removes items until the total fits `budget`; returns the removed ones (oldest first within a
/// rank). `items` must be chronological; `protected(i)` says whether item i may not go.
pub fn fit(items: &mut Vec<Item>, budget: usize, protected: impl Fn(&Item) -> bool) -> Vec<Item> {
    let mut total: usize = items.iter().map(|i| i.tokens).sum();
    if total <= budget {
        return Vec::new();
    }
    // Indices in drop order: rank, then oldest first.
    let mut order: Vec<usize> = (0..items.len())
        .filter(|&i| !protected(&items[i]))
        .collect();
    order.sort_by_key(|&i| (drop_rank(items[i].reason), i));
    let mut gone = vec![false; items.len()];
    for i in order {
        if total <= budget {
            break;
        }
        total -= items[i].tokens;
        gone[i] = true;
    }
    let mut kept = Vec::with_capacity(items.len());
    let mut removed = Vec::new();
    for (item, g) in items.drain(..).zip(gone) {
        if g {
            removed.push(item)
        } else {
            kept.push(item)
        }
    }
    *items = kept;
    removed
}
