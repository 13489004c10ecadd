//! `App::build(Settings)`: the one way the gateway is put together, for production and tests.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use ctxgate_contract::{Intake, Sink};
use ctxgate_webhook::CallbackSink;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::brain::Brain;
use crate::clock::Clock;
use crate::config::{Secret, Settings};
use crate::context::{ContextEngine, TokenCounter};
use crate::deps::Deps;
use crate::duty::Duty;
use crate::intake::IntakeService;
use crate::outbox::Outbox;
use crate::scheduler::Scheduler;
use crate::store::{OpenedStore, display_url};
use crate::worker::Worker;

/// Replacements tests (and embedders) may inject.
#[derive(Default)]
pub struct Overrides {
    pub clock: Option<Clock>,
    /// Brains by name, replacing the configured ones.
    pub brains: HashMap<String, Arc<dyn Brain>>,
}

pub struct App {
    deps: Deps,
    intake: Arc<IntakeService>,
    listener: TcpListener,
    address: SocketAddr,
    store: OpenedStore,
}

impl App {
    pub async fn build(settings: Settings) -> anyhow::Result<App> {
        Self::build_with(settings, Overrides::default()).await
    }

    pub async fn build_with(mut settings: Settings, overrides: Overrides) -> anyhow::Result<App> {
        ensure_webhook_secrets(&mut settings)?;
        let store = OpenedStore::open(&settings.store).await.with_context(|| {
            format!(
                "cannot open the store at {}",
                display_url(&settings.store.url)
            )
        })?;
        let applied = store.migrate().await.context("cannot migrate the store")?;
        if applied > 0 {
            tracing::info!(applied, "store migrated");
        }
        let mut brains = crate::brain::build_all(&settings).context("cannot set up the brains")?;
        brains.extend(overrides.brains);
        let mut sinks: HashMap<String, Arc<dyn Sink>> = HashMap::new();
        for (name, hook) in settings.webhooks.iter().filter(|(_, w)| w.enabled) {
            let secret = hook.secret.as_ref().map(|s| s.expose().as_bytes().to_vec());
            let sink = CallbackSink::new(name, secret.unwrap_or_default(), hook.callback_timeout)
                .context("cannot build the webhook callback client")?;
            sinks.insert(sink.channel().to_owned(), Arc::new(sink));
        }
        for sink in crate::email::sinks(&settings)? {
            sinks.insert(sink.channel().to_owned(), sink);
        }
        for sink in crate::talk::sinks(&settings)? {
            sinks.insert(sink.channel().to_owned(), sink);
        }
        let counter = TokenCounter::new(settings.conversation.tokenizer)
            .context("cannot load the tokenizer")?;
        let listener = TcpListener::bind(settings.http.listen)
            .await
            .with_context(|| format!("cannot listen on {} (http.listen)", settings.http.listen))?;
        let address = listener.local_addr()?;
        let deps = Deps {
            settings: Arc::new(settings),
            store: store.shared(),
            clock: overrides.clock.unwrap_or_default(),
            context: ContextEngine::new(counter),
            metrics: crate::metrics::Metrics::new(),
            brains: Arc::new(brains),
            sinks: Arc::new(sinks),
            task_ready: Arc::new(Notify::new()),
            delivery_ready: Arc::new(Notify::new()),
            shutdown: CancellationToken::new(),
            talk_pollers: Arc::default(),
            email_trackers: Arc::default(),
            leases: Arc::default(),
            health: crate::health::StoreHealth::default(),
        };
        if deps.settings.scheduler.enabled {
            Scheduler::new(deps.clone())
                .sync_config()
                .await
                .context("cannot store the configured schedules")?;
        }
        let intake = Arc::new(IntakeService::new(deps.clone()));
        let pollers = crate::talk::pollers(&deps.settings, intake.clone(), &deps.shutdown)?;
        let _ = deps.talk_pollers.set(
            pollers
                .into_iter()
                .map(|(name, p)| {
                    let duty = Duty::new(crate::talk::channel_name(&name), p);
                    deps.register_lease(duty.lease());
                    (name, duty)
                })
                .collect(),
        );
        let trackers = crate::email::trackers(&deps.settings, intake.clone(), &deps.shutdown)?;
        let _ = deps.email_trackers.set(
            trackers
                .into_iter()
                .map(|(name, t)| {
                    let duty = Duty::new(crate::email::channel_name(&name), t);
                    deps.register_lease(duty.lease());
                    (name, duty)
                })
                .collect(),
        );
        Ok(App {
            intake,
            deps,
            listener,
            address,
            store,
        })
    }

    /// Where the HTTP server listens (useful with port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn deps(&self) -> &Deps {
        &self.deps
    }

    pub fn intake(&self) -> Arc<dyn Intake> {
        self.intake.clone()
    }

    /// A worker for driving tasks by hand (`run_once`) in tests.
    pub fn worker(&self, id: &str) -> Worker {
        Worker::new(self.deps.clone(), id)
    }

    pub fn outbox(&self, id: &str) -> Outbox {
        Outbox::new(self.deps.clone(), id)
    }

    /// Cancelling it shuts the running app down gracefully.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.deps.shutdown.clone()
    }

    /// Serves HTTP only (no workers, no delivery loop): tests drive those with `run_once`.
    pub fn spawn_http_only(self) -> (SocketAddr, Deps) {
        let router = crate::http::router(self.deps.clone(), self.intake.clone());
        let cancel = self.deps.shutdown.clone();
        tokio::spawn(crate::health::watch(self.deps.clone()));
        tokio::spawn(async move {
            let _ = axum::serve(self.listener, router)
                .with_graceful_shutdown(async move { cancel.cancelled().await })
                .await;
        });
        (self.address, self.deps)
    }

    /// Runs everything until the shutdown token is cancelled, then stops intake, lets running
    /// tasks finish (or hands them back after the grace period) and closes the store.
    pub async fn run(self) -> anyhow::Result<()> {
        let deps = self.deps.clone();
        let tracker = TaskTracker::new();
        // Unique per process even where hostname and pid repeat (containers): a restarted
        // process must never pass for the worker that held a lease before.
        let instance = format!(
            "{}-{}-{:08x}",
            hostname(),
            std::process::id(),
            rand::random::<u32>()
        );
        for n in 0..deps.settings.worker.count {
            tracker.spawn(Worker::new(deps.clone(), format!("{instance}-w{n}")).run());
        }
        tracker.spawn(Outbox::new(deps.clone(), format!("{instance}-outbox")).run());
        tracker.spawn(crate::health::watch(deps.clone()));
        // Pollers, mailboxes and the scheduler each run in one instance at a time (leases).
        let (store, shutdown) = (&deps.store, &deps.shutdown);
        if deps.settings.scheduler.enabled {
            let duty = Duty::new("scheduler", Scheduler::new(deps.clone()));
            deps.register_lease(duty.lease());
            tracker.spawn(duty.run(store.clone(), shutdown.clone()));
        }
        for duty in deps.talk_pollers.get().into_iter().flat_map(|p| p.values()) {
            tracker.spawn(duty.clone().run(store.clone(), shutdown.clone()));
        }
        for duty in deps
            .email_trackers
            .get()
            .into_iter()
            .flat_map(|t| t.values())
        {
            tracker.spawn(duty.clone().run(store.clone(), shutdown.clone()));
        }
        tracker.close();
        let router = crate::http::router(deps.clone(), self.intake.clone());
        tracing::info!(address = %self.address, "ctxgate listening");
        let cancel = deps.shutdown.clone();
        axum::serve(self.listener, router)
            .with_graceful_shutdown(async move { cancel.cancelled().await })
            .await
            .context("HTTP server failed")?;
        deps.shutdown.cancel();
        tracker.wait().await;
        self.store.close().await;
        tracing::info!("ctxgate stopped");
        Ok(())
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "ctxgate".to_owned())
}

/// A webhook with a `secret_file` that does not exist yet gets a fresh random secret there.
fn ensure_webhook_secrets(settings: &mut Settings) -> anyhow::Result<()> {
    for (name, hook) in settings.webhooks.iter_mut() {
        if !hook.enabled || hook.secret.is_some() {
            continue;
        }
        let Some(path) = &hook.secret_file else {
            continue;
        };
        let secret = hex::encode(rand::random::<[u8; 32]>());
        write_private(path, &secret).with_context(|| {
            format!(
                "cannot write webhooks.{name}.secret_file {}",
                path.display()
            )
        })?;
        tracing::info!(webhook = %name, path = %path.display(), "generated a webhook secret");
        hook.secret = Some(Secret::new(secret));
    }
    Ok(())
}

fn write_private(path: &Path, content: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(content.as_bytes())?;
    f.write_all(b"\n")
}
