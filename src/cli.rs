//! The command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "ctxgate",
    version,
    about = "Conversation-context gateway for an AI assistant"
)]
pub struct Cli {
    /// Config file (default: config/ctxgate.toml when present, else built-in defaults).
    #[arg(long, global = true, env = "CTXGATE_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway: HTTP server, workers and delivery.
    Serve,
    /// Apply pending store migrations and exit; with `--to`, copy the (SQLite) store into a
    /// PostgreSQL database instead.
    Migrate {
        /// A PostgreSQL database (`postgres://USER:PASSWORD@HOST/DB`) to copy the configured
        /// SQLite store into, ids and all. Both are migrated first; running it again copies
        /// only what is missing, and stops at a row the target holds differently.
        #[arg(long, value_name = "URL")]
        to: Option<String>,
    },
    /// Validate the configuration and print the effective settings (secrets redacted).
    CheckConfig,
    /// Check the configuration, the store and every configured peer; exit 1 if any check fails.
    Doctor,
    /// Import conversation history from JSONL (the `context select` history schema); running
    /// it again changes nothing.
    Import {
        /// The JSONL file.
        file: PathBuf,
        /// The channel the conversations belong to, e.g. `webhook:default` so that a webhook
        /// conversation continues with its imported history.
        #[arg(long, default_value = "import")]
        channel: String,
    },
    /// Context selection tools.
    #[command(subcommand)]
    Context(ContextCommand),
}

#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Run the selection offline over a JSONL history, one JSON line per query on stdout.
    Select {
        /// History, one message per line: {id, conversation, sender, role, text, timestamp,
        /// reply_to, source_type}.
        #[arg(long)]
        history: PathBuf,
        /// Queries, one per line: {id, conversation, text, timestamp?, reply_to?}.
        #[arg(long)]
        queries: PathBuf,
        /// Token budget (overrides conversation.max_context_tokens).
        #[arg(long)]
        budget_tokens: Option<usize>,
    },
}
