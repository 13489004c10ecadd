//! Open-loop load against one real `ctxgate serve` process on a fresh SQLite file (issue #9):
//! triggers arrive at a fixed rate for a bounded time, over many conversations and many
//! connections, and the bench reports what intake did (sent, accepted, errors by kind, achieved
//! rate, latency percentiles), the gateway's RSS (start / peak / end, sampled from
//! `/proc/<pid>/status`) and CPU time, and whether every task was completed afterwards.
//!
//! Run: `cargo bench --bench load` (builds the release `ctxgate` binary first; about 1.5 min
//! plus the time the gateway needs to work off the backlog). Settings, as flags after `--` or
//! environment variables:
//!
//! | flag | variable | default | meaning |
//! |---|---|---|---|
//! | `--channel` | `LOAD_CHANNEL` | `webhook` | `webhook` or `talk` |
//! | `--rate` | `LOAD_RATE` | 1000 | triggers per second |
//! | `--secs` | `LOAD_SECS` | 60 | how long triggers are sent |
//! | `--conversations` | `LOAD_CONVERSATIONS` | 1000 | webhook: conversations (round robin) |
//! | `--rooms` | `LOAD_ROOMS` | 200 | talk: one-to-one rooms (round robin) |
//! | `--connections` | `LOAD_CONNECTIONS` | 100 | webhook: client connections |
//! | `--workers` | `LOAD_WORKERS` | 2 | the gateway's `worker.count` |
//! | `--drain-secs` | `LOAD_DRAIN_SECS` | 600 | longest wait for the backlog afterwards |
//!
//! **Open loop.** Trigger `i` is due at `start + i / rate`. A dispatcher hands each trigger to
//! the send queue at its instant whatever the gateway is doing, and latency is measured from
//! that instant to the end of the response, so a stall of the gateway (or of the client's
//! connections) shows up in the latency of every trigger due meanwhile instead of silently
//! slowing the sender down (coordinated omission). The webhook client is a fixed pool of
//! `connections` keep-alive HTTP/1.1 connections taking the queue in turn; each request is
//! signed afresh as docs/webhooks.md ("Signing") tells a client to.
//!
//! **Talk.** `LOAD_CHANNEL=talk` drives the fake Nextcloud Talk server
//! (`ctxgate_talk::fake::FakeTalk`, which follows the Talk API as documented in
//! channels/talk/src/fake/) in a child process (this binary re-executed with `--fake-talk`):
//! users post into one-to-one rooms with the assistant at the fixed rate, the gateway finds
//! them by polling Talk like a real deployment, and the bench measures post → task latency
//! (from each post's scheduled instant to when the task is seen in the store, asked every
//! 20 ms, and to the task's `created_at` stamp).
//!
//! After the send phase the bench waits for the backlog (`ctxgate_tasks_pending` and
//! `_running` of `GET /metrics`), stops the gateway with SIGTERM, and reads the SQLite file:
//! tasks by status, attempts per task, and the completion window.
//!
//! The gateway runs with the defaults of config/default.toml except the keys the bench sets
//! (listen, store, webhook secret, admin token, `worker.count`, the Talk account); `CTXGATE__*`
//! environment variables reach it, so e.g. `CTXGATE__CONVERSATION__ARCHIVE_RECALL=false cargo
//! bench --bench load` measures without archive recall.

#[path = "support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{Row, SqlitePool};
use support::{
    Gateway, RssSampler, busy_percent, config_toml, cpu_seconds, fail, free_port, histogram,
    latency_line, machine_cpu, mib, setting,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Length of the windows of the per-window table.
const WINDOW: Duration = Duration::from_secs(10);
/// How often the gateway's RSS is sampled.
const RSS_EVERY: Duration = Duration::from_millis(200);
/// Client-side bound on one request (the gateway's own `http.request_timeout` is 30 s).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const TALK_PASSWORD: &str = "app-password-of-the-assistant";

struct Params {
    channel: String,
    rate: u64,
    secs: u64,
    conversations: usize,
    rooms: usize,
    connections: usize,
    workers: usize,
    drain: Duration,
}

impl Params {
    fn read() -> Params {
        let p = Params {
            channel: setting("--channel", "LOAD_CHANNEL", "webhook".to_owned()),
            rate: setting("--rate", "LOAD_RATE", 1000),
            secs: setting("--secs", "LOAD_SECS", 60),
            conversations: setting("--conversations", "LOAD_CONVERSATIONS", 1000),
            rooms: setting("--rooms", "LOAD_ROOMS", 200),
            connections: setting("--connections", "LOAD_CONNECTIONS", 100),
            workers: setting("--workers", "LOAD_WORKERS", 2),
            drain: Duration::from_secs(setting("--drain-secs", "LOAD_DRAIN_SECS", 600)),
        };
        if p.rate == 0 || p.secs == 0 || p.conversations == 0 || p.rooms == 0 {
            fail("rate, secs, conversations and rooms must be at least 1");
        }
        if p.connections == 0 || p.workers == 0 {
            fail("connections and workers must be at least 1");
        }
        p
    }

    fn total(&self) -> u64 {
        self.rate * self.secs
    }

    /// When trigger `i` is due, from the start of the send phase.
    fn due(&self, i: u64) -> Duration {
        Duration::from_nanos(i * 1_000_000_000 / self.rate)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("cannot start the tokio runtime: {e}")));
    if let Some(i) = args.iter().position(|a| a == "--fake-talk") {
        let rooms = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(200);
        rt.block_on(fake_talk(rooms));
        return;
    }
    if !support::started_by_cargo_bench("load") {
        return;
    }
    let p = Params::read();
    match p.channel.as_str() {
        "webhook" => rt.block_on(webhook(&p)),
        "talk" => rt.block_on(talk(&p)),
        other => fail(&format!(
            "LOAD_CHANNEL (--channel) must be webhook or talk, not {other:?}"
        )),
    }
}

/// The gateway's configuration: defaults except the worker count, plus `extra`.
fn gateway_config(p: &Params, port: u16, db: &Path, extra: &str) -> String {
    let store = format!("sqlite://{}", db.display());
    config_toml(
        port,
        &store,
        &format!("[worker]\ncount = {}\n\n{extra}", p.workers),
    )
}

async fn print_header(p: &Params, gw: &Gateway, what: &str) {
    println!(
        "load bench ({what}): {} triggers/s for {} s = {} triggers; gateway pid {} \
         (release build, SQLite in a temp dir, echo brain, worker.count = {}, other settings \
         default), ready {:.0} ms after spawn; machine: {} cores, {:.0}% busy with the gateway \
         idle (other processes)",
        p.rate,
        p.secs,
        p.total(),
        gw.pid,
        p.workers,
        gw.started.as_secs_f64() * 1000.0,
        support::cores(),
        support::background_busy(Duration::from_secs(1)).await
    );
}

// ---------------------------------------------------------------- webhook

/// What the send phase saw, kept by the connections as they finish requests.
struct Tally {
    all: Histogram<u64>,
    /// By window of scheduled time.
    windows: Vec<Window>,
    accepted: u64,
    duplicates: u64,
    errors: BTreeMap<String, u64>,
    /// The latest response of the run (for the achieved rate).
    last_done: Option<Instant>,
}

struct Window {
    latency: Histogram<u64>,
    accepted: u64,
    failed: u64,
    rss_kb: u64,
}

struct Job {
    i: u64,
    due: Instant,
}

async fn webhook(p: &Params) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&format!("no temp dir: {e}")));
    let port = free_port();
    let db = dir.path().join("load.db");
    let gw = Gateway::start(dir.path(), port, &gateway_config(p, port, &db, "")).await;
    print_header(p, &gw, "webhook").await;
    let rss = RssSampler::start(gw.pid, RSS_EVERY);
    let url = gw.webhook_url();

    // The connections: each a client with one keep-alive connection, opened before the run.
    let clients: Vec<reqwest::Client> = (0..p.connections)
        .map(|_| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .tcp_nodelay(true)
                .timeout(CLIENT_TIMEOUT)
                .build()
                .unwrap_or_else(|e| fail(&format!("cannot build an HTTP client: {e}")))
        })
        .collect();
    for c in &clients {
        if let Err(e) = c.get(format!("{}/healthz", gw.base())).send().await {
            fail(&format!("warm-up request failed: {e}"));
        }
    }

    let windows = p.secs.div_ceil(WINDOW.as_secs()) as usize;
    let tally = Arc::new(Mutex::new(Tally {
        all: histogram(),
        windows: (0..windows)
            .map(|_| Window {
                latency: histogram(),
                accepted: 0,
                failed: 0,
                rss_kb: 0,
            })
            .collect(),
        accepted: 0,
        duplicates: 0,
        errors: BTreeMap::new(),
        last_done: None,
    }));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let mut connections = Vec::new();
    for client in clients {
        let (rx, tally, url) = (rx.clone(), tally.clone(), url.clone());
        let conversations = p.conversations as u64;
        let rate = p.rate;
        connections.push(tokio::spawn(async move {
            loop {
                // The queue's lock is fair: idle connections take turns.
                let job = rx.lock().await.recv().await;
                let Some(job) = job else { break };
                let conversation = format!("load-{}", job.i % conversations);
                let text = format!(
                    "load message {} in {conversation}: please look at order {} and tell me \
                     when it ships",
                    job.i,
                    job.i * 7 % 1000
                );
                let req = support::signed(&conversation, &format!("m-{}", job.i), &text);
                let outcome = match req.request(&client, &url).send().await {
                    Ok(r) => {
                        let status = r.status();
                        match r.bytes().await {
                            Ok(body) if status.is_success() => Ok(body_duplicate(&body)),
                            Ok(body) => Err(support::refusal_kind(status, &body)),
                            Err(e) => Err(support::error_kind(&e)),
                        }
                    }
                    Err(e) => Err(support::error_kind(&e)),
                };
                let done = Instant::now();
                let took = done.saturating_duration_since(job.due).as_micros() as u64;
                let window = (job.i / rate / WINDOW.as_secs()) as usize;
                let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
                let _ = t.all.record(took.max(1));
                let w = &mut t.windows[window];
                let _ = w.latency.record(took.max(1));
                match outcome {
                    Ok(duplicate) => {
                        w.accepted += 1;
                        t.accepted += 1;
                        t.duplicates += duplicate as u64;
                    }
                    Err(kind) => {
                        w.failed += 1;
                        *t.errors.entry(kind).or_default() += 1;
                    }
                }
                t.last_done = Some(t.last_done.map_or(done, |d| d.max(done)));
            }
        }));
    }

    // The dispatcher: each trigger enters the queue at its instant, come what may.
    let me = std::process::id();
    let cpu_before = (cpu_seconds(gw.pid), machine_cpu(), cpu_seconds(me));
    let start = Instant::now() + Duration::from_millis(50);
    let mut max_lag = Duration::ZERO;
    let mut next_window = 1;
    for i in 0..p.total() {
        let due = start + p.due(i);
        tokio::time::sleep_until(due.into()).await;
        max_lag = max_lag.max(due.elapsed());
        if tx.send(Job { i, due }).is_err() {
            fail("the connections stopped");
        }
        if due >= start + WINDOW * next_window as u32 {
            tally.lock().unwrap_or_else(|p| p.into_inner()).windows[next_window - 1].rss_kb =
                support::rss_kb(gw.pid);
            next_window += 1;
        }
    }
    let sent_by = start.elapsed();
    drop(tx);
    for c in connections {
        let _ = c.await;
    }
    let cpu_after = (cpu_seconds(gw.pid), machine_cpu(), cpu_seconds(me));
    let send_rss = rss.now();
    {
        let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
        let last = t.windows.len() - 1;
        t.windows[last].rss_kb = send_rss.last_kb;
    }
    // Every connection has ended, so the tally is ours alone.
    let Ok(t) = Arc::try_unwrap(tally) else {
        fail("a connection outlived the send phase")
    };
    let t = t.into_inner().unwrap_or_else(|p| p.into_inner());
    let finished = t.last_done.map_or(sent_by, |d| d.duration_since(start));
    let sent = p.total();
    let failed: u64 = t.errors.values().sum();
    println!(
        "  sent {sent} in {:.2} s (dispatcher at most {:.2} ms behind schedule), {} connections, \
         {} conversations",
        sent_by.as_secs_f64(),
        max_lag.as_secs_f64() * 1000.0,
        p.connections,
        p.conversations
    );
    println!(
        "  accepted (202) {} ({} reported duplicate), failed {failed}; achieved {:.0} accepted/s \
         (accepted / time from first due instant to last response, {:.2} s)",
        t.accepted,
        t.duplicates,
        t.accepted as f64 / finished.as_secs_f64(),
        finished.as_secs_f64()
    );
    for (kind, n) in &t.errors {
        println!("    error: {kind}: {n}");
    }
    println!(
        "  intake latency (from the scheduled instant to the end of the response): {}",
        latency_line(&t.all)
    );
    println!("  per {} s window of scheduled time:", WINDOW.as_secs());
    for (n, w) in t.windows.iter().enumerate() {
        let ms = |q: f64| w.latency.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "    {:>3}-{:<3} s: accepted {:>6}, failed {:>5}, p50 {:>8.2} ms, p99 {:>8.2} ms, \
             max {:>8.2} ms, gateway RSS {:.1} MiB",
            n as u64 * WINDOW.as_secs(),
            (n as u64 + 1) * WINDOW.as_secs(),
            w.accepted,
            w.failed,
            ms(0.5),
            ms(0.99),
            w.latency.max() as f64 / 1000.0,
            mib(w.rss_kb)
        );
    }
    let gw_cpu = cpu_after.0 - cpu_before.0;
    println!(
        "  during the send phase: gateway CPU {gw_cpu:.1} s ({:.0}% of one core), bench CPU {:.1} s, \
         machine {:.0}% busy (all {} cores)",
        100.0 * gw_cpu / sent_by.as_secs_f64(),
        cpu_after.2 - cpu_before.2,
        busy_percent(cpu_before.1, cpu_after.1),
        support::cores()
    );
    let accepted = t.accepted - t.duplicates;
    finish(p, gw, rss, &db, accepted, send_rss).await;
}

/// Whether a 202 answer says `"duplicate": true`.
fn body_duplicate(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["duplicate"].as_bool())
        .unwrap_or(false)
}

// ---------------------------------------------------------------- after the send phase

/// Waits for the backlog, stops the gateway, reports RSS and what the store holds.
async fn finish(
    p: &Params,
    gw: Gateway,
    rss: RssSampler,
    db: &Path,
    expected_tasks: u64,
    send_rss: support::RssState,
) {
    let http = reqwest::Client::new();
    let t = Instant::now();
    let cpu_before = cpu_seconds(gw.pid);
    let first = gw.backlog(&http).await;
    let mut last = first;
    let drained = loop {
        match gw.backlog(&http).await {
            Some((0, 0)) => break true,
            Some(b) => last = Some(b),
            None => {}
        }
        if t.elapsed() > p.drain {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let drain = t.elapsed();
    let drain_cpu = cpu_seconds(gw.pid) - cpu_before;
    let end = rss.stop();
    let (problems, examples) = gw.log_problems();
    let log_bytes = std::fs::metadata(gw.log_path()).map_or(0, |m| m.len());
    let status = gw.stop().await;
    let left = |b: Option<(u64, u64)>| b.map_or(0, |(p, r)| p + r);
    let worked_off = left(first).saturating_sub(if drained { 0 } else { left(last) });
    let rate = format!(
        "{worked_off} tasks in {:.1} s = {:.0} tasks/s, gateway CPU {:.1} s = {:.1} ms per task",
        drain.as_secs_f64(),
        worked_off as f64 / drain.as_secs_f64(),
        drain_cpu,
        drain_cpu * 1000.0 / worked_off.max(1) as f64
    );
    if drained {
        println!(
            "  backlog at the end of the send phase: {} tasks; worked off: {rate}",
            left(first)
        );
    } else {
        println!(
            "  backlog at the end of the send phase: {} tasks; NOT worked off within {} s \
             (pending, running at the last look: {last:?}); meanwhile {rate}",
            left(first),
            p.drain.as_secs()
        );
    }
    println!(
        "  gateway RSS: {:.1} MiB at start, {:.1} MiB at the end of the send phase, peak {:.1} MiB \
         (of {} samples every {} ms), {:.1} MiB at the end",
        mib(send_rss.first_kb),
        mib(send_rss.last_kb),
        mib(end.peak_kb),
        end.samples,
        RSS_EVERY.as_millis(),
        mib(end.last_kb)
    );
    println!(
        "  gateway log: {:.1} MiB, {problems} WARN/ERROR lines; exit after SIGTERM: {}",
        log_bytes as f64 / 1_048_576.0,
        status.map_or("killed".to_owned(), |s| s.to_string())
    );
    for line in examples {
        println!("    {line}");
    }
    report_store(db, expected_tasks).await;
}

/// Tasks by status, attempts, and the completion window, from the SQLite file.
async fn report_store(db: &Path, expected: u64) {
    let pool = open_sqlite(db).await;
    let by_status: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, COUNT(*) FROM tasks GROUP BY status ORDER BY status")
            .fetch_all(&pool)
            .await
            .unwrap_or_else(|e| fail(&format!("cannot count tasks: {e}")));
    let total: i64 = by_status.iter().map(|(_, n)| n).sum();
    let completed = by_status
        .iter()
        .find(|(s, _)| s == "completed")
        .map_or(0, |(_, n)| *n);
    let row = sqlx::query(
        "SELECT MIN(created_at), MAX(finished_at),
                (SELECT COUNT(*) FROM task_attempts),
                (SELECT COUNT(*) FROM (SELECT task_id FROM task_attempts GROUP BY task_id
                                       HAVING COUNT(*) > 1))
         FROM tasks",
    )
    .fetch_one(&pool)
    .await
    .unwrap_or_else(|e| fail(&format!("cannot read the completion window: {e}")));
    let first: Option<i64> = row.get(0);
    let last: Option<i64> = row.get(1);
    let attempts: i64 = row.get(2);
    let retried: i64 = row.get(3);
    let mut waits: Vec<f64> = sqlx::query_scalar::<_, i64>(
        "SELECT finished_at - created_at FROM tasks WHERE status = 'completed'",
    )
    .fetch_all(&pool)
    .await
    .unwrap_or_default()
    .into_iter()
    .map(|v| v as f64)
    .collect();
    waits.sort_by(|a, b| a.total_cmp(b));
    pool.close().await;
    let states: Vec<String> = by_status.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let all_done = total as u64 == expected && completed == total;
    println!(
        "  store: {total} tasks for {expected} accepted triggers ({}); {attempts} attempts, \
         {retried} tasks with more than one; all completed: {}",
        states.join(", "),
        if all_done { "yes" } else { "NO" }
    );
    if let (Some(first), Some(last)) = (first, last)
        && last > first
    {
        println!(
            "  completion: {completed} tasks from the first created to the last finished in \
             {:.1} s = {:.0} tasks/s; created → finished p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            (last - first) as f64 / 1000.0,
            completed as f64 * 1000.0 / (last - first) as f64,
            support::percentile(&waits, 50.0),
            support::percentile(&waits, 99.0),
            support::percentile(&waits, 100.0)
        );
    }
}

async fn open_sqlite(db: &Path) -> SqlitePool {
    let options = SqliteConnectOptions::new()
        .filename(db)
        .read_only(true)
        .busy_timeout(Duration::from_secs(5));
    SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .unwrap_or_else(|e| fail(&format!("cannot open {}: {e}", db.display())))
}

// ---------------------------------------------------------------- talk: the fake server child

/// Tasks seen in the store: (room, message id) → (seen at, unix µs; `created_at`, unix ms).
type Seen = HashMap<(String, String), (i64, i64)>;

fn room_token(i: usize) -> String {
    format!("dm{i:05}")
}

/// The child process: the fake Talk server with `rooms` one-to-one rooms between `u<i>` and
/// the assistant. Prints `ready <base url>`, then answers commands on stdin, one line each:
/// `watched` (how many rooms the assistant has read the chat of), and `run <rate> <secs>`
/// (posts open-loop, one line `p <room index> <message id> <due unix µs> <posted unix µs>`
/// per post, then `done <posts>`).
async fn fake_talk(rooms: usize) {
    let fake = ctxgate_talk::fake::FakeTalk::start().await;
    fake.add_user("assistant", "Assistant", Some(TALK_PASSWORD));
    for i in 0..rooms {
        let user = format!("u{i}");
        fake.add_user(&user, &format!("User {i}"), Some("user-password"));
        fake.create_room(&room_token(i), 1, &user, &[&user, "assistant"]);
    }
    let mut out = tokio::io::BufWriter::new(tokio::io::stdout());
    let write = async |out: &mut tokio::io::BufWriter<tokio::io::Stdout>, line: String| {
        let ok = out.write_all(line.as_bytes()).await.is_ok() && out.write_all(b"\n").await.is_ok();
        if !ok {
            std::process::exit(0);
        }
    };
    write(&mut out, format!("ready {}", fake.base_url())).await;
    let _ = out.flush().await;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["watched"] => {
                let mut seen = std::collections::HashSet::new();
                for r in fake.requests() {
                    if r.user.as_deref() == Some("assistant") && format!("{:?}", r.route) == "Chat"
                    {
                        seen.insert(r.path.rsplit('/').next().unwrap_or_default().to_owned());
                    }
                }
                write(&mut out, format!("watched {}", seen.len())).await;
            }
            ["run", rate, secs] => {
                let (Ok(rate), Ok(secs)) = (rate.parse::<u64>(), secs.parse::<u64>()) else {
                    write(&mut out, format!("error bad run command {line:?}")).await;
                    continue;
                };
                let total = rate * secs;
                let start = Instant::now() + Duration::from_millis(50);
                let start_us = unix_us() + 50_000;
                let mut flushed = Instant::now();
                for i in 0..total {
                    let offset = Duration::from_nanos(i * 1_000_000_000 / rate);
                    tokio::time::sleep_until((start + offset).into()).await;
                    let room = i as usize % rooms;
                    let user = format!("u{room}");
                    let id = fake.post(
                        &room_token(room),
                        &user,
                        &format!("question {i}: when does order {} ship?", i * 7 % 1000),
                        serde_json::Value::Null,
                        None,
                    );
                    let due_us = start_us + offset.as_micros() as i64;
                    write(&mut out, format!("p {room} {id} {due_us} {}", unix_us())).await;
                    if flushed.elapsed() > Duration::from_millis(5) {
                        let _ = out.flush().await;
                        flushed = Instant::now();
                    }
                }
                write(&mut out, format!("done {total}")).await;
            }
            _ => write(&mut out, format!("error unknown command {line:?}")).await,
        }
        let _ = out.flush().await;
    }
    fake.shutdown().await;
}

fn unix_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

// ---------------------------------------------------------------- talk: the parent

async fn talk(p: &Params) {
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("no current exe: {e}")));
    let mut fake = tokio::process::Command::new(exe)
        .args(["--fake-talk", &p.rooms.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| fail(&format!("cannot start the fake Talk server: {e}")));
    let fake_pid = fake.id().unwrap_or(0);
    let mut to_fake = fake
        .stdin
        .take()
        .unwrap_or_else(|| fail("no stdin of the fake"));
    let mut from_fake = BufReader::new(
        fake.stdout
            .take()
            .unwrap_or_else(|| fail("no stdout of the fake")),
    )
    .lines();
    let ready = from_fake
        .next_line()
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    let Some(base_url) = ready.strip_prefix("ready ") else {
        fail(&format!(
            "the fake Talk server said {ready:?} instead of ready"
        ))
    };

    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&format!("no temp dir: {e}")));
    let port = free_port();
    let db = dir.path().join("load.db");
    let talk_table = format!(
        "[talk.main]\nbase_url = \"{base_url}\"\nuser = \"assistant\"\npassword = \"{TALK_PASSWORD}\"\n"
    );
    let gw = Gateway::start(dir.path(), port, &gateway_config(p, port, &db, &talk_table)).await;
    print_header(p, &gw, "talk").await;
    let rss = RssSampler::start(gw.pid, RSS_EVERY);

    // Every room read once (first sight) before the clock starts.
    let t = Instant::now();
    loop {
        let _ = to_fake.write_all(b"watched\n").await;
        let _ = to_fake.flush().await;
        let answer = from_fake
            .next_line()
            .await
            .ok()
            .flatten()
            .unwrap_or_default();
        let watched: usize = answer
            .strip_prefix("watched ")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if watched >= p.rooms {
            break;
        }
        if t.elapsed() > Duration::from_secs(120) {
            fail(&format!(
                "the gateway read {watched} of {} rooms within 120 s",
                p.rooms
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "  {} one-to-one rooms (fake Talk pid {fake_pid}), all read by the gateway {:.1} s after \
         it was ready; Talk timings default (room list every 3 s, active rooms long-polled)",
        p.rooms,
        t.elapsed().as_secs_f64()
    );

    // The store, asked every 20 ms for tasks newer than the last one seen.
    let pool = open_sqlite(&db).await;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let stop_watch = tokio_util::sync::CancellationToken::new();
    let watcher = {
        let (pool, seen, stop) = (pool.clone(), seen.clone(), stop_watch.clone());
        tokio::spawn(async move {
            let mut after = 0i64;
            while !stop.is_cancelled() {
                let rows: Vec<(i64, String, i64)> = sqlx::query_as(
                    "SELECT id, dedup_key, created_at FROM tasks WHERE id > ?1 ORDER BY id LIMIT 5000",
                )
                .bind(after)
                .fetch_all(&pool)
                .await
                .unwrap_or_default();
                let now = unix_us();
                {
                    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                    for (id, key, created_at) in rows {
                        after = after.max(id);
                        // [channel, conversation, channel message id, agent]
                        if let Ok(key) = serde_json::from_str::<Vec<String>>(&key)
                            && key.len() >= 3
                        {
                            s.insert((key[1].clone(), key[2].clone()), (now, created_at));
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    let cpu_before = (cpu_seconds(gw.pid), cpu_seconds(fake_pid), machine_cpu());
    let command = format!("run {} {}\n", p.rate, p.secs);
    if to_fake.write_all(command.as_bytes()).await.is_err() || to_fake.flush().await.is_err() {
        fail("the fake Talk server is gone");
    }
    let send_start = Instant::now();
    // room, message id -> due, posted (unix µs)
    let mut posts: Vec<(String, String, i64, i64)> = Vec::with_capacity(p.total() as usize);
    loop {
        let Some(line) = from_fake.next_line().await.ok().flatten() else {
            fail("the fake Talk server stopped while posting")
        };
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["p", room, id, due, posted] => {
                let room: usize = room.parse().unwrap_or(0);
                posts.push((
                    room_token(room),
                    (*id).to_owned(),
                    due.parse().unwrap_or(0),
                    posted.parse().unwrap_or(0),
                ));
            }
            ["done", _] => break,
            _ => fail(&format!("the fake Talk server said {line:?}")),
        }
    }
    let sent_by = send_start.elapsed();
    let cpu_after = (cpu_seconds(gw.pid), cpu_seconds(fake_pid), machine_cpu());
    let send_rss = rss.now();

    // Every post's task, or 60 s without progress.
    let mut last_count = 0;
    let mut progress = Instant::now();
    loop {
        let n = seen.lock().unwrap_or_else(|p| p.into_inner()).len();
        if n >= posts.len() {
            break;
        }
        if n > last_count {
            last_count = n;
            progress = Instant::now();
        }
        if progress.elapsed() > Duration::from_secs(60) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_watch.cancel();
    let _ = watcher.await;
    pool.close().await;
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|p| p.into_inner()));
    let mut observed = histogram();
    let mut stamped = histogram();
    let mut posting = histogram();
    let mut missing = 0;
    let first_due = posts.first().map_or(0, |p| p.2);
    let mut windows: Vec<Histogram<u64>> = Vec::new();
    for (room, id, due, posted) in &posts {
        let _ = posting.record((posted - due).max(1) as u64);
        match seen.get(&(room.clone(), id.clone())) {
            Some((seen_us, created_ms)) => {
                let _ = observed.record((seen_us - due).max(1) as u64);
                let w = ((due - first_due) / WINDOW.as_micros() as i64).max(0) as usize;
                if windows.len() <= w {
                    windows.resize_with(w + 1, histogram);
                }
                let _ = windows[w].record((seen_us - due).max(1) as u64);
                let _ = stamped.record((created_ms * 1000 - due).max(1) as u64);
            }
            None => missing += 1,
        }
    }
    println!(
        "  posted {} in {:.2} s ({:.0} posts/s; due → posted by the fake {})",
        posts.len(),
        sent_by.as_secs_f64(),
        posts.len() as f64 / sent_by.as_secs_f64(),
        latency_line(&posting)
    );
    println!(
        "  tasks for {} of the {} posts ({missing} without a task after 60 s without progress)",
        posts.len() - missing,
        posts.len()
    );
    println!(
        "  post → task seen in the store (from the post's scheduled instant, store asked every \
         20 ms): {}",
        latency_line(&observed)
    );
    println!(
        "  post → the task's created_at (ms resolution): {}",
        latency_line(&stamped)
    );
    for (n, w) in windows.iter().enumerate() {
        println!(
            "    posts due {:>3}-{:<3} s: post → task seen {}",
            n as u64 * WINDOW.as_secs(),
            (n as u64 + 1) * WINDOW.as_secs(),
            latency_line(w)
        );
    }
    let gw_cpu = cpu_after.0 - cpu_before.0;
    println!(
        "  during the send phase: gateway CPU {gw_cpu:.1} s ({:.0}% of one core), fake Talk CPU \
         {:.1} s, machine {:.0}% busy (all {} cores)",
        100.0 * gw_cpu / sent_by.as_secs_f64(),
        cpu_after.1 - cpu_before.1,
        busy_percent(cpu_before.2, cpu_after.2),
        support::cores()
    );
    let expected = (posts.len() - missing) as u64;
    finish(p, gw, rss, &db, expected, send_rss).await;
    drop(to_fake);
    let _ = tokio::time::timeout(Duration::from_secs(10), fake.wait()).await;
}
