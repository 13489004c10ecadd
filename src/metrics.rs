//! Prometheus metrics (`GET /metrics`, text format), kept in a registry owned by the app — no
//! global recorder. Backlog gauges are read from the store at scrape time.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TaskLabels {
    pub status: String,
    pub source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    pub source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BrainLabels {
    pub brain: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub brain: String,
    /// `prompt` or `completion`.
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeliveryLabels {
    pub channel: String,
    /// `delivered`, `retrying` or `failed`.
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChannelLabels {
    pub channel: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabels {
    pub lease: String,
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    pub tasks_finished: Family<TaskLabels, Counter>,
    pub task_latency: Family<SourceLabels, Histogram, fn() -> Histogram>,
    pub brain_latency: Family<BrainLabels, Histogram, fn() -> Histogram>,
    pub brain_tokens: Family<TokenLabels, Counter>,
    pub deliveries: Family<DeliveryLabels, Counter>,
    pub triage_fail_open: Counter,
    pub tasks_pending: Gauge,
    pub tasks_running: Gauge,
    pub outbox_backlog: Gauge,
    pub poll_lag: Family<ChannelLabels, FloatGauge>,
    pub channel_up: Family<ChannelLabels, Gauge>,
    /// 1 while the store takes writes, 0 while the disk is full or the database read-only.
    pub store_writable: Gauge,
    /// 1 while this instance holds a duty's lease (drives that poller, mailbox or scheduler).
    pub lease_held: Family<LeaseLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut r = Registry::with_prefix("ctxgate");
        let tasks_finished = Family::<TaskLabels, Counter>::default();
        r.register(
            "tasks_finished",
            "Tasks that ended, by status and source",
            tasks_finished.clone(),
        );
        let task_latency =
            Family::<SourceLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                seconds_histogram,
            );
        r.register(
            "task_latency_seconds",
            "From a task's creation to its end",
            task_latency.clone(),
        );
        let brain_latency =
            Family::<BrainLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                seconds_histogram,
            );
        r.register(
            "brain_latency_seconds",
            "Duration of brain calls (with quick re-tries)",
            brain_latency.clone(),
        );
        let brain_tokens = Family::<TokenLabels, Counter>::default();
        r.register(
            "brain_tokens",
            "Tokens used by brain answers",
            brain_tokens.clone(),
        );
        let deliveries = Family::<DeliveryLabels, Counter>::default();
        r.register(
            "deliveries",
            "Delivery attempts by outcome",
            deliveries.clone(),
        );
        let triage_fail_open = Counter::default();
        r.register(
            "triage_fail_open",
            "Triage calls that failed open (timeout, error, unusable answer)",
            triage_fail_open.clone(),
        );
        let tasks_pending = Gauge::default();
        r.register(
            "tasks_pending",
            "Tasks waiting to run",
            tasks_pending.clone(),
        );
        let tasks_running = Gauge::default();
        r.register(
            "tasks_running",
            "Tasks being worked on",
            tasks_running.clone(),
        );
        let outbox_backlog = Gauge::default();
        r.register(
            "outbox_backlog",
            "Answers waiting for delivery",
            outbox_backlog.clone(),
        );
        let poll_lag = Family::<ChannelLabels, FloatGauge>::default();
        r.register(
            "channel_poll_lag_seconds",
            "Talk: the newest message's delay from posting to intake; e-mail: time since the mailbox was last read",
            poll_lag.clone(),
        );
        let channel_up = Family::<ChannelLabels, Gauge>::default();
        r.register(
            "channel_up",
            "1 while a polled channel reaches its peer, 0 while it backs off after errors",
            channel_up.clone(),
        );
        let store_writable = Gauge::default();
        store_writable.set(1);
        r.register(
            "store_writable",
            "1 while the store takes writes, 0 while its disk is full or the database is read-only (intake and work pause)",
            store_writable.clone(),
        );
        let lease_held = Family::<LeaseLabels, Gauge>::default();
        r.register(
            "lease_held",
            "1 while this instance holds the lease of a duty (a Talk account, a mailbox, the scheduler) and drives it",
            lease_held.clone(),
        );
        Self {
            registry: Arc::new(r),
            poll_lag,
            channel_up,
            lease_held,
            store_writable,
            tasks_finished,
            task_latency,
            brain_latency,
            brain_tokens,
            deliveries,
            triage_fail_open,
            tasks_pending,
            tasks_running,
            outbox_backlog,
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    pub fn task_finished(&self, status: &str, source: &str, seconds: f64) {
        self.tasks_finished
            .get_or_create(&TaskLabels {
                status: status.into(),
                source: source.into(),
            })
            .inc();
        self.task_latency
            .get_or_create(&SourceLabels {
                source: source.into(),
            })
            .observe(seconds.max(0.0));
    }
}
