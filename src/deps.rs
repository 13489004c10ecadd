//! The one dependency bundle passed to every part (no globals). Cheap to clone.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use ctxgate_contract::Sink;
use ctxgate_email::tracker::Tracker;
use ctxgate_talk::poller::Poller;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::brain::Brain;
use crate::clock::Clock;
use crate::config::Settings;
use crate::context::ContextEngine;
use crate::duty::{Duty, LeaseHandle};
use crate::store::Store;

#[derive(Clone)]
pub struct Deps {
    pub settings: Arc<Settings>,
    pub store: Arc<dyn Store>,
    pub clock: Clock,
    pub metrics: crate::metrics::Metrics,
    /// Decides what each prompt holds.
    pub context: ContextEngine,
    /// Brains by configured name.
    pub brains: Arc<HashMap<String, Arc<dyn Brain>>>,
    /// Sinks by channel instance (`webhook:default`, …).
    pub sinks: Arc<HashMap<String, Arc<dyn Sink>>>,
    /// Signalled when a task is enqueued.
    pub task_ready: Arc<Notify>,
    /// Signalled when an answer is put in the outbox.
    pub delivery_ready: Arc<Notify>,
    /// Cancelled on shutdown.
    pub shutdown: CancellationToken,
    /// The Talk pollers by account, each a duty under its lease (set once the app is built).
    pub talk_pollers: Arc<OnceLock<BTreeMap<String, Duty<Poller>>>>,
    /// The mailbox trackers by account, each a duty under its lease.
    pub email_trackers: Arc<OnceLock<BTreeMap<String, Duty<Tracker>>>>,
    /// Whether the store takes writes (disk full, read-only database).
    pub health: crate::health::StoreHealth,
    /// Every duty's lease state (pollers, mailboxes, the scheduler), for metrics.
    pub leases: Arc<Mutex<Vec<LeaseHandle>>>,
}

impl Deps {
    /// Lists a duty's lease for the `ctxgate_lease_held` metric.
    pub fn register_lease(&self, lease: LeaseHandle) {
        self.leases.lock().expect("leases lock").push(lease);
    }
}
