//! Duties: work exactly one instance may drive at a time — a Talk account's poller, a mailbox
//! tracker, the scheduler — when several gateways share one PostgreSQL database.
//!
//! Each duty runs under a lease from the store ([`crate::store::Store::try_lease`]; a session
//! advisory lock on PostgreSQL, always granted on SQLite, which serves one process). The loop
//! in [`Duty::run`]:
//!
//! 1. tries to take the lease; while another instance holds it, tries again every
//!    [`RETRY_EVERY`] (the holder's death frees the lock at once when its connection closes,
//!    and within about 25 s when it vanishes from the network; see
//!    `store/postgres/lock.rs`), so a survivor takes over within 30 s;
//! 2. holding it, starts a fresh driver ([`Exclusive::renew`]: empty in-memory state, cursors
//!    read back from the store, since another instance may have moved them) and checks every
//!    [`CHECK_EVERY`] that the lease is still held; a lost lease stops the driver;
//! 3. on shutdown, stops the driver and gives the lease up, so a standby takes over at its
//!    next try.
//!
//! Two drivers can overlap for a few seconds after a holder loses its database session
//! without noticing at once; intake's dedup keys make that harmless (a message seen twice is
//! stored and answered once).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// How often a standby instance tries to take a lease.
pub const RETRY_EVERY: Duration = Duration::from_secs(5);
/// How often the holder checks it still holds its lease.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// Something only one instance may drive at a time.
pub trait Exclusive: Clone + Send + Sync + 'static {
    /// A new driver with the same configuration and empty in-memory state, stopping when
    /// `stop` is cancelled.
    fn renew(&self, stop: CancellationToken) -> Self;
    /// Drives until stopped.
    fn drive(self) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

impl Exclusive for ctxgate_talk::poller::Poller {
    fn renew(&self, stop: CancellationToken) -> Self {
        ctxgate_talk::poller::Poller::renew(self, stop)
    }

    fn drive(self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(self.run())
    }
}

impl Exclusive for ctxgate_email::tracker::Tracker {
    fn renew(&self, stop: CancellationToken) -> Self {
        ctxgate_email::tracker::Tracker::renew(self, stop)
    }

    fn drive(self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(self.run())
    }
}

/// Whether this instance drives a duty, as shown by `GET /admin/channels` and the
/// `ctxgate_lease_held` metric.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct LeaseStatus {
    /// The lease name, e.g. `talk:main`.
    pub name: String,
    /// This instance holds the lease and drives the duty.
    pub held: bool,
    /// Since when this instance holds it.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub held_since: Option<DateTime<Utc>>,
    /// How many times this instance took the lease.
    pub terms: u64,
    /// The last failure to reach the lease (the store did not answer).
    pub last_error: Option<String>,
}

/// A duty's lease state, readable without knowing what the duty drives.
#[derive(Clone, Default)]
pub struct LeaseHandle(Arc<Mutex<LeaseStatus>>);

impl LeaseHandle {
    pub fn get(&self) -> LeaseStatus {
        self.0.lock().expect("lease lock").clone()
    }
}

/// One duty: its current driver (for status) and its lease state. Cheap to clone.
#[derive(Clone)]
pub struct Duty<T> {
    name: String,
    current: Arc<Mutex<T>>,
    lease: LeaseHandle,
}

impl<T: Exclusive> Duty<T> {
    /// A duty whose first driver is `driver` (not running yet).
    pub fn new(name: impl Into<String>, driver: T) -> Self {
        let name = name.into();
        Self {
            lease: LeaseHandle(Arc::new(Mutex::new(LeaseStatus {
                name: name.clone(),
                ..LeaseStatus::default()
            }))),
            name,
            current: Arc::new(Mutex::new(driver)),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The current driver: the running one while the lease is held, else the last one.
    pub fn current(&self) -> T {
        self.current.lock().expect("duty lock").clone()
    }

    pub fn lease(&self) -> LeaseHandle {
        self.lease.clone()
    }

    fn note(&self, f: impl FnOnce(&mut LeaseStatus)) {
        f(&mut self.lease.0.lock().expect("lease lock"));
    }

    /// Takes the lease whenever it is free and drives the duty while holding it, until
    /// `shutdown`; see the module documentation.
    pub async fn run(self, store: Arc<dyn Store>, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            match store.try_lease(&self.name).await {
                Ok(Some(mut lease)) => {
                    self.note(|s| {
                        s.held = true;
                        s.held_since = Some(Utc::now());
                        s.terms += 1;
                        s.last_error = None;
                    });
                    tracing::info!(duty = %self.name, "took the lease; driving");
                    let stop = shutdown.child_token();
                    let driver = self.current().renew(stop.clone());
                    *self.current.lock().expect("duty lock") = driver.clone();
                    let mut work = driver.drive();
                    let mut check = tokio::time::interval(CHECK_EVERY);
                    check.tick().await;
                    loop {
                        tokio::select! {
                            _ = &mut work => break,
                            _ = check.tick() => {
                                if !lease.is_held().await {
                                    tracing::warn!(duty = %self.name, "lease lost; stopping");
                                    stop.cancel();
                                    work.await;
                                    break;
                                }
                            }
                        }
                    }
                    stop.cancel();
                    lease.release().await;
                    self.note(|s| {
                        s.held = false;
                        s.held_since = None;
                    });
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(duty = %self.name, error = %e, "cannot reach the lease");
                    self.note(|s| s.last_error = Some(e.to_string()));
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(RETRY_EVERY) => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }
}
