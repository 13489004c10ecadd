//! Token counting with a real tokenizer, and fitting a selection into a budget.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use tiktoken_rs::CoreBPE;

use crate::config::Tokenizer;

/// Tokens a chat turn costs beyond its text (role and separators), as in OpenAI's chat format.
pub const TURN_OVERHEAD: usize = 4;

#[derive(Clone)]
pub struct TokenCounter {
    bpe: Arc<CoreBPE>,
    /// Turn costs by a hash of (speaker, text): consecutive tasks of a conversation count the
    /// same messages again and again. Cleared when it grows past `CACHE_LIMIT`.
    cache: Arc<Mutex<HashMap<u64, usize>>>,
}

const CACHE_LIMIT: usize = 200_000;

impl TokenCounter {
    pub fn new(kind: Tokenizer) -> anyhow::Result<Self> {
        let bpe = match kind {
            Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base()?,
            Tokenizer::O200kBase => tiktoken_rs::o200k_base()?,
        };
        Ok(Self {
            bpe: Arc::new(bpe),
            cache: Arc::default(),
        })
    }

    pub fn count(&self, text: &str) -> usize {
        self.bpe.encode_ordinary(text).len()
    }

    /// What one rendered turn costs in the prompt.
    pub fn turn(&self, speaker: &str, text: &str) -> usize {
        let mut h = DefaultHasher::new();
        (speaker, text).hash(&mut h);
        let key = h.finish();
        if let Some(n) = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return *n;
        }
        let n = self.count(speaker) + self.count(text) + TURN_OVERHEAD;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, n);
        n
    }
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCounter")
    }
}
