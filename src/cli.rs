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
    /// Apply pending store migrations and exit.
    Migrate,
    /// Validate the configuration and print the effective settings (secrets redacted).
    CheckConfig,
}
