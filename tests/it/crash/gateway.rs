//! The real `ctxgate serve` process: written a config file, started on a fixed port and a
//! SQLite file in a temporary folder, killed and started again on the same store.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use super::killer::Killer;

const BIN: &str = env!("CARGO_BIN_EXE_ctxgate");
pub const ADMIN_TOKEN: &str = "crash-suite-admin-token-0123";
pub const WEBHOOK_SECRET: &str = "crash-suite-webhook-secret-0123";
pub const TALK_PASSWORD: &str = "crash-suite-talk-app-password";

/// Where the peers are.
pub struct Peers<'a> {
    pub llm_base: &'a str,
    pub talk_base: &'a str,
}

pub struct Gateway {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
    killer: Arc<Killer>,
    http: reqwest::Client,
    /// Processes started so far.
    pub starts: u32,
}

impl Gateway {
    /// Writes the config; the process is started by [`Gateway::start`].
    pub fn new(dir: &Path, peers: &Peers<'_>, killer: Arc<Killer>) -> Gateway {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        std::fs::write(dir.join("ctxgate.toml"), config(dir, port, peers)).unwrap();
        Gateway {
            dir: dir.to_owned(),
            port,
            child: None,
            killer,
            http: reqwest::Client::new(),
            starts: 0,
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir.join("ctxgate.db")
    }

    /// Starts the process and waits until it answers `/readyz`.
    pub async fn start(&mut self) {
        assert!(self.child.is_none(), "the gateway is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("ctxgate.log"))
            .unwrap();
        let child = Command::new(BIN)
            .current_dir(&self.dir)
            .args(["--config", "ctxgate.toml", "serve"])
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        self.killer.set_pid(child.id().unwrap() as i32);
        self.child = Some(child);
        self.starts += 1;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = self
                .http
                .get(format!("{}/readyz", self.base()))
                .send()
                .await
                && r.status() == 200
            {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "the gateway exited while starting ({status}):\n{}",
                    self.log_tail(40)
                );
            }
            assert!(
                Instant::now() < deadline,
                "the gateway was not ready within 30 s:\n{}",
                self.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the (killed) process to be gone.
    pub async fn reap(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("a running gateway");
        tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("the killed gateway is gone within 10 s")
            .unwrap()
    }

    /// SIGTERM, and a clean exit.
    pub async fn stop(&mut self) {
        let pid = self.killer.take_pid();
        assert!(pid > 0, "the gateway is running");
        // SAFETY: kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = tokio::time::timeout(Duration::from_secs(30), self.reap())
            .await
            .expect("the gateway stops within 30 s of SIGTERM");
        assert!(status.success(), "{status}:\n{}", self.log_tail(40));
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.dir.join("ctxgate.log")).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Lines of the process logs (all runs) containing `needle`.
    pub fn log_count(&self, needle: &str) -> usize {
        std::fs::read_to_string(self.dir.join("ctxgate.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }
}

/// Short leases so that work a killed process held is taken back quickly; attempts generous
/// enough that a task or delivery hit by several kills is still answered.
fn config(dir: &Path, port: u16, peers: &Peers<'_>) -> String {
    format!(
        r#"[http]
listen = "127.0.0.1:{port}"

[store]
url = "sqlite://{db}"

[admin]
token = "{ADMIN_TOKEN}"

[telemetry]
filter = "info,sqlx=warn"

[worker]
count = 4
lease = "2s"
heartbeat = "500ms"
poll_interval = "200ms"
max_attempts = 20
retry_backoff = ["200ms", "500ms"]
fast_retries = 1
fast_retry_backoff = "100ms"
shutdown_grace = "5s"

[outbox]
poll_interval = "200ms"
max_attempts = 50
initial_backoff = "200ms"
max_backoff = "1s"
lease = "2s"

[brains.default]
kind = "openai"
base_url = "{llm}"
model = "fake-model"
api_key = "{key}"
timeout = "10s"

[webhooks.default]
secret = "{WEBHOOK_SECRET}"

[talk.main]
base_url = "{talk}"
user = "assistant"
password = "{TALK_PASSWORD}"
room_list_interval = "100ms"
long_poll_timeout = "1s"
request_timeout = "5s"
max_backoff = "1s"

[scheduler]
enabled = false
"#,
        db = dir.join("ctxgate.db").display(),
        llm = peers.llm_base,
        key = super::llm::API_KEY,
        talk = peers.talk_base,
    )
}
