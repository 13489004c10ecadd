//! The one integration-test binary (see STYLE.md): modules by area.

mod admin;
mod agents;
mod brains;
mod cli;
pub mod context;
mod context_props;
mod crash;
mod docs;
mod email;
mod fuzz;
mod helpers;
mod migrate_to;
mod multi_instance;
mod openapi;
mod scheduler;
mod security;
mod store;
mod store_contract;
mod store_health;
mod talk;
mod webhook;
mod worker;
