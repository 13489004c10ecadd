//! Builds the real `App` with test settings: port 0, a fresh SQLite file, a manual clock and a
//! scripted brain.

use std::sync::Arc;
use std::time::Duration;

use ctxgate::brain::{Brain, ScriptedBrain};
use ctxgate::clock::Clock;
use ctxgate::config::Secret;
use ctxgate::deps::Deps;
use ctxgate::outbox::Outbox;
use ctxgate::worker::Worker;
use ctxgate::{App, Overrides, Settings};
use ctxgate_webhook::signature;

pub const SECRET: &str = "test-webhook-secret-0123456789";
pub const ADMIN_TOKEN: &str = "admin-token-for-tests";
/// 2026-01-01T00:00:00Z
pub const START_MS: i64 = 1_767_225_600_000;

pub struct TestApp {
    pub base: String,
    pub deps: Deps,
    pub brain: ScriptedBrain,
    pub clock: Clock,
    pub http: reqwest::Client,
    pub _dir: tempfile::TempDir,
}

pub fn test_settings(dir: &std::path::Path) -> Settings {
    let mut s = Settings::default();
    s.http.listen = "127.0.0.1:0".parse().unwrap();
    s.store.url = format!("sqlite://{}", dir.join("ctxgate.db").display());
    s.admin.token = Some(Secret::new(ADMIN_TOKEN));
    let hook = s.webhooks.get_mut("default").unwrap();
    hook.secret = Some(Secret::new(SECRET));
    hook.secret_file = None;
    // Quick re-tries would sleep in real time: tests exercise the slow retry path.
    s.worker.fast_retries = 0;
    s
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Starts the HTTP side; workers and delivery are driven with `run_once` by the test.
pub async fn spawn_app_with(tweak: impl FnOnce(&mut Settings)) -> TestApp {
    spawn_app_with_brain(ScriptedBrain::new(), tweak).await
}

pub async fn spawn_app_with_brain(
    brain: ScriptedBrain,
    tweak: impl FnOnce(&mut Settings),
) -> TestApp {
    spawn(Some(brain), tweak).await
}

/// The brains exactly as configured (no scripted brain).
pub async fn spawn_app_configured(tweak: impl FnOnce(&mut Settings)) -> TestApp {
    spawn(None, tweak).await
}

async fn spawn(scripted: Option<ScriptedBrain>, tweak: impl FnOnce(&mut Settings)) -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_settings(dir.path());
    tweak(&mut settings);
    let clock = Clock::manual(START_MS);
    let brain = scripted.clone().unwrap_or_default();
    let overrides = Overrides {
        clock: Some(clock.clone()),
        brains: scripted
            .map(|b| [("default".to_owned(), Arc::new(b) as Arc<dyn Brain>)].into())
            .unwrap_or_default(),
    };
    let app = App::build_with(settings, overrides).await.unwrap();
    let (address, deps) = app.spawn_http_only();
    TestApp {
        base: format!("http://{address}"),
        deps,
        brain,
        clock,
        http: reqwest::Client::new(),
        _dir: dir,
    }
}

impl TestApp {
    pub fn worker(&self, id: &str) -> Worker {
        Worker::new(self.deps.clone(), id)
    }

    pub fn outbox(&self) -> Outbox {
        Outbox::new(self.deps.clone(), "test-outbox")
    }

    /// POSTs a webhook body signed now (by the real clock, which the receiver checks).
    pub async fn post_webhook(&self, body: &serde_json::Value) -> reqwest::Response {
        let raw = serde_json::to_vec(body).unwrap();
        let ts = chrono::Utc::now().timestamp();
        self.post_signed(&raw, ts, &signature::sign(SECRET.as_bytes(), ts, &raw))
            .await
    }

    pub async fn post_signed(&self, raw: &[u8], ts: i64, sig: &str) -> reqwest::Response {
        self.http
            .post(format!("{}/webhooks/default", self.base))
            .header("content-type", "application/json")
            .header(signature::TIMESTAMP_HEADER, ts.to_string())
            .header(signature::SIGNATURE_HEADER, sig)
            .body(raw.to_vec())
            .send()
            .await
            .unwrap()
    }

    pub async fn admin_get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap()
    }

    pub async fn admin_json(&self, path: &str) -> serde_json::Value {
        let r = self.admin_get(path).await;
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().await.unwrap()
    }

    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }
}
