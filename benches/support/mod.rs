//! Shared by the benches that drive real `ctxgate serve` processes (`load.rs`, `scale_out.rs`):
//! starting and stopping the built binary with a configuration file, signing webhook requests
//! like a client following docs/webhooks.md, reading a process's RSS and CPU time from
//! `/proc`, a fake OpenAI-compatible model server, fresh PostgreSQL databases, and small
//! statistics helpers.
//!
//! Included with `#[path = "support/mod.rs"] mod support;`; not every bench uses every item.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ctxgate_webhook::signature;
use hdrhistogram::Histogram;
use sqlx::Connection;

/// The `ctxgate` binary cargo built for this bench (the release profile under `cargo bench`).
pub const BIN: &str = env!("CARGO_BIN_EXE_ctxgate");
/// The webhook secret every bench gateway is configured with.
pub const SECRET: &str = "bench-webhook-secret-0123456789";
/// The admin token every bench gateway is configured with.
pub const ADMIN_TOKEN: &str = "bench-admin-token-0123456789";

// ---------------------------------------------------------------- settings from env and flags

/// A setting given as `--name VALUE` on the command line (after `cargo bench --bench x --`) or
/// as the environment variable `ENV`; the default otherwise. A value that does not parse ends
/// the bench with a message naming it.
pub fn setting<T: std::str::FromStr>(flag: &str, env: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    let from_flag = args
        .iter()
        .position(|a| a == flag)
        .map(|i| (format!("flag {flag}"), args.get(i + 1).cloned()));
    let from_env = std::env::var(env)
        .ok()
        .map(|v| (format!("environment variable {env}"), Some(v)));
    match from_flag.or(from_env) {
        None => default,
        Some((origin, None)) => fail(&format!("{origin} needs a value")),
        Some((origin, Some(raw))) => raw
            .trim()
            .parse()
            .unwrap_or_else(|_| fail(&format!("{origin}: cannot parse {raw:?}"))),
    }
}

/// Whether the binary was started by `cargo bench` (which passes `--bench`). `cargo test
/// --all-targets` runs bench binaries without it; the benches then only say how to run them,
/// so that a test run does not start minutes of load.
pub fn started_by_cargo_bench(name: &str) -> bool {
    if std::env::args().any(|a| a == "--bench") {
        return true;
    }
    println!("{name}: skipped (not run by `cargo bench`); run `cargo bench --bench {name}`");
    false
}

/// Ends the bench with a message (a bench has no caller to hand an error to).
pub fn fail(message: &str) -> ! {
    eprintln!("bench: {message}");
    std::process::exit(2)
}

// ---------------------------------------------------------------- /proc

/// The resident set size of `pid` in KiB (`VmRSS` of `/proc/<pid>/status`), 0 once it is gone.
pub fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// CPU time (user + system, seconds) `pid` has used so far, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after its ')' are fixed.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) / clock_ticks_per_second()
}

/// CPU time (seconds) of every running process whose command name is `name` (e.g. the
/// `postgres` server and its backends; processes that ended meanwhile are not counted).
pub fn named_cpu_seconds(name: &str) -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
        })
        .map(cpu_seconds)
        .sum()
}

/// The machine's CPU counters (busy, total jiffies) from the `cpu` line of `/proc/stat`.
pub fn machine_cpu() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return (0, 0);
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    // idle and iowait
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// Share of all cores busy between two [`machine_cpu`] readings, in percent.
pub fn busy_percent(before: (u64, u64), after: (u64, u64)) -> f64 {
    let busy = after.0.saturating_sub(before.0) as f64;
    let total = after.1.saturating_sub(before.1) as f64;
    if total > 0.0 {
        100.0 * busy / total
    } else {
        0.0
    }
}

/// How busy the machine is before a run (other processes), in percent, measured over `over`.
pub async fn background_busy(over: Duration) -> f64 {
    let before = machine_cpu();
    tokio::time::sleep(over).await;
    busy_percent(before, machine_cpu())
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// RSS of a process sampled every `every` by a background task: first, peak and last sample.
pub struct RssSampler {
    pid: u32,
    state: std::sync::Arc<std::sync::Mutex<RssState>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct RssState {
    pub first_kb: u64,
    pub peak_kb: u64,
    pub last_kb: u64,
    pub samples: u64,
}

impl RssSampler {
    pub fn start(pid: u32, every: Duration) -> RssSampler {
        let state = std::sync::Arc::new(std::sync::Mutex::new(RssState::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let kb = rss_kb(pid);
                if kb == 0 {
                    break;
                }
                let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                if s.samples == 0 {
                    s.first_kb = kb;
                }
                s.peak_kb = s.peak_kb.max(kb);
                s.last_kb = kb;
                s.samples += 1;
            }
        });
        RssSampler { pid, state, task }
    }

    /// The samples so far, with one taken now.
    pub fn now(&self) -> RssState {
        let kb = rss_kb(self.pid);
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if kb > 0 {
            s.peak_kb = s.peak_kb.max(kb);
            s.last_kb = kb;
        }
        *s
    }

    pub fn stop(self) -> RssState {
        let s = self.now();
        self.task.abort();
        s
    }
}

// ---------------------------------------------------------------- webhook requests

/// A signed `POST /webhooks/default` request: the body and its two headers, signed now, as
/// docs/webhooks.md ("Signing") tells a client to do.
pub struct Signed {
    pub body: Vec<u8>,
    pub timestamp: String,
    pub signature: String,
}

pub fn signed(conversation: &str, message_id: &str, text: &str) -> Signed {
    let body = serde_json::to_vec(&serde_json::json!({
        "conversation": conversation,
        "sender": "bench-user",
        "sender_name": "Bench User",
        "text": text,
        "message_id": message_id,
    }))
    .expect("a JSON object serialises");
    let ts = chrono::Utc::now().timestamp();
    let signature = signature::sign(SECRET.as_bytes(), ts, &body);
    Signed {
        body,
        timestamp: ts.to_string(),
        signature,
    }
}

impl Signed {
    pub fn request(self, http: &reqwest::Client, url: &str) -> reqwest::RequestBuilder {
        http.post(url)
            .header("content-type", "application/json")
            .header(signature::TIMESTAMP_HEADER, self.timestamp)
            .header(signature::SIGNATURE_HEADER, self.signature)
            .body(self.body)
    }
}

/// How a request ended, for "errors by kind".
pub fn error_kind(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "client timeout".to_owned()
    } else if e.is_connect() {
        "connect error".to_owned()
    } else if e.is_request() {
        "request error (connection reset or closed)".to_owned()
    } else if e.is_body() || e.is_decode() {
        "response body error".to_owned()
    } else {
        format!("other client error: {e}")
    }
}

/// `"<status> <error code>"` of a refused request, the code read from the JSON error body.
pub fn refusal_kind(status: reqwest::StatusCode, body: &[u8]) -> String {
    let code = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "(no error code)".to_owned());
    format!("HTTP {} {code}", status.as_u16())
}

// ---------------------------------------------------------------- the gateway process

/// A free loopback port (bound, read and released; the gateway binds it right after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| fail(&format!("cannot find a free port: {e}")))
}

/// One running `ctxgate serve` child process, started in `dir` with `dir/bench.toml`; its
/// log (stderr) goes to `dir/ctxgate.log`.
pub struct Gateway {
    pub child: tokio::process::Child,
    pub pid: u32,
    pub port: u16,
    pub dir: PathBuf,
    pub started: Duration,
}

/// The configuration every bench gateway shares: the echo brain (the default), the webhook
/// secret, the admin token, `listen` and `store.url`; `extra` is appended (whole tables).
pub fn config_toml(port: u16, store_url: &str, extra: &str) -> String {
    format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [store]\nurl = \"{store_url}\"\n\n\
         [admin]\ntoken = \"{ADMIN_TOKEN}\"\n\n\
         [webhooks.default]\nsecret = \"{SECRET}\"\n\n\
         {extra}\n"
    )
}

impl Gateway {
    /// Writes the configuration, starts `ctxgate serve` and waits (up to 60 s) until `/readyz`
    /// answers 200.
    pub async fn start(dir: &Path, port: u16, config: &str) -> Gateway {
        std::fs::create_dir_all(dir)
            .unwrap_or_else(|e| fail(&format!("cannot create {}: {e}", dir.display())));
        let config_path = dir.join("bench.toml");
        std::fs::write(&config_path, config)
            .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", config_path.display())));
        let log_path = dir.join("ctxgate.log");
        let log = std::fs::File::create(&log_path)
            .unwrap_or_else(|e| fail(&format!("cannot create {}: {e}", log_path.display())));
        let t = Instant::now();
        let mut child = tokio::process::Command::new(BIN)
            .current_dir(dir)
            .args(["--config", "bench.toml", "serve"])
            .env_remove("RUST_LOG")
            .env_remove("CTXGATE_CONFIG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| fail(&format!("cannot start {BIN}: {e}")));
        let pid = child.id().unwrap_or(0);
        let http = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{port}/readyz");
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                fail(&format!(
                    "ctxgate serve exited at start ({status}); its log:\n{log}"
                ));
            }
            if let Ok(r) = http.get(&url).send().await
                && r.status().is_success()
            {
                break;
            }
            if t.elapsed() > Duration::from_secs(60) {
                fail(&format!(
                    "ctxgate serve (pid {pid}) is not ready after 60 s; see {}",
                    log_path.display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Gateway {
            child,
            pid,
            port,
            dir: dir.to_owned(),
            started: t.elapsed(),
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn webhook_url(&self) -> String {
        format!("{}/webhooks/default", self.base())
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("ctxgate.log")
    }

    /// `(pending, running)` from the `ctxgate_tasks_pending` / `ctxgate_tasks_running` gauges
    /// of `GET /metrics` (read from the store at scrape time).
    pub async fn backlog(&self, http: &reqwest::Client) -> Option<(u64, u64)> {
        let text = http
            .get(format!("{}/metrics", self.base()))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        let gauge = |name: &str| {
            text.lines()
                .find(|l| l.split_whitespace().next() == Some(name))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
                .map(|v| v as u64)
        };
        Some((
            gauge("ctxgate_tasks_pending")?,
            gauge("ctxgate_tasks_running")?,
        ))
    }

    /// Lines of the log at WARN or ERROR level: how many, and the first few.
    pub fn log_problems(&self) -> (usize, Vec<String>) {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .collect();
        (
            bad.len(),
            bad.iter().take(3).map(|l| (*l).to_owned()).collect(),
        )
    }

    /// SIGTERM, then waits up to 30 s for a clean exit (killed after that).
    pub async fn stop(mut self) -> Option<std::process::ExitStatus> {
        // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                eprintln!(
                    "bench: ctxgate serve (pid {}) did not stop within 30 s of SIGTERM; killing it",
                    self.pid
                );
                let _ = self.child.kill().await;
                None
            }
        }
    }
}

// ---------------------------------------------------------------- a fake model server

/// A fake OpenAI-compatible model for the `openai` brain kind, served inside the bench process
/// on `127.0.0.1:<free port>`: `POST /v1/chat/completions` answered after a fixed latency with
/// the response shape of the OpenAI Chat Completions API reference (`id`, `object:
/// "chat.completion"`, `created`, `model`, `choices[{index, message{role: "assistant",
/// content}, finish_reason: "stop"}]`, `usage{prompt_tokens, completion_tokens,
/// total_tokens}`). Context triage prompts (one user message asking for `{"relevant": [...]}`)
/// get an empty selection; other requests a short fixed answer. The latency stands for the
/// remote model's time to answer; requests are served concurrently.
pub struct FakeModel {
    base: String,
    counts: std::sync::Arc<FakeModelCounts>,
    task: tokio::task::JoinHandle<()>,
}

/// Requests a [`FakeModel`] answered, by kind.
#[derive(Default)]
pub struct FakeModelCounts {
    pub answers: std::sync::atomic::AtomicU64,
    pub triage: std::sync::atomic::AtomicU64,
    /// Requests that were not a chat completion the fake understands (answered 400).
    pub bad: std::sync::atomic::AtomicU64,
}

struct FakeModelState {
    latency: Duration,
    counts: std::sync::Arc<FakeModelCounts>,
}

/// The model name bench configurations give the fake (it echoes whatever it is sent).
pub const FAKE_MODEL_NAME: &str = "bench-fake-model";

impl FakeModel {
    pub async fn start(latency: Duration) -> FakeModel {
        use axum::routing::post;
        let counts = std::sync::Arc::new(FakeModelCounts::default());
        let state = std::sync::Arc::new(FakeModelState {
            latency,
            counts: counts.clone(),
        });
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(fake_completion))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| fail(&format!("cannot bind the fake model server: {e}")));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| fail(&format!("the fake model server has no address: {e}")));
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("bench: the fake model server stopped: {e}");
            }
        });
        FakeModel {
            base: format!("http://{addr}/v1"),
            counts,
            task,
        }
    }

    /// The `base_url` of a brain using the fake (`http://127.0.0.1:<port>/v1`).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The `[brains.default]` table of an `openai` brain using the fake.
    pub fn brain_toml(&self) -> String {
        format!(
            "[brains.default]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"{FAKE_MODEL_NAME}\"\n",
            self.base
        )
    }

    /// `(answers, triage, bad)` requests so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.counts.answers.load(Relaxed),
            self.counts.triage.load(Relaxed),
            self.counts.bad.load(Relaxed),
        )
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

async fn fake_completion(
    axum::extract::State(state): axum::extract::State<std::sync::Arc<FakeModelState>>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use std::sync::atomic::Ordering::Relaxed;
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let Some(messages) = request["messages"].as_array().filter(|m| !m.is_empty()) else {
        state.counts.bad.fetch_add(1, Relaxed);
        let error = serde_json::json!({"error": {"message": "messages must be a non-empty array",
            "type": "invalid_request_error", "param": "messages", "code": null}});
        return (axum::http::StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    };
    let triage = messages.len() == 1
        && messages[0]["role"] == "user"
        && messages[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("{\"relevant\": [numbers]}"));
    let content = if triage {
        state.counts.triage.fetch_add(1, Relaxed);
        "{\"relevant\": []}"
    } else {
        state.counts.answers.fetch_add(1, Relaxed);
        "The fake model's answer."
    };
    // The remote model's time to answer (a modelled latency, not synchronisation).
    tokio::time::sleep(state.latency).await;
    let prompt_chars: usize = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .map(str::len)
        .sum();
    let prompt_tokens = (prompt_chars / 4).max(1) as u64;
    let completion_tokens = (content.len() / 4).max(1) as u64;
    axum::Json(serde_json::json!({
        "id": format!("chatcmpl-{:016x}", rand::random::<u64>()),
        "object": "chat.completion",
        "created": chrono::Utc::now().timestamp(),
        "model": request["model"],
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }))
    .into_response()
}

// ---------------------------------------------------------------- PostgreSQL

/// A database created for one run and dropped by [`FreshPg::drop_now`].
pub struct FreshPg {
    pub server: String,
    pub name: String,
}

impl FreshPg {
    /// `CREATE DATABASE ctxgate_bench_<random>` on `server` (`postgres://user@host:port`).
    pub async fn create(server: &str) -> FreshPg {
        let name = format!("ctxgate_bench_{:08x}", rand::random::<u32>());
        let mut admin = sqlx::PgConnection::connect(&format!("{server}/postgres"))
            .await
            .unwrap_or_else(|e| fail(&format!("cannot connect to PostgreSQL at {server}: {e}")));
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| fail(&format!("cannot create database {name}: {e}")));
        let _ = admin.close().await;
        FreshPg {
            server: server.to_owned(),
            name,
        }
    }

    pub fn url(&self) -> String {
        format!("{}/{}", self.server, self.name)
    }

    /// Drops the database (closing any sessions still connected to it).
    pub async fn drop_now(self) {
        match sqlx::PgConnection::connect(&format!("{}/postgres", self.server)).await {
            Ok(mut admin) => {
                let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
                if let Err(e) = sqlx::query(&sql).execute(&mut admin).await {
                    eprintln!("bench: cannot drop database {}: {e}", self.name);
                }
                let _ = admin.close().await;
            }
            Err(e) => eprintln!("bench: cannot drop database {}: {e}", self.name),
        }
    }
}

// ---------------------------------------------------------------- statistics

/// A latency histogram in microseconds, 1 µs to 10 min, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// `p50 / p90 / p99 / max` in ms of a histogram of µs.
pub fn latency_line(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "no samples".to_owned();
    }
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    format!(
        "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(0.50),
        ms(0.90),
        ms(0.99),
        h.max() as f64 / 1000.0
    )
}

/// The `p`th percentile (0–100, nearest rank) of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}
