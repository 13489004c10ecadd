//! Token counting with a real tokenizer, and fitting a selection into a budget.

use std::sync::Arc;

use tiktoken_rs::CoreBPE;

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
