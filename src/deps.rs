//! The one dependency bundle passed to every part (no globals). Cheap to clone.

use std::collections::HashMap;
use std::sync::Arc;

use ctxgate_contract::Sink;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::brain::Brain;
use crate::clock::Clock;
use crate::config::Settings;
use crate::context::ContextEngine;
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
    /// The Talk pollers by account, for channel status (set once the app is built).
    /// The mailbox trackers by account, for channel status.
    pub email_trackers: Arc<
        std::sync::OnceLock<std::collections::BTreeMap<String, ctxgate_email::tracker::Tracker>>,
    >,
    pub talk_pollers:
        Arc<std::sync::OnceLock<std::collections::BTreeMap<String, ctxgate_talk::poller::Poller>>>,
}
