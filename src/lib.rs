//! ctxgate: a conversation-context gateway for an AI assistant.
//!
//! Channels turn what they see into neutral events; [`intake`] commits them with their tasks;
//! the [`worker`] builds each prompt with [`context`], asks a [`brain`], and leaves the answer in
//! the [`outbox`], which delivers it through the channel. See ARCHITECTURE in the docs.

pub mod admin;
pub mod app;
pub mod brain;
pub mod cli;
pub mod clock;
pub mod config;
pub mod context;
pub mod deps;
pub mod doctor;
pub mod domain;
pub mod duty;
pub mod email;
pub mod health;
pub mod http;
pub mod intake;
pub mod limits;
pub mod metrics;
pub mod outbox;
pub mod scheduler;
pub mod store;
pub mod talk;
pub mod telemetry;
pub mod worker;

pub use app::{App, Overrides};
pub use config::Settings;
