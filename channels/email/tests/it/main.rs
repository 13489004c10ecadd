//! The e-mail crate's integration tests, one binary (see docs/STYLE.md §11).

mod bodies;
mod golden;
mod guards;
mod mailstack;
mod malformed;
mod outgoing;
mod props;
mod support;
mod thread;
