//! The one integration-test binary (see STYLE.md): modules by area.

mod admin;
mod cli;
mod helpers;
mod store;
mod webhook;
mod worker;
