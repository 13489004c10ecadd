//! Nextcloud Talk for ctxgate.
//!
//! The wire types and client follow the spreed API docs (`docs/chat.md`, `docs/conversation.md`,
//! `docs/bots.md` in nextcloud/spreed). With the `fake` feature the crate also carries an
//! in-process Talk server built from the same docs, for tests and benchmarks.

#[cfg(feature = "fake")]
pub mod fake;

pub mod bot;
pub mod client;
pub mod render;
pub mod wire;

pub use client::{Direction, Received, TalkClient, TalkError};
pub mod poller;
pub mod receiver;
pub mod sink;
